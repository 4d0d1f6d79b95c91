// GroupNormAct's launches of its ahead-of-time Triton kernels on ONNX Runtime's stream. A "row" is one
// (sample, group), its run of channels / groups * spatial elements. Where a split variant admits the
// launch (launch_rule.py: few rows of long runs), the statistics kernel and the apply kernel run one
// program per chunk of a run and share the float32 partials in p.partials; otherwise the whole kernel
// runs one program per row. Argument orders: the kernels' AOT_KERNELS (triton_kernel.py).
#include <limits>

#include "group_norm_act/ort_kernel.h"
#include "launch.h"

namespace graphopt::cuda {
namespace {

constexpr int64_t kPartialFloats = 3;  // launch_rule.PARTIAL_FLOATS

// What a launch of the shape runs: the whole kernel, or the split kernels cutting each run into
// `chunks` chunks of `chunk` elements (launch_rule.chunking).
struct Plan {
  const KernelVariant* whole = nullptr;
  const KernelVariant* stats = nullptr;
  const KernelVariant* apply = nullptr;
  int64_t chunk = 0, chunks = 0;
};

// (rows, cols) of the launch: one row per (sample, group).
std::string Shape(const GroupNormActParams& p, int64_t* rows, int64_t* cols) {
  if (p.groups <= 0 || p.channels % p.groups != 0) return "bad groups " + std::to_string(p.groups);
  if (p.spatial > std::numeric_limits<int32_t>::max()) return "too many spatial positions";
  *rows = p.batch * p.groups;
  *cols = p.channels / p.groups * p.spatial;
  return CheckShape(*rows, *cols);
}

Plan Choose(const GroupNormActParams& p, int64_t rows, int64_t cols) {
  const KernelTable& table = GeneratedKernelTable();
  // The split variants' rule (min_cols, max_rows, min_channel) decides; residual_sum and partials may be absent
  // (stand-ins then: X or Y), the per-channel Scale and Bias are not loaded as vectors. Both kernels
  // have aligned variants (16-byte vector loads).
  const bool aligned = IsAligned(table, cols, {p.x, p.residual, p.y, p.residual_sum, p.partials});
  Plan plan;
  // Where each channel holds a whole block, the apply kernel's long_channels variant scales and shifts by
  // channel-wide scalars (launch_rule.long_channels).
  plan.stats = Select(table, KernelOp::kGroupNormAct, "stats", p.dtype, rows, cols, aligned, 1, 0, p.spatial);
  if (plan.stats != nullptr) {
    const char* apply = p.spatial >= plan.stats->block_n ? "apply_long_channels" : "apply";
    plan.apply = Select(table, KernelOp::kGroupNormAct, apply, p.dtype, rows, cols, aligned, 1, 0, p.spatial);
    const int64_t block = plan.stats->block_n;
    const int64_t blocks = (cols + block - 1) / block;
    plan.chunk = (blocks + plan.stats->max_chunks - 1) / plan.stats->max_chunks * block;
    plan.chunks = (cols + plan.chunk - 1) / plan.chunk;
    return plan;
  }
  plan.whole = Select(table, KernelOp::kGroupNormAct, p.dtype, cols, aligned);
  return plan;
}

std::string NoKernel(DType dtype) { return std::string("no GroupNormAct kernel for dtype ") + DTypeName(dtype); }

}  // namespace

std::string GroupNormActVariant(const GroupNormActParams& params) {
  int64_t rows = 0, cols = 0;
  if (std::string e = Shape(params, &rows, &cols); !e.empty()) return "error: " + e;
  const Plan plan = Choose(params, rows, cols);
  if (plan.whole != nullptr) return plan.whole->key;
  if (plan.stats == nullptr || plan.apply == nullptr) return "error: " + NoKernel(params.dtype);
  return std::string(plan.stats->key) + " " + plan.apply->key + " chunk " + std::to_string(plan.chunk) + " x " +
         std::to_string(plan.chunks);
}

int64_t GroupNormActScratchBytes(const GroupNormActParams& params) {
  int64_t rows = 0, cols = 0;
  if (!Shape(params, &rows, &cols).empty() || rows == 0) return 0;
  const Plan plan = Choose(params, rows, cols);
  if (plan.stats == nullptr) return 0;
  return rows * plan.chunks * kPartialFloats * static_cast<int64_t>(sizeof(float));
}

std::string LaunchGroupNormAct(const GroupNormActParams& p, void* stream) {
  int64_t rows = 0, cols = 0;
  if (std::string e = Shape(p, &rows, &cols); !e.empty()) return kPrefix + e;
  if (p.x == nullptr || p.y == nullptr) return std::string(kPrefix) + "GroupNormAct needs X and Y";
  if (!ValidActivation(p.activation)) return std::string(kPrefix) + "unknown activation";
  if (rows == 0) return "";
  const Plan plan = Choose(p, rows, cols);
  const bool split = plan.stats != nullptr;
  if (split ? plan.apply == nullptr : plan.whole == nullptr) return kPrefix + NoKernel(p.dtype);
  if (split && p.partials == nullptr) {
    return std::string(kPrefix) + "GroupNormAct needs GroupNormActScratchBytes() of scratch memory";
  }
  std::string error;
  const DriverApi* api = Driver(&error);
  if (api == nullptr) return kPrefix + error;

  // Absent inputs get a harmless stand-in the kernels never read; without a ResidualSum output no
  // sum is stored (write_sum 0), and the apply kernel sums X and Residual again.
  const CUdeviceptr x = Ptr(p.x), y = Ptr(p.y), partials = Ptr(p.partials);
  const CUdeviceptr r = p.residual ? Ptr(p.residual) : x, w = p.scale ? Ptr(p.scale) : x;
  const CUdeviceptr b = p.bias ? Ptr(p.bias) : x, s = p.residual_sum ? Ptr(p.residual_sum) : y;
  const CUdeviceptr s_read = p.residual_sum ? Ptr(p.residual_sum) : x;
  const int32_t groups = static_cast<int32_t>(p.groups), group_size = static_cast<int32_t>(cols);
  const int32_t spatial = static_cast<int32_t>(p.spatial);
  const int32_t chunk = static_cast<int32_t>(plan.chunk), chunks = static_cast<int32_t>(plan.chunks);
  const float eps = p.epsilon;
  const int32_t act = static_cast<int32_t>(p.activation);
  const int32_t has_scale = p.scale != nullptr, has_bias = p.bias != nullptr, has_res = p.residual != nullptr;
  const int32_t write_sum = p.residual != nullptr && p.residual_sum != nullptr;
  if (!split) {
    Launch launch(*plan.whole);
    launch.Arg(x), launch.Arg(r), launch.Arg(w), launch.Arg(b), launch.Arg(y), launch.Arg(s);
    launch.Arg(groups), launch.Arg(group_size), launch.Arg(spatial);
    launch.Arg(eps), launch.Arg(act), launch.Arg(has_scale), launch.Arg(has_bias), launch.Arg(has_res);
    launch.Arg(write_sum);
    return launch.Run(*api, static_cast<CUstream>(stream), rows);
  }
  const int64_t programs = rows * plan.chunks;
  Launch stats(*plan.stats);
  stats.Arg(x), stats.Arg(r), stats.Arg(s), stats.Arg(partials);
  stats.Arg(group_size), stats.Arg(chunk), stats.Arg(chunks), stats.Arg(has_res), stats.Arg(write_sum);
  if (std::string e = stats.Run(*api, static_cast<CUstream>(stream), programs); !e.empty()) return e;
  Launch apply(*plan.apply);
  apply.Arg(x), apply.Arg(r), apply.Arg(w), apply.Arg(b), apply.Arg(y), apply.Arg(s_read), apply.Arg(partials);
  apply.Arg(groups), apply.Arg(group_size), apply.Arg(spatial), apply.Arg(chunk), apply.Arg(chunks);
  apply.Arg(eps), apply.Arg(act), apply.Arg(has_scale), apply.Arg(has_bias), apply.Arg(has_res);
  apply.Arg(write_sum);
  return apply.Run(*api, static_cast<CUstream>(stream), programs);
}

}  // namespace graphopt::cuda

