// NormAct's eager fast path in PyTorch (graphopt/fused/torch_native): norm_act and add_norm_act on
// contiguous tensors of one dtype, with a scale and bias of the normalized shape and a residual of
// X's shape, launched through GraphoptEagerNormAct (cuda_launch.cc). Other calls (broadcast
// operands, mixed dtypes, strided or empty tensors) are declined and take the Python path. Calls that
// need a gradient run layer_norm / rms_norm and the activation (the Python math's native ops, in the
// storage dtype as there) where every operand has X's dtype and the shapes above.
#include <ATen/ops/add.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/rms_norm.h>
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

// The same arguments, as the native ops (norm_act/torch_math.py's norm_act, residual_sum).
bool NormActMath(torch::jit::Stack& stack, size_t arguments, bool with_residual) {
  auto args = torch::jit::last(stack, arguments);
  size_t i = 0;
  const at::Tensor& x = args[i++].toTensor();
  const at::Tensor* residual = with_residual ? &args[i++].toTensor() : nullptr;
  const at::Tensor* scale = OptionalTensor(args[i++]);
  const at::Tensor* bias = OptionalTensor(args[i++]);
  const std::string& norm = args[i++].toStringRef();
  const std::string& activation = args[i++].toStringRef();
  const double eps = args[i++].toDouble();
  const c10::IValue& axis = args[i++];
  if (!axis.isInt() || x.dim() == 0 || !x.is_floating_point() || !KnownActivation(activation)) return false;
  if (norm != "layer" && norm != "rms") return false;
  const int64_t rank = x.dim(), dim = axis.toInt() < 0 ? axis.toInt() + rank : axis.toInt();
  if (dim < 0 || dim >= rank) return false;
  const c10::IntArrayRef normalized = x.sizes().slice(dim);
  if (!SameType(scale, x, normalized) || !SameType(bias, x, normalized) || !SameType(residual, x, x.sizes())) {
    return false;
  }
  const at::Tensor s = residual ? at::add(x, *residual) : x;
  const std::optional<at::Tensor> weight = scale ? std::optional<at::Tensor>(*scale) : std::nullopt;
  at::Tensor z;
  if (norm == "layer") {
    z = at::layer_norm(s, normalized, weight, bias ? std::optional<at::Tensor>(*bias) : std::nullopt, eps);
  } else {
    z = at::rms_norm(s, normalized, weight, eps);
    if (bias) z = at::add(z, *bias);
  }
  Return(stack, arguments, {Activate(activation, z).contiguous(), residual ? s : at::Tensor()});
  return true;
}

const bool registered =
    AddFastPath({"norm_act", "GraphoptEagerNormAct", &Form<NormAct, false>, &GradForm<NormActMath, false>}) &&
    AddFastPath({"add_norm_act", "GraphoptEagerNormAct", &Form<NormAct, true>, &GradForm<NormActMath, true>});

}  // namespace
}  // namespace graphopt::torch_native
