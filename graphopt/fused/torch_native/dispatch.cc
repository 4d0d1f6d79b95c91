// Eager CUDA calls of graphopt's torch ops with no Python on the way.
//
// Entering a Python kernel from the dispatcher costs about 11 µs per call, more than an eager
// layer_norm or gelu costs in all. This library registers a C++ kernel for an op form at the
// AutogradCUDA and CUDA keys. A plain eager call (nothing but the CUDA backend below autograd, no
// gradient needed) whose arguments the op's fast path takes (its torch_eager.cc) allocates its
// outputs and launches the op's ahead-of-time kernel here. An eager call that needs a gradient (an
// exported program's module() called as is: its parameters require gradients) runs, where the op
// has a grad path that takes its arguments, as the native ops the fusion replaced, called from here
// and recorded by autograd as in the unfused program (torch_direct's math path, without Python).
// Every other call goes on, with its dispatch
// key set unchanged, to the same op in namespace graphopt_eager, which holds the op's Python kernels
// for those keys (torch_direct's, the launch plans); they call the op itself again, never the copy,
// so traces record graphopt's op as before. The Python kernels stay registered on graphopt's op too,
// shadowed by the C++ kernel (the dispatcher keeps earlier kernels of a key): the first eager call,
// which switches to the C++ kernels, runs inside one of them.
//
// The library is built against the PyTorch it runs in (torch_native/build.py) and opened from Python
// (torch_native/__init__.py), which then calls the two C functions at the end of this file.
#include <dlfcn.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/tanh.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../ort/src/broadcast_rows.h"  // (the rule the ahead-of-time launcher reads operands by)
#include "torch_native/fast_path.h"

namespace graphopt::torch_native {
namespace {

std::vector<FastPathEntry>& FastPaths() {
  static std::vector<FastPathEntry> paths;
  return paths;
}

// A fast path whose C entry was found in libgraphopt_ort, with that entry, by op name.
std::map<std::string, std::pair<FastPathEntry, void*>>& Bound() {
  static std::map<std::string, std::pair<FastPathEntry, void*>> bound;
  return bound;
}

struct OpState {
  std::string name;
  FastPath run = nullptr;
  GradPath grad = nullptr;
  void* entry = nullptr;
  size_t arguments = 0;
  std::optional<c10::OperatorHandle> python;  // graphopt_eager::<name>
  std::atomic<bool> enabled{true};            // off after a failed launch
};

// Nothing but the CUDA backend below autograd (no Python mode, functionalization, subclass or fake
// tensor: those keys sit between autograd and the backend).
bool EagerCall(c10::DispatchKeySet keys) {
  return (keys & c10::after_autograd_keyset).highestPriorityTypeId() == c10::DispatchKey::CUDA;
}

// A gradient to record: grad mode on and an argument that requires one.
bool NeedsGradient(const torch::jit::Stack& stack, size_t arguments) {
  if (!c10::GradMode::is_enabled()) return false;
  for (const c10::IValue& value : torch::jit::last(stack, arguments)) {
    if (value.isTensor() && value.toTensor().requires_grad()) return true;
  }
  return false;
}

bool TryFastPath(OpState& op, torch::jit::Stack& stack) {
  // Outputs are made below autograd, as a custom op's kernel makes them.
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  std::string failure;
  switch (op.run(stack, op.arguments, op.entry, &failure)) {
    case Outcome::kLaunched:
      return true;
    case Outcome::kDeclined:
      return false;
    case Outcome::kFailed:
      op.enabled = false;
      TORCH_WARN("graphopt: the C++ eager launch of graphopt::", op.name, " failed (", failure,
                 "); its calls take the Python path from now on");
      return false;
  }
  return false;
}

class Kernel final : public c10::OperatorKernel {
 public:
  explicit Kernel(OpState* op) : op_(op) {}

  void operator()(const c10::OperatorHandle&, c10::DispatchKeySet keys, torch::jit::Stack* stack) {
    if (op_->enabled.load(std::memory_order_relaxed) && EagerCall(keys)) {
      if (!NeedsGradient(*stack, op_->arguments)) {
        if (TryFastPath(*op_, *stack)) return;
      } else if (op_->grad != nullptr && op_->grad(*stack, op_->arguments)) {
        // (at the autograd key itself: the native ops dispatch from the top and are recorded)
        return;
      }
    }
    op_->python->redispatchBoxed(keys, stack);
  }

