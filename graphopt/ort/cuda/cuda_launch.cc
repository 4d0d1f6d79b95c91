// Launches the ahead-of-time Triton kernels on ONNX Runtime's stream. The variant comes from the
// generated table by the same rule as the Python launchers (graphopt/kernels/launch_rules.py): per
// op and dtype, the first variant whose max_cols admits the row length (an exact variant: equals it)
// and whose alignment assumption the arguments meet. Argument order follows graphopt/kernels/aot_specs.py.
#include "cuda_launch.h"

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <vector>

#include "driver_api.h"
#include "kernel_loader.h"
#include "kernel_table.h"

namespace graphopt::cuda {
namespace {

constexpr const char* kPrefix = "graphopt CUDA kernels: ";

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
  }
  return "unknown";
}

bool IsAligned(const KernelTable& table, int64_t cols, std::initializer_list<const void*> pointers) {
  if (cols % table.align_elements != 0) return false;
  for (const void* p : pointers) {
    if (p != nullptr && reinterpret_cast<uintptr_t>(p) % table.align_bytes != 0) return false;
  }
  return true;
}

const KernelVariant* Select(const KernelTable& table, KernelOp op, DType dtype, int64_t cols, bool aligned) {
  for (size_t i = 0; i < table.count; ++i) {
    const KernelVariant& v = table.variants[i];
    if (v.op != op || v.dtype != dtype || cols > v.max_cols) continue;
    if ((cols == v.max_cols || !v.exact) && (aligned || !v.aligned)) return &v;
  }
  return nullptr;
}

bool ValidActivation(Activation a) {
  return static_cast<int32_t>(a) >= 0 && static_cast<int32_t>(a) <= static_cast<int32_t>(Activation::kSigmoid);
}
bool ValidNorm(Norm n) { return n == Norm::kLayer || n == Norm::kRms; }

std::string CheckShape(int64_t rows, int64_t cols) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (rows < 0 || cols <= 0) return "bad shape: rows=" + std::to_string(rows) + ", cols=" + std::to_string(cols);
  if (rows > kMax || cols > kMax) return "rows and cols must each fit in 32 bits";
  return "";
}

// One launch: pointers to each declared argument's value, then the hidden scratch pointers.
class Launch {
 public:
  explicit Launch(const KernelVariant& variant) : variant_(variant) {}

  template <typename T>
  void Arg(const T& value) {
    args_.push_back(const_cast<T*>(&value));
  }

  std::string Run(const DriverApi& api, CUstream stream, int64_t rows) {
    ContextScope scope(api, stream);
    if (!scope.error().empty()) return kPrefix + scope.error();
    LoadedKernel kernel;
    if (std::string e = GetKernel(api, scope.context(), variant_, &kernel); !e.empty()) return kPrefix + e;
    const int64_t rows_per_program = int64_t{variant_.block_m} * variant_.iters;
    const int64_t grid = (rows + rows_per_program - 1) / rows_per_program;
    if (grid > std::numeric_limits<int32_t>::max()) return std::string(kPrefix) + "too many rows";
    // Triton appends global and profile scratch pointers; both are null unless a kernel needs them.
    std::vector<CUdeviceptr> scratch(variant_.hidden_args, 0);
    auto release = [&] {
      for (CUdeviceptr p : scratch) {
        if (p != 0) api.MemFreeAsync(p, stream);  // stream-ordered: after the kernel has run
      }
    };
    const int64_t sizes[2] = {variant_.global_scratch_size, variant_.profile_scratch_size};
    for (int32_t i = 0; i < variant_.hidden_args && i < 2; ++i) {
      if (sizes[i] == 0) continue;
      if (api.MemAllocAsync == nullptr || api.MemFreeAsync == nullptr) {
        release();
        return std::string(kPrefix) + "scratch memory needs CUDA 11.2 or newer";
      }
      if (CUresult r = api.MemAllocAsync(&scratch[i], static_cast<size_t>(sizes[i] * grid), stream);
          r != CUDA_SUCCESS) {
        release();
        return kPrefix + api.Describe("cuMemAllocAsync", r);
      }
    }
    for (CUdeviceptr& p : scratch) args_.push_back(&p);
    const unsigned threads = 32u * static_cast<unsigned>(variant_.num_warps);
    CUresult r = api.LaunchKernel(kernel.function, static_cast<unsigned>(grid), 1, 1, threads, 1, 1,
                                  static_cast<unsigned>(kernel.shared_bytes), stream, args_.data(), nullptr);
    release();
    if (r != CUDA_SUCCESS) return kPrefix + api.Describe(variant_.key, r);
    return "";
  }

 private:
  const KernelVariant& variant_;
  std::vector<void*> args_;
};

CUdeviceptr Ptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