// The same launches for PyTorch's eager calls (graphopt/fused/torch_native): contiguous tensors of one
// dtype (the DType code), X and Residual [batch, channels, spatial...], Scale and Bias [channels].
// A split launch's scratch memory comes from `allocate(context, bytes)` (null: none could be had).
// Returns as GraphoptEagerNormActRows does (cuda_launch.cc of norm_act).
extern "C" __attribute__((visibility("default"))) int GraphoptEagerGroupNormAct(
    const void* x, const void* residual, const void* scale, const void* bias, void* y, void* residual_sum,
    int64_t batch, int64_t channels, int64_t spatial, int64_t groups, float epsilon, const char* activation,
    int32_t dtype, void* (*allocate)(void* context, int64_t bytes), void* context, void* stream, char* error,
    size_t error_size) {
  using namespace graphopt;
  GroupNormActParams p;
  p.x = x, p.residual = residual, p.scale = scale, p.bias = bias, p.y = y, p.residual_sum = residual_sum;
  p.batch = batch, p.channels = channels, p.spatial = spatial, p.groups = groups, p.epsilon = epsilon;
  p.dtype = static_cast<DType>(dtype);
  if (!cuda::ParseSpelling(kActivationSpellings, activation, &p.activation) || !cuda::KnownDType(dtype)) {
    return cuda::kDeclined;
  }
  if (const int64_t bytes = cuda::GroupNormActScratchBytes(p); bytes > 0) {
    p.partials = allocate(context, bytes);
    if (p.partials == nullptr) return cuda::ReportFailure("no scratch memory for the split launch", error, error_size);
  }
  return cuda::ReportFailure(cuda::LaunchGroupNormAct(p, stream), error, error_size);
}
