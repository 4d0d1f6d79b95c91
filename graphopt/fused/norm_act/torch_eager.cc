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

// A call's arguments, x, [residual,] weight?, bias?, norm, activation, eps, axis (the torch forms'
// schemas), with the dims it normalizes; nullopt where the axis is not an int in range (the Python
// kernels name the error).
struct NormActCall {
  NormOperands t;
  const std::string& norm;
  const std::string& activation;
  double eps;
  c10::IntArrayRef normalized;
};

std::optional<NormActCall> Read(const torch::jit::Stack& stack, size_t arguments, bool with_residual) {
  const NormOperands t = ReadNormOperands(stack, arguments, with_residual);
  const c10::IValue& axis = t.rest[3];
  const int64_t rank = t.x.dim();
  if (!axis.isInt() || rank == 0) return std::nullopt;
  const int64_t dim = axis.toInt() < 0 ? axis.toInt() + rank : axis.toInt();
  if (dim < 0 || dim >= rank) return std::nullopt;
  return NormActCall{t, t.rest[0].toStringRef(), t.rest[1].toStringRef(), t.rest[2].toDouble(), t.x.sizes().slice(dim)};
}

Outcome NormAct(torch::jit::Stack& stack, size_t arguments, void* entry, std::string* failure, bool with_residual) {
  const std::optional<NormActCall> call = Read(stack, arguments, with_residual);
  if (!call) return Outcome::kDeclined;
  const auto& [x, residual, scale, bias, rest] = call->t;
  const int32_t dtype = DTypeCode(x.scalar_type());
  if (dtype < 0 || x.numel() == 0 || !x.is_contiguous()) return Outcome::kDeclined;
  if (!SameKind(scale, x, call->normalized) || !SameKind(bias, x, call->normalized) ||
      !SameKind(residual, x, x.sizes())) {
    return Outcome::kDeclined;
  }
  const int64_t cols = c10::multiply_integers(call->normalized);
  const c10::DeviceGuard on_device(x.device());
  at::Tensor y = EmptyLike(x);
  at::Tensor sum = residual ? EmptyLike(x) : at::Tensor();
  char error[512] = "";
  const int outcome = reinterpret_cast<Entry>(entry)(
      x.const_data_ptr(), DataOrNull(residual), DataOrNull(scale), DataOrNull(bias), y.mutable_data_ptr(),
      residual ? sum.mutable_data_ptr() : nullptr, x.numel() / cols, cols, static_cast<float>(call->eps),
      call->norm.c_str(), call->activation.c_str(), dtype, CurrentStream(x.device()), error, sizeof error);
  return Finish(outcome, error, failure, stack, arguments, {y, sum});
}

// The same call, as the native ops (norm_act/torch_math.py's norm_act, residual_sum).
bool NormActMath(torch::jit::Stack& stack, size_t arguments, bool with_residual) {
  const std::optional<NormActCall> call = Read(stack, arguments, with_residual);
  if (!call) return false;
  const auto& [x, residual, scale, bias, rest] = call->t;
  const std::string& norm = call->norm;
  if (!x.is_floating_point() || !KnownActivation(call->activation) || (norm != "layer" && norm != "rms")) {
    return false;
  }
  if (!SameType(scale, x, call->normalized) || !SameType(bias, x, call->normalized) ||
      !SameType(residual, x, x.sizes())) {
    return false;
  }
  const at::Tensor s = residual ? at::add(x, *residual) : x;
  at::Tensor z;
  if (norm == "layer") {
    z = at::layer_norm(s, call->normalized, AsOptional(scale), AsOptional(bias), call->eps);
  } else {
    z = at::rms_norm(s, call->normalized, AsOptional(scale), call->eps);
    if (bias) z = at::add(z, *bias);
  }
  Return(stack, arguments, {Activate(call->activation, z).contiguous(), residual ? s : at::Tensor()});
  return true;
}

const bool registered =
    AddFastPath({"norm_act", "GraphoptEagerNormAct", &Form<NormAct, false>, &GradForm<NormActMath, false>}) &&
    AddFastPath({"add_norm_act", "GraphoptEagerNormAct", &Form<NormAct, true>, &GradForm<NormActMath, true>});

}  // namespace
}  // namespace graphopt::torch_native