const KernelVariant* SelectNormAct(const NormActParams& p) {
  const KernelTable& table = GeneratedKernelTable();
  const bool aligned = IsAligned(table, p.cols, {p.x, p.residual, p.scale, p.bias, p.y, p.residual_sum});
  return Select(table, KernelOp::kNormAct, p.dtype, p.cols, aligned);
}

const KernelVariant* SelectNormActLinear(const NormActLinearParams& p) {
  const KernelTable& table = GeneratedKernelTable();
  const bool aligned = IsAligned(table, p.cols, {p.x, p.scale, p.bias, p.weight, p.linear_bias, p.y});
  return Select(table, KernelOp::kNormActLinear, p.dtype, p.cols, aligned);
}

const KernelVariant* SelectGroupNormAct(const GroupNormActParams& p, int64_t group_size) {
  return Select(GeneratedKernelTable(), KernelOp::kGroupNormAct, p.dtype, group_size, false);
}

// (rows, cols) of GroupNormAct: one row per (sample, group), its run of channels / groups * spatial.
std::string GroupNormActShape(const GroupNormActParams& p, int64_t* rows, int64_t* cols) {
  if (p.groups <= 0 || p.channels % p.groups != 0) return "bad groups " + std::to_string(p.groups);
  *rows = p.batch * p.groups;
  *cols = p.channels / p.groups * p.spatial;
  return CheckShape(*rows, *cols);
}

}  // namespace

std::string NormActVariant(const NormActParams& params) {
  if (std::string e = CheckShape(params.rows, params.cols); !e.empty()) return "error: " + e;
  const KernelVariant* v = SelectNormAct(params);
  return v ? v->key : std::string("error: no NormAct kernel for dtype ") + DTypeName(params.dtype);
}

std::string NormActLinearVariant(const NormActLinearParams& params) {
  if (std::string e = CheckShape(params.rows, params.cols); !e.empty()) return "error: " + e;
  const KernelVariant* v = SelectNormActLinear(params);
  return v ? v->key : std::string("error: no NormActLinear kernel for dtype ") + DTypeName(params.dtype);
}

std::string GroupNormActVariant(const GroupNormActParams& params) {
  int64_t rows = 0, cols = 0;
  if (std::string e = GroupNormActShape(params, &rows, &cols); !e.empty()) return "error: " + e;
  const KernelVariant* v = SelectGroupNormAct(params, cols);
  return v ? v->key : std::string("error: no GroupNormAct kernel for dtype ") + DTypeName(params.dtype);
}

std::string LaunchNormAct(const NormActParams& p, void* stream) {
  if (std::string e = CheckShape(p.rows, p.cols); !e.empty()) return kPrefix + e;
  if (p.x == nullptr || p.y == nullptr) return std::string(kPrefix) + "NormAct needs X and Y";
  if (!ValidNorm(p.norm) || !ValidActivation(p.activation)) return std::string(kPrefix) + "unknown norm or activation";
  if (p.rows == 0) return "";
  std::string error;
  const DriverApi* api = Driver(&error);
  if (api == nullptr) return kPrefix + error;
  const KernelVariant* v = SelectNormAct(p);
  if (v == nullptr) return std::string(kPrefix) + "no NormAct kernel for dtype " + DTypeName(p.dtype);

  // Absent inputs get a harmless stand-in: the kernel never reads them.
  const CUdeviceptr x = Ptr(p.x), y = Ptr(p.y);
  const CUdeviceptr r = p.residual ? Ptr(p.residual) : x, w = p.scale ? Ptr(p.scale) : x;
  // A residual sum nobody reads is written over Y: for every element the kernel stores the sum
  // before Y (the same thread, in program order, or in an earlier pass over the row that the second
  // pass does not read back), so Y's values land last. No scratch allocation per call.
  const CUdeviceptr b = p.bias ? Ptr(p.bias) : x, s = p.residual_sum ? Ptr(p.residual_sum) : y;
  const int32_t rows = static_cast<int32_t>(p.rows), cols = static_cast<int32_t>(p.cols);
  const int64_t stride = p.cols;  // ONNX Runtime tensors are contiguous
  const float eps = p.epsilon;
  const int32_t norm = static_cast<int32_t>(p.norm), act = static_cast<int32_t>(p.activation);
  const int32_t has_scale = p.scale != nullptr, has_bias = p.bias != nullptr, has_res = p.residual != nullptr;
  Launch launch(*v);
  launch.Arg(x), launch.Arg(r), launch.Arg(w), launch.Arg(b), launch.Arg(y), launch.Arg(s);
  launch.Arg(rows), launch.Arg(cols), launch.Arg(stride), launch.Arg(stride);
  launch.Arg(eps), launch.Arg(norm), launch.Arg(act), launch.Arg(has_scale), launch.Arg(has_bias), launch.Arg(has_res);
  return launch.Run(*api, static_cast<CUstream>(stream), p.rows);
}

