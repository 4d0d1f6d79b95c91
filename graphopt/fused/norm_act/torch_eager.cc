// NormAct's eager fast path in PyTorch (graphopt/fused/torch_native): norm_act and add_norm_act on
// contiguous tensors of one dtype, with a scale and bias of the normalized shape and a residual of
// X's shape, launched through GraphoptEagerNormAct (cuda_launch.cc). Other calls (broadcast
// operands, mixed dtypes, strided or empty tensors) are declined and take the Python path.
#include <c10/core/DeviceGuard.h>
#include <c10/util/accumulate.h>

#include "torch_native/fast_path.h"

namespace graphopt::torch_native {
namespace {

using Entry = int (*)(const void* x, const void* residual, const void* scale, const void* bias, void* y,
                      void* residual_sum, int64_t rows, int64_t cols, float epsilon, const char* norm,
                      const char* activation, int32_t dtype, void* stream, char* error, size_t error_size);

// Arguments: x, [residual,] weight?, bias?, norm, activation, eps, axis (the torch forms' schemas).
Outcome NormAct(torch::jit::Stack& stack, size_t arguments, void* entry, std::string* failure, bool with_residual) {
  auto args = torch::jit::last(stack, arguments);
  size_t i = 0;
  const at::Tensor& x = args[i++].toTensor();
  const at::Tensor* residual = with_residual ? &args[i++].toTensor() : nullptr;
  const at::Tensor* scale = OptionalTensor(args[i++]);
  const at::Tensor* bias = OptionalTensor(args[i++]);
  const c10::IValue& norm = args[i++];
  const c10::IValue& activation = args[i++];
  const double eps = args[i++].toDouble();
  const c10::IValue& axis = args[i++];
  const int32_t dtype = DTypeCode(x.scalar_type());
  if (dtype < 0 || !axis.isInt() || x.dim() == 0 || x.numel() == 0 || !x.is_contiguous()) return Outcome::kDeclined;
  const int64_t rank = x.dim(), dim = axis.toInt() < 0 ? axis.toInt() + rank : axis.toInt();
  if (dim < 0 || dim >= rank) return Outcome::kDeclined;
  const c10::IntArrayRef normalized = x.sizes().slice(dim);
  if (!SameKind(scale, x, normalized) || !SameKind(bias, x, normalized) || !SameKind(residual, x, x.sizes())) {
    return Outcome::kDeclined;
  }
  const int64_t cols = c10::multiply_integers(normalized);
  const c10::DeviceGuard on_device(x.device());
  at::Tensor y = EmptyLike(x);
  at::Tensor sum = residual ? EmptyLike(x) : at::Tensor();
  char error[512] = "";
  const int outcome = reinterpret_cast<Entry>(entry)(
      x.const_data_ptr(), residual ? residual->const_data_ptr() : nullptr, scale ? scale->const_data_ptr() : nullptr,
      bias ? bias->const_data_ptr() : nullptr, y.mutable_data_ptr(), residual ? sum.mutable_data_ptr() : nullptr,
      x.numel() / cols, cols, static_cast<float>(eps), norm.toStringRef().c_str(), activation.toStringRef().c_str(),
      dtype, CurrentStream(x.device()), error, sizeof error);
  return Finish(outcome, error, failure, stack, arguments, {y, sum});
}

const bool registered = AddFastPath({"norm_act", "GraphoptEagerNormAct", &Form<NormAct, false>}) &&
                        AddFastPath({"add_norm_act", "GraphoptEagerNormAct", &Form<NormAct, true>});

}  // namespace
}  // namespace graphopt::torch_native
