// NormActLinear's eager fast path in PyTorch (graphopt/fused/torch_native): norm_act_linear and
// add_norm_act_linear on contiguous tensors of one dtype, with a scale and bias of the last dim, one
// [K, D] weight matrix, a linear bias of K and a residual of X's shape, launched through
// GraphoptEagerNormActLinear (cuda_launch.cc). Other calls (per-row operands, per-slice matrices)
// take the Python path.
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>

#include <vector>

#include "torch_native/fast_path.h"

namespace graphopt::torch_native {
namespace {

using Entry = int (*)(const void* x, const void* residual, const void* scale, const void* bias, const void* weight,
                      const void* linear_bias, void* y, void* residual_sum, int64_t rows, int64_t cols,
                      int64_t out_features, float epsilon, const char* norm, const char* activation,
                      const char* out_activation, int32_t dtype, void* stream, char* error, size_t error_size);

// Arguments: x, [residual,] weight?, bias?, linear_weight, linear_bias?, norm, activation, eps,
// out_activation (the torch forms' schemas).
Outcome NormActLinear(torch::jit::Stack& stack, size_t arguments, void* entry, std::string* failure,
                      bool with_residual) {
  const auto [x, residual, scale, bias, rest] = ReadNormOperands(stack, arguments, with_residual);
  const at::Tensor& weight = rest[0].toTensor();
  const at::Tensor* linear_bias = OptionalTensor(rest[1]);
  const c10::IValue& norm = rest[2];
  const c10::IValue& activation = rest[3];
  const double eps = rest[4].toDouble();
  const c10::IValue& out_activation = rest[5];
  const int32_t dtype = DTypeCode(x.scalar_type());
  if (dtype < 0 || x.dim() == 0 || x.numel() == 0 || !x.is_contiguous() || weight.dim() != 2) {
    return Outcome::kDeclined;
  }
  const int64_t cols = x.size(-1), out_features = weight.size(0);
  if (!SameKind(&weight, x, {out_features, cols}) || !SameKind(scale, x, {cols}) || !SameKind(bias, x, {cols}) ||
      !SameKind(linear_bias, x, {out_features}) || !SameKind(residual, x, x.sizes())) {
    return Outcome::kDeclined;
  }
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = out_features;
  const c10::DeviceGuard on_device(x.device());
  at::Tensor y = at::empty(shape, x.options());
  at::Tensor sum = residual ? EmptyLike(x) : at::Tensor();
  char error[512] = "";
  const int outcome = reinterpret_cast<Entry>(entry)(
      x.const_data_ptr(), DataOrNull(residual), DataOrNull(scale), DataOrNull(bias), weight.const_data_ptr(),
      DataOrNull(linear_bias), y.mutable_data_ptr(),
      residual ? sum.mutable_data_ptr() : nullptr, x.numel() / cols, cols, out_features, static_cast<float>(eps),
      norm.toStringRef().c_str(), activation.toStringRef().c_str(), out_activation.toStringRef().c_str(), dtype,
      CurrentStream(x.device()), error, sizeof error);
  return Finish(outcome, error, failure, stack, arguments, {y, sum});
}

const bool registered = AddFastPath({"norm_act_linear", "GraphoptEagerNormActLinear", &Form<NormActLinear, false>}) &&
                        AddFastPath({"add_norm_act_linear", "GraphoptEagerNormActLinear", &Form<NormActLinear, true>});

}  // namespace
}  // namespace graphopt::torch_native
