// What a fused op's eager fast path (graphopt/fused/<op>/torch_eager.cc) gives the C++ kernel of
// torch_native/dispatch.cc, and what it may use: one function per torch op form that reads the
// call's arguments from the boxed stack and launches the op's ahead-of-time kernel through its C entry
// in libgraphopt_ort (GraphoptEager*, in the op's cuda_launch.cc).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

namespace graphopt::torch_native {

// The C entries' results (graphopt/ort/cuda/launch.h, EagerOutcome).
enum class Outcome : int { kLaunched = 0, kDeclined = 1, kFailed = 2 };

// Runs op form `op` from the last `arguments` values of `stack` with C entry `entry`. kLaunched: the
// arguments were replaced by the outputs. kDeclined: the stack is untouched and nothing ran (the
// op's Python kernels take the call). kFailed: the same, with what failed in *failure.
using FastPath = Outcome (*)(torch::jit::Stack& stack, size_t arguments, void* entry, std::string* failure);

// Runs op form `op`, for a call that needs a gradient, as the native ops it stands for (what its
// Python `math` computes, in the same precision), which autograd records as it records them in the
// unfused program: true, with the arguments replaced by the outputs; false, with the stack
// untouched and nothing run (the op's Python kernels take the call).
using GradPath = bool (*)(torch::jit::Stack& stack, size_t arguments);

struct FastPathEntry {
  const char* op;     // the torch op's name in namespace graphopt ("norm_act")
  const char* entry;  // its C entry's symbol in libgraphopt_ort ("GraphoptEagerNormActRows")
  FastPath run;
  GradPath grad = nullptr;  // none: such calls take the Python path
};

// Called from a static initializer of each op's torch_eager.cc; returns true.
bool AddFastPath(const FastPathEntry& path);

// One function serving an op's torch forms with and without a residual (its last parameter), as the
// FastPath of one form.
using ResidualFastPath = Outcome (*)(torch::jit::Stack& stack, size_t arguments, void* entry, std::string* failure,
                                     bool with_residual);
template <ResidualFastPath run, bool with_residual>
Outcome Form(torch::jit::Stack& stack, size_t arguments, void* entry, std::string* failure) {
  return run(stack, arguments, entry, failure, with_residual);
}
using ResidualGradPath = bool (*)(torch::jit::Stack& stack, size_t arguments, bool with_residual);
template <ResidualGradPath run, bool with_residual>
bool GradForm(torch::jit::Stack& stack, size_t arguments) {
  return run(stack, arguments, with_residual);
}

// --- for the fast paths ---------------------------------------------------------------------------

// The DType code of the kernels (fused_enums.h: float32 0, float16 1, bfloat16 2), or -1.
int32_t DTypeCode(c10::ScalarType type);
// The tensor of an optional argument, or nullptr for None.
const at::Tensor* OptionalTensor(const c10::IValue& value);
// The same as the native ops take it.
std::optional<at::Tensor> AsOptional(const at::Tensor* t);
// The data of an optional tensor, or nullptr.
inline const void* DataOrNull(const at::Tensor* t) { return t ? t->const_data_ptr() : nullptr; }

// The leading tensors of a norm's torch forms, x, [residual,] weight?, bias?, and the arguments after
// them (the last `arguments` values of the stack).
struct NormOperands {
  const at::Tensor& x;
  const at::Tensor* residual;
  const at::Tensor* scale;
  const at::Tensor* bias;
  c10::ArrayRef<c10::IValue> rest;
};
NormOperands ReadNormOperands(const torch::jit::Stack& stack, size_t arguments, bool with_residual);
// A contiguous tensor of `like`'s dtype and device with shape `shape` (nullptr passes).
bool SameKind(const at::Tensor* t, const at::Tensor& like, c10::IntArrayRef shape);
// The same with `numel` elements, whatever its shape.
bool SameKindElements(const at::Tensor* t, const at::Tensor& like, int64_t numel);
// An operand read row by row (graphopt/fused/broadcast_rows.py): its data, contiguous, and the
// (inner, groups) by which X's row r reads its row (r / inner) % groups.
struct RowOperand {
  at::Tensor data;  // undefined for an absent operand
  std::array<int64_t, 2> rows{1, 1};
};
// (inner, groups) of an operand of shape `t` against X of shape `x` normalized over [dim, rank): its
// shape must end in the normalized dims and broadcast over one block of X's leading dims, as the
// Python kernels take it; nullopt for any other.
std::optional<std::array<int64_t, 2>> BroadcastRows(c10::IntArrayRef t, c10::IntArrayRef x, int64_t dim);
// Operand `t` (nullptr: absent) of `like`'s dtype and device read so (a strided one is copied
// contiguous, as the Python kernels copy it); nullopt for any other.
std::optional<RowOperand> ReadRowOperand(const at::Tensor* t, const at::Tensor& like, c10::IntArrayRef x,
                                         int64_t dim);
// A tensor of `like`'s dtype and device with shape `shape`, any strides (nullptr passes): an operand
// the native ops take as the unfused program passed it.
bool SameType(const at::Tensor* t, const at::Tensor& like, c10::IntArrayRef shape);
// `z` through activation `spelling` (the torch ops' spellings: "gelu", "silu", ...) as the native op
// the unfused program ran; an undefined tensor for a spelling it does not know.
at::Tensor Activate(const std::string& spelling, const at::Tensor& z);
// Whether Activate knows `spelling`.
bool KnownActivation(const std::string& spelling);
// Replaces the last `arguments` values of `stack` by the defined tensors of `outputs`.
void Return(torch::jit::Stack& stack, size_t arguments, std::initializer_list<at::Tensor> outputs);
// The current stream of `device`, as the CUDA stream handle the launches take.
void* CurrentStream(c10::Device device);
// An uninitialized contiguous tensor like `x` (the launches' outputs).
at::Tensor EmptyLike(const at::Tensor& x);
// The Outcome of a C entry's return code `code`: where it launched, the last `arguments` values of
// `stack` are replaced by the defined tensors of `outputs` (an absent residual sum is undefined);
// where it failed, its error text goes to *failure.
Outcome Finish(int code, const char* error, std::string* failure, torch::jit::Stack& stack, size_t arguments,
               std::initializer_list<at::Tensor> outputs);

}  // namespace graphopt::torch_native
