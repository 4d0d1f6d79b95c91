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

// Arguments: x, [residual,] weight?, bias?, groups, activation, eps (the torch forms' schemas).
Outcome GroupNormAct(torch::jit::Stack& stack, size_t arguments, void* entry, std::string* failure,
                     bool with_residual) {
  auto args = torch::jit::last(stack, arguments);
  size_t i = 0;
  const at::Tensor& x = args[i++].toTensor();
  const at::Tensor* residual = with_residual ? &args[i++].toTensor() : nullptr;
  const at::Tensor* scale = OptionalTensor(args[i++]);
  const at::Tensor* bias = OptionalTensor(args[i++]);
  const c10::IValue& groups = args[i++];
  const c10::IValue& activation = args[i++];
  const double eps = args[i++].toDouble();
  const int32_t dtype = DTypeCode(x.scalar_type());
  if (dtype < 0 || !groups.isInt() || x.dim() < 2 || x.numel() == 0 || !x.is_contiguous()) return Outcome::kDeclined;
  const int64_t channels = x.size(1), group_count = groups.toInt();
  if (group_count <= 0 || channels % group_count != 0) return Outcome::kDeclined;  // (Python names the error)
  if (!SameKindElements(scale, x, channels) || !SameKindElements(bias, x, channels) ||
      !SameKind(residual, x, x.sizes())) {
    return Outcome::kDeclined;
  }
  const c10::DeviceGuard on_device(x.device());
  at::Tensor y = EmptyLike(x);
  at::Tensor sum = residual ? EmptyLike(x) : at::Tensor();
  Scratch scratch{x.device(), {}, nullptr};
  char error[512] = "";
  const int outcome = reinterpret_cast<Entry>(entry)(
      x.const_data_ptr(), residual ? residual->const_data_ptr() : nullptr, scale ? scale->const_data_ptr() : nullptr,
      bias ? bias->const_data_ptr() : nullptr, y.mutable_data_ptr(), residual ? sum.mutable_data_ptr() : nullptr,
      x.size(0), channels, x.numel() / (x.size(0) * channels), group_count, static_cast<float>(eps),
      activation.toStringRef().c_str(), dtype, &Allocate, &scratch, CurrentStream(x.device()), error, sizeof error);
  if (scratch.failure) std::rethrow_exception(scratch.failure);
  return Finish(outcome, error, failure, stack, arguments, {y, sum});
}

// The same arguments, as the native ops (group_norm_act/torch_math.py's group_norm_act, after
// residual_sum for the residual form).
bool GroupNormActMath(torch::jit::Stack& stack, size_t arguments, bool with_residual) {
  auto args = torch::jit::last(stack, arguments);
  size_t i = 0;
  const at::Tensor& x = args[i++].toTensor();
  const at::Tensor* residual = with_residual ? &args[i++].toTensor() : nullptr;
  const at::Tensor* scale = OptionalTensor(args[i++]);
  const at::Tensor* bias = OptionalTensor(args[i++]);
  const c10::IValue& groups = args[i++];
  const std::string& activation = args[i++].toStringRef();
  const double eps = args[i++].toDouble();
  if (!groups.isInt() || x.dim() < 2 || x.numel() == 0 || !x.is_floating_point() || !KnownActivation(activation)) {
    return false;
  }
  const int64_t channels = x.size(1), group_count = groups.toInt();
  if (group_count <= 0 || channels % group_count != 0) return false;  // (Python names the error)
  if (!SameType(scale, x, {channels}) || !SameType(bias, x, {channels}) || !SameType(residual, x, x.sizes())) {
    return false;
  }
  const at::Tensor s = residual ? at::add(x, *residual).contiguous() : x;
  const at::Tensor z = at::group_norm(s, group_count, scale ? std::optional<at::Tensor>(*scale) : std::nullopt,
                                      bias ? std::optional<at::Tensor>(*bias) : std::nullopt, eps);
  Return(stack, arguments, {Activate(activation, z).contiguous(), residual ? s : at::Tensor()});
  return true;
}

const bool registered = AddFastPath({"group_norm_act", "GraphoptEagerGroupNormAct", &Form<GroupNormAct, false>,
                                     &GradForm<GroupNormActMath, false>}) &&
                        AddFastPath({"add_group_norm_act", "GraphoptEagerGroupNormAct", &Form<GroupNormAct, true>,
                                     &GradForm<GroupNormActMath, true>});

}  // namespace
}  // namespace graphopt::torch_native