std::string LaunchNormActLinear(const NormActLinearParams& p, void* stream) {
  if (std::string e = CheckShape(p.rows, p.cols); !e.empty()) return kPrefix + e;
  if (p.x == nullptr || p.weight == nullptr || p.y == nullptr) {
    return std::string(kPrefix) + "NormActLinear needs X, Weight and Y";
  }
  if (p.out_features < 0 || p.out_features > std::numeric_limits<int32_t>::max()) {
    return std::string(kPrefix) + "bad out_features " + std::to_string(p.out_features);
  }
  if (!ValidNorm(p.norm) || !ValidActivation(p.activation) || !ValidActivation(p.out_activation)) {
    return std::string(kPrefix) + "unknown norm or activation";
  }
  if (p.rows == 0 || p.out_features == 0) return "";
  std::string error;
  const DriverApi* api = Driver(&error);
  if (api == nullptr) return kPrefix + error;
  const KernelVariant* v = SelectNormActLinear(p);
  if (v == nullptr) return std::string(kPrefix) + "no NormActLinear kernel for dtype " + DTypeName(p.dtype);

  const CUdeviceptr x = Ptr(p.x), wl = Ptr(p.weight), y = Ptr(p.y);
  const CUdeviceptr w = p.scale ? Ptr(p.scale) : x, b = p.bias ? Ptr(p.bias) : x;
  const CUdeviceptr lb = p.linear_bias ? Ptr(p.linear_bias) : wl;
  const int32_t rows = static_cast<int32_t>(p.rows), cols = static_cast<int32_t>(p.cols);
  const int32_t k = static_cast<int32_t>(p.out_features);
  const int64_t stride = p.cols;
  const float eps = p.epsilon;
  const int32_t norm = static_cast<int32_t>(p.norm), act = static_cast<int32_t>(p.activation);
  const int32_t out_act = static_cast<int32_t>(p.out_activation);
  const int32_t has_scale = p.scale != nullptr, has_bias = p.bias != nullptr, has_lb = p.linear_bias != nullptr;
  Launch launch(*v);
  launch.Arg(x), launch.Arg(w), launch.Arg(b), launch.Arg(wl), launch.Arg(lb), launch.Arg(y);
  launch.Arg(rows), launch.Arg(cols), launch.Arg(k), launch.Arg(stride);
  launch.Arg(eps), launch.Arg(norm), launch.Arg(act), launch.Arg(out_act);
  launch.Arg(has_scale), launch.Arg(has_bias), launch.Arg(has_lb);
  return launch.Run(*api, static_cast<CUstream>(stream), p.rows);
}

std::string LaunchGroupNormAct(const GroupNormActParams& p, void* stream) {
  int64_t rows = 0, cols = 0;
  if (std::string e = GroupNormActShape(p, &rows, &cols); !e.empty()) return kPrefix + e;
  if (p.x == nullptr || p.y == nullptr) return std::string(kPrefix) + "GroupNormAct needs X and Y";
  if (!ValidActivation(p.activation)) return std::string(kPrefix) + "unknown activation";
  if (p.spatial > std::numeric_limits<int32_t>::max()) return std::string(kPrefix) + "too many spatial positions";
  if (rows == 0) return "";
  std::string error;
  const DriverApi* api = Driver(&error);
  if (api == nullptr) return kPrefix + error;
  const KernelVariant* v = SelectGroupNormAct(p, cols);
  if (v == nullptr) return std::string(kPrefix) + "no GroupNormAct kernel for dtype " + DTypeName(p.dtype);

  // Absent inputs get a harmless stand-in: the kernel never reads them (write_sum off: no sum stored).
  const CUdeviceptr x = Ptr(p.x), y = Ptr(p.y);
  const CUdeviceptr r = p.residual ? Ptr(p.residual) : x, w = p.scale ? Ptr(p.scale) : x;
  const CUdeviceptr b = p.bias ? Ptr(p.bias) : x, s = p.residual_sum ? Ptr(p.residual_sum) : y;
  const int32_t groups = static_cast<int32_t>(p.groups), group_size = static_cast<int32_t>(cols);
  const int32_t spatial = static_cast<int32_t>(p.spatial);
  const float eps = p.epsilon;
  const int32_t act = static_cast<int32_t>(p.activation);
  const int32_t has_scale = p.scale != nullptr, has_bias = p.bias != nullptr, has_res = p.residual != nullptr;
  const int32_t write_sum = p.residual != nullptr && p.residual_sum != nullptr;
  Launch launch(*v);
  launch.Arg(x), launch.Arg(r), launch.Arg(w), launch.Arg(b), launch.Arg(y), launch.Arg(s);
  launch.Arg(groups), launch.Arg(group_size), launch.Arg(spatial);
  launch.Arg(eps), launch.Arg(act), launch.Arg(has_scale), launch.Arg(has_bias), launch.Arg(has_res);
  launch.Arg(write_sum);
  return launch.Run(*api, static_cast<CUstream>(stream), rows);
}

}  // namespace graphopt::cuda