 private:
  OpState* op_;
};

// Forwards every warning but the dispatcher's note that a kernel overrides an earlier one of the
// same key: the C++ kernel means to.
class QuietOverride final : public c10::WarningHandler {
 public:
  explicit QuietOverride(c10::WarningHandler* next) : next_(next) {}

  void process(const c10::Warning& warning) override {
    if (warning.msg().find("Overriding a previously registered kernel") == std::string::npos && next_) {
      next_->process(warning);
    }
  }

 private:
  c10::WarningHandler* next_;
};

void Copy(const std::string& text, char* out, size_t size) {
  if (out == nullptr || size == 0) return;
  const size_t n = std::min(size - 1, text.size());
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

}  // namespace

bool AddFastPath(const FastPathEntry& path) {
  FastPaths().push_back(path);
  return true;
}

int32_t DTypeCode(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return 0;
    case c10::ScalarType::Half:
      return 1;
    case c10::ScalarType::BFloat16:
      return 2;
    default:
      return -1;
  }
}

const at::Tensor* OptionalTensor(const c10::IValue& value) { return value.isTensor() ? &value.toTensor() : nullptr; }

std::optional<at::Tensor> AsOptional(const at::Tensor* t) { return t ? std::optional<at::Tensor>(*t) : std::nullopt; }

NormOperands ReadNormOperands(const torch::jit::Stack& stack, size_t arguments, bool with_residual) {
  const auto args = torch::jit::last(stack, arguments);
  const size_t tensors = with_residual ? 4 : 3;
  return {args[0].toTensor(), with_residual ? &args[1].toTensor() : nullptr, OptionalTensor(args[tensors - 2]),
          OptionalTensor(args[tensors - 1]), args.slice(tensors)};
}

bool SameKind(const at::Tensor* t, const at::Tensor& like, c10::IntArrayRef shape) {
  return t == nullptr || (t->scalar_type() == like.scalar_type() && t->device() == like.device() &&
                          t->sizes().equals(shape) && t->is_contiguous());
}

bool SameKindElements(const at::Tensor* t, const at::Tensor& like, int64_t numel) {
  return t == nullptr || (t->scalar_type() == like.scalar_type() && t->device() == like.device() &&
                          t->numel() == numel && t->is_contiguous());
}

std::optional<std::array<int64_t, 2>> BroadcastRows(c10::IntArrayRef t, c10::IntArrayRef x, int64_t dim) {
  RowBroadcast rows;
  const std::vector<int64_t> shape(t.begin(), t.end()), of_x(x.begin(), x.end());
  if (dim < 0 || !ReadRowBroadcast(shape, of_x, static_cast<size_t>(dim), &rows).empty()) return std::nullopt;
  return std::array<int64_t, 2>{rows.inner, rows.groups};
}

std::optional<RowOperand> ReadRowOperand(const at::Tensor* t, const at::Tensor& like, c10::IntArrayRef x,
                                         int64_t dim) {
  if (t == nullptr) return RowOperand{};
  if (t->scalar_type() != like.scalar_type() || t->device() != like.device()) return std::nullopt;
  const std::optional<std::array<int64_t, 2>> rows = BroadcastRows(t->sizes(), x, dim);
  if (!rows) return std::nullopt;
  return RowOperand{t->contiguous(), *rows};
}

bool SameType(const at::Tensor* t, const at::Tensor& like, c10::IntArrayRef shape) {
  return t == nullptr ||
         (t->scalar_type() == like.scalar_type() && t->device() == like.device() && t->sizes().equals(shape));
}

bool KnownActivation(const std::string& spelling) {
  for (const char* known : {"identity", "relu", "tanh", "gelu", "gelu_tanh", "silu", "sigmoid"}) {
    if (spelling == known) return true;
  }
  return false;
}

at::Tensor Activate(const std::string& spelling, const at::Tensor& z) {
  if (spelling == "identity") return z;
  if (spelling == "relu") return at::relu(z);
  if (spelling == "tanh") return at::tanh(z);
  if (spelling == "gelu") return at::gelu(z);
  if (spelling == "gelu_tanh") return at::gelu(z, "tanh");
  if (spelling == "silu") return at::silu(z);
  if (spelling == "sigmoid") return at::sigmoid(z);
  return at::Tensor();
}

void Return(torch::jit::Stack& stack, size_t arguments, std::initializer_list<at::Tensor> outputs) {
  torch::jit::drop(stack, arguments);
  for (const at::Tensor& output : outputs) {
    if (output.defined()) torch::jit::push(stack, output);
  }
}

Outcome Finish(int code, const char* error, std::string* failure, torch::jit::Stack& stack, size_t arguments,
               std::initializer_list<at::Tensor> outputs) {
  if (code == static_cast<int>(Outcome::kDeclined)) return Outcome::kDeclined;
  if (code != static_cast<int>(Outcome::kLaunched)) {
    *failure = error;
    return Outcome::kFailed;
  }
  Return(stack, arguments, outputs);
  return Outcome::kLaunched;
}

void* CurrentStream(c10::Device device) {
  static const c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
  return cuda.getStream(device).native_handle();
}

at::Tensor EmptyLike(const at::Tensor& x) { return at::empty(x.sizes(), x.options()); }

}  // namespace graphopt::torch_native

