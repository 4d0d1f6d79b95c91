// GroupNormAct's eager fast path in PyTorch (graphopt/fused/torch_native): group_norm_act and
// add_group_norm_act on contiguous [N, C, *] tensors of one dtype, with a scale and bias of C elements
// and a residual of X's shape, launched through GraphoptEagerGroupNormAct (cuda_launch.cc); a split
// launch's scratch memory is a tensor from PyTorch's allocator on the call's stream. Other calls take
// the Python path. Calls that need a gradient run group_norm and the activation (the Python math's
// native ops) where scale and bias are vectors and the residual a tensor of X's shape, all of its dtype.
#include <ATen/ops/add.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/group_norm.h>
#include <c10/core/DeviceGuard.h>

#include <exception>

#include "torch_native/fast_path.h"

namespace graphopt::torch_native {
namespace {

using Entry = int (*)(const void* x, const void* residual, const void* scale, const void* bias, void* y,
                      void* residual_sum, int64_t batch, int64_t channels, int64_t spatial, int64_t groups,
                      float epsilon, const char* activation, int32_t dtype,
                      void* (*allocate)(void* context, int64_t bytes), void* context, void* stream, char* error,
                      size_t error_size);

// The scratch tensor lives until the call returns; PyTorch's allocator orders its reuse on the stream.
struct Scratch {
  c10::Device device;
  at::Tensor memory;
  std::exception_ptr failure;
};

void* Allocate(void* context, int64_t bytes) {
  auto* scratch = static_cast<Scratch*>(context);
  try {
    scratch->memory = at::empty({bytes}, at::TensorOptions().dtype(at::kByte).device(scratch->device));
    return scratch->memory.mutable_data_ptr();
  } catch (...) {  // (an out-of-memory error is raised after the entry returns, not through C)
    scratch->failure = std::current_exception();
    return nullptr;
  }
}

// A call's arguments, x, [residual,] weight?, bias?, groups, activation, eps (the torch forms'
// schemas), on a non-empty [N, C, *] x; nullopt for other shapes and group counts that do not divide
// the channels (the Python kernels name the error).
struct GroupNormActCall {
  NormOperands t;
  int64_t groups;
  const std::string& activation;
  double eps;
  int64_t channels;
};

std::optional<GroupNormActCall> Read(const torch::jit::Stack& stack, size_t arguments, bool with_residual) {
  const NormOperands t = ReadNormOperands(stack, arguments, with_residual);
  const c10::IValue& groups = t.rest[0];
  if (!groups.isInt() || t.x.dim() < 2 || t.x.numel() == 0) return std::nullopt;
  const int64_t channels = t.x.size(1), group_count = groups.toInt();
  if (group_count <= 0 || channels % group_count != 0) return std::nullopt;
  return GroupNormActCall{t, group_count, t.rest[1].toStringRef(), t.rest[2].toDouble(), channels};
}

Outcome GroupNormAct(torch::jit::Stack& stack, size_t arguments, void* entry, std::string* failure,
                     bool with_residual) {
  const std::optional<GroupNormActCall> call = Read(stack, arguments, with_residual);
  if (!call) return Outcome::kDeclined;
  const auto& [x, residual, scale, bias, rest] = call->t;
  const int32_t dtype = DTypeCode(x.scalar_type());
  const int64_t channels = call->channels;
  if (dtype < 0 || !x.is_contiguous() || !SameKindElements(scale, x, channels) ||
      !SameKindElements(bias, x, channels) || !SameKind(residual, x, x.sizes())) {
    return Outcome::kDeclined;
  }
  const c10::DeviceGuard on_device(x.device());
  at::Tensor y = EmptyLike(x);
  at::Tensor sum = residual ? EmptyLike(x) : at::Tensor();
  Scratch scratch{x.device(), {}, nullptr};
  char error[512] = "";
  const int outcome = reinterpret_cast<Entry>(entry)(
      x.const_data_ptr(), DataOrNull(residual), DataOrNull(scale), DataOrNull(bias), y.mutable_data_ptr(),
      residual ? sum.mutable_data_ptr() : nullptr, x.size(0), channels, x.numel() / (x.size(0) * channels),
      call->groups, static_cast<float>(call->eps), call->activation.c_str(), dtype, &Allocate, &scratch,
      CurrentStream(x.device()), error, sizeof error);
  if (scratch.failure) std::rethrow_exception(scratch.failure);
  return Finish(outcome, error, failure, stack, arguments, {y, sum});
}

// The same call, as the native ops (group_norm_act/torch_math.py's group_norm_act, after
// residual_sum for the residual form).
bool GroupNormActMath(torch::jit::Stack& stack, size_t arguments, bool with_residual) {
  const std::optional<GroupNormActCall> call = Read(stack, arguments, with_residual);
  if (!call) return false;
  const auto& [x, residual, scale, bias, rest] = call->t;
  if (!x.is_floating_point() || !KnownActivation(call->activation) || !SameType(scale, x, {call->channels}) ||
      !SameType(bias, x, {call->channels}) || !SameType(residual, x, x.sizes())) {
    return false;
  }
  const at::Tensor s = residual ? at::add(x, *residual).contiguous() : x;
  const at::Tensor z = at::group_norm(s, call->groups, AsOptional(scale), AsOptional(bias), call->eps);
  Return(stack, arguments, {Activate(call->activation, z).contiguous(), residual ? s : at::Tensor()});
  return true;
}

const bool registered = AddFastPath({"group_norm_act", "GraphoptEagerGroupNormAct", &Form<GroupNormAct, false>,
                                     &GradForm<GroupNormActMath, false>}) &&
                        AddFastPath({"add_group_norm_act", "GraphoptEagerGroupNormAct", &Form<GroupNormAct, true>,
                                     &GradForm<GroupNormActMath, true>});

}  // namespace
}  // namespace graphopt::torch_native
