// AffineAct's eager fast path in PyTorch (graphopt/fused/torch_native): affine_act on a contiguous
// tensor, with a scale and bias of one element per channel of its dtype, launched through
// GraphoptEagerAffineAct (cuda_launch.cc). Other calls take the Python path. Calls that need a gradient
// run the multiply, add and activation (the Python math's native ops) where scale and bias are
// vectors of X's dtype.
#include <ATen/ops/add.h>
#include <ATen/ops/mul.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/accumulate.h>

#include <vector>

#include "torch_native/fast_path.h"

namespace graphopt::torch_native {
namespace {

using Entry = int (*)(const void* x, const void* scale, const void* bias, void* y, int64_t rows, int64_t cols,
                      int64_t channels, int32_t per_row, const char* activation, int32_t dtype, void* stream,
                      char* error, size_t error_size);

// Arguments: x, scale?, bias?, activation, axis (the op's schema).
Outcome AffineAct(torch::jit::Stack& stack, size_t arguments, void* entry, std::string* failure) {
  auto args = torch::jit::last(stack, arguments);
  const at::Tensor& x = args[0].toTensor();
  const at::Tensor* scale = OptionalTensor(args[1]);
  const at::Tensor* bias = OptionalTensor(args[2]);
  const c10::IValue& activation = args[3];
  const c10::IValue& axis = args[4];
  const int32_t dtype = DTypeCode(x.scalar_type());
  if (dtype < 0 || !axis.isInt() || x.dim() == 0 || x.numel() == 0 || !x.is_contiguous()) return Outcome::kDeclined;
  const int64_t rank = x.dim(), dim = axis.toInt() < 0 ? axis.toInt() + rank : axis.toInt();
  if (dim < 0 || dim >= rank) return Outcome::kDeclined;
  const int64_t channels = x.size(dim);
  if (!SameKindElements(scale, x, channels) || !SameKindElements(bias, x, channels)) return Outcome::kDeclined;
  const bool per_row = dim != rank - 1;
  const int64_t cols = per_row ? c10::multiply_integers(x.sizes().slice(dim + 1)) : channels;
  const c10::DeviceGuard on_device(x.device());
  at::Tensor y = EmptyLike(x);
  char error[512] = "";
  const int outcome = reinterpret_cast<Entry>(entry)(
      x.const_data_ptr(), DataOrNull(scale), DataOrNull(bias),
      y.mutable_data_ptr(), x.numel() / cols, cols, channels, per_row, activation.toStringRef().c_str(), dtype,
      CurrentStream(x.device()), error, sizeof error);
  return Finish(outcome, error, failure, stack, arguments, {y});
}

// The same arguments, as the native ops (affine_act/torch_math.py's affine_act).
bool AffineActMath(torch::jit::Stack& stack, size_t arguments) {
  auto args = torch::jit::last(stack, arguments);
  const at::Tensor& x = args[0].toTensor();
  const at::Tensor* scale = OptionalTensor(args[1]);
  const at::Tensor* bias = OptionalTensor(args[2]);
  const std::string& activation = args[3].toStringRef();
  const c10::IValue& axis = args[4];
  if (!axis.isInt() || x.dim() == 0 || !x.is_floating_point() || !KnownActivation(activation)) return false;
  // (nothing to compute would return X itself, which an op's output must not be)
  if (scale == nullptr && bias == nullptr && activation == "identity") return false;
  const int64_t rank = x.dim(), dim = axis.toInt() < 0 ? axis.toInt() + rank : axis.toInt();
  if (dim < 0 || dim >= rank) return false;
  const int64_t channels = x.size(dim);
  if (!SameType(scale, x, {channels}) || !SameType(bias, x, {channels})) return false;
  std::vector<int64_t> shape(rank, 1);
  shape[dim] = -1;
  at::Tensor z = x;
  if (scale) z = at::mul(z, scale->view(shape));
  if (bias) z = at::add(z, bias->view(shape));
  Return(stack, arguments, {Activate(activation, z).contiguous()});
  return true;
}

const bool registered = AddFastPath({"affine_act", "GraphoptEagerAffineAct", &AffineAct, &AffineActMath});

}  // namespace
}  // namespace graphopt::torch_native
