// NormAct's eager fast path in PyTorch (graphopt/fused/torch_native): norm_act and add_norm_act on a
// contiguous X, with a scale, bias and residual of X's dtype that broadcast over X's rows as the
// Python kernels take them (a norm's scale; a per-slice scale and shift [N, 1, D] that adaptive layer
// norms compute per sample; a position embedding as the residual), launched through
// GraphoptEagerNormActRows (cuda_launch.cc). Other calls (mixed dtypes, a strided X, empty tensors)
// are declined and take the Python path. Calls that need a gradient run layer_norm / rms_norm and the
// activation (the Python math's native ops, in the storage dtype as there) where every operand has
// X's dtype: the norm's own affine for operands of the normalized shape, a broadcasting multiply and
// add for the others, as the unfused program wrote them.
#include <ATen/ops/add.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/rms_norm.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/accumulate.h>

#include "torch_native/fast_path.h"

namespace graphopt::torch_native {
namespace {

using Entry = int (*)(const void* x, const void* residual, const void* scale, const void* bias, void* y,
                      void* residual_sum, int64_t rows, int64_t cols, const int64_t* operand_rows, float epsilon,
                      const char* norm, const char* activation, int32_t dtype, void* stream, char* error,
                      size_t error_size);

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
  const int64_t dim = x.dim() - static_cast<int64_t>(call->normalized.size());
  const std::optional<RowOperand> s = ReadRowOperand(scale, x, x.sizes(), dim);
  const std::optional<RowOperand> b = ReadRowOperand(bias, x, x.sizes(), dim);
  const std::optional<RowOperand> r = ReadRowOperand(residual, x, x.sizes(), dim);
  if (!s || !b || !r) return Outcome::kDeclined;
  const int64_t cols = c10::multiply_integers(call->normalized);
  const int64_t rows[6] = {s->rows[0], s->rows[1], b->rows[0], b->rows[1], r->rows[0], r->rows[1]};
  const auto data = [](const RowOperand& o) { return o.data.defined() ? o.data.const_data_ptr() : nullptr; };
  const c10::DeviceGuard on_device(x.device());
  at::Tensor y = EmptyLike(x);
  at::Tensor sum = residual ? EmptyLike(x) : at::Tensor();
  char error[512] = "";
  const int outcome = reinterpret_cast<Entry>(entry)(
      x.const_data_ptr(), data(*r), data(*s), data(*b), y.mutable_data_ptr(),
      residual ? sum.mutable_data_ptr() : nullptr, x.numel() / cols, cols, rows, static_cast<float>(call->eps),
      call->norm.c_str(), call->activation.c_str(), dtype, CurrentStream(x.device()), error, sizeof error);
  return Finish(outcome, error, failure, stack, arguments, {y, sum});
}

// A scale or bias the norm's own affine takes (nullptr passes), else one of X's dtype and device that
// broadcasts against X as a multiply or add does; sets *own to which.
bool AffineOperand(const at::Tensor* t, const at::Tensor& x, c10::IntArrayRef normalized, bool* own) {
  *own = SameType(t, x, normalized);
  return *own || (t->scalar_type() == x.scalar_type() && t->device() == x.device() &&
                  BroadcastRows(t->sizes(), x.sizes(), x.dim() - static_cast<int64_t>(normalized.size())));
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
  bool own_scale = false, own_bias = false;
  if (!AffineOperand(scale, x, call->normalized, &own_scale) || !AffineOperand(bias, x, call->normalized, &own_bias) ||
      !SameType(residual, x, x.sizes())) {
    return false;
  }
  const at::Tensor s = residual ? at::add(x, *residual) : x;
  // (a bias goes into layer_norm only where the scale does, or there is none: (z * w) + b)
  const at::Tensor* norm_scale = own_scale ? scale : nullptr;
  const at::Tensor* norm_bias = norm == "layer" && own_bias && (!scale || own_scale) ? bias : nullptr;
  at::Tensor z = norm == "layer" ? at::layer_norm(s, call->normalized, AsOptional(norm_scale), AsOptional(norm_bias), call->eps)
                                 : at::rms_norm(s, call->normalized, AsOptional(norm_scale), call->eps);
  if (scale && !norm_scale) z = at::mul(z, *scale);
  if (bias && !norm_bias) z = at::add(z, *bias);
  Return(stack, arguments, {Activate(call->activation, z).contiguous(), residual ? s : at::Tensor()});
  return true;
}

const bool registered =
    AddFastPath({"norm_act", "GraphoptEagerNormActRows", &Form<NormAct, false>, &GradForm<NormActMath, false>}) &&
    AddFastPath({"add_norm_act", "GraphoptEagerNormActRows", &Form<NormAct, true>, &GradForm<NormActMath, true>});

}  // namespace
}  // namespace graphopt::torch_native