using graphopt::torch_native::Bound;
using graphopt::torch_native::FastPathEntry;
using graphopt::torch_native::FastPaths;

// Finds each fast path's C entry in the ONNX Runtime library at `ort_library`; writes the names of
// the ops found, comma-separated, to `out`, and returns how many (-1: the library did not open, why
// in `out`).
extern "C" __attribute__((visibility("default"))) int graphopt_torch_native_bind(const char* ort_library, char* out,
                                                                                size_t size) {
  void* library = dlopen(ort_library, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    graphopt::torch_native::Copy(why ? why : "dlopen failed", out, size);
    return -1;
  }
  std::string names;
  int found = 0;
  for (const FastPathEntry& path : FastPaths()) {
    if (void* entry = dlsym(library, path.entry)) {
      Bound()[path.op] = {path, entry};
      names += (found++ ? "," : "") + std::string(path.op);
    }
  }
  graphopt::torch_native::Copy(names, out, size);
  return found;
}

// Registers the C++ kernel of op `op` (bound before) at the CUDA and AutogradCUDA keys, over its
// Python kernels there, which must be on graphopt_eager::<op> already. 0, or 1 with why in `error`.
extern "C" __attribute__((visibility("default"))) int graphopt_torch_native_register(const char* op, char* error,
                                                                                    size_t size) {
  using graphopt::torch_native::OpState;
  // Never destroyed: the registrations last as long as the process (and outlive the dispatcher's
  // own teardown order at exit).
  static auto* states = new std::vector<std::unique_ptr<OpState>>();
  static auto* libraries = new std::vector<std::unique_ptr<torch::Library>>();
  try {
    auto bound = Bound().find(op);
    TORCH_CHECK(bound != Bound().end(), "no fast path bound for ", op);
    auto state = std::make_unique<OpState>();
    state->name = op;
    state->run = bound->second.first.run;
    state->grad = bound->second.first.grad;
    state->entry = bound->second.second;
    state->python = c10::Dispatcher::singleton().findSchemaOrThrow(("graphopt_eager::" + state->name).c_str(), "");
    state->arguments = state->python->schema().arguments().size();
    graphopt::torch_native::QuietOverride quiet(c10::WarningUtils::get_warning_handler());
    const c10::WarningUtils::WarningHandlerGuard overriding(&quiet);
    auto library = std::make_unique<torch::Library>(torch::Library::IMPL, "graphopt", std::nullopt, __FILE__, __LINE__);
    for (c10::DispatchKey key : {c10::DispatchKey::CUDA, c10::DispatchKey::AutogradCUDA}) {
      library->impl(op, torch::dispatch(key, torch::CppFunction::makeFromBoxedFunctor(
                                                 std::make_unique<graphopt::torch_native::Kernel>(state.get()))));
    }
    states->push_back(std::move(state));
    libraries->push_back(std::move(library));
    return 0;
  } catch (const std::exception& e) {
    graphopt::torch_native::Copy(e.what(), error, size);
    return 1;
  }
}
