// GroupNormAct's kernels for ONNX Runtime (the spec, GroupNormActSpec, is generated: fused_ops.h):
//   Y = activation(group_norm(X [+ Residual]) * Scale + Bias) on X of shape [N, C, *],
//   ResidualSum = X + Residual.
#pragma once

#include <cstdint>
#include <string>

#include "fused_enums.h"
#include "parallel_for.h"

namespace graphopt {

// Each (sample, group) is the contiguous run of channels / groups * spatial elements at
// (n * groups + g) * group_size. Optional pointers are null when absent; residual_sum is written
// only when residual is given.
struct GroupNormActParams {
  const void* x = nullptr;
  const void* residual = nullptr;
  const void* scale = nullptr;  // [channels]
  const void* bias = nullptr;   // [channels]
  void* y = nullptr;
  void* residual_sum = nullptr;
  // CUDA only: device memory of cuda::GroupNormActScratchBytes(params) bytes (none when that is 0),
  // the split launch's partial statistics; used by this launch alone.
  void* partials = nullptr;
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t spatial = 0;  // product of the dims after C (1 for [N, C])
  int64_t groups = 1;
  float epsilon = 1e-5f;
  Activation activation = Activation::kIdentity;
  DType dtype = DType::kFloat32;
};

// On the CPU (ort_cpu.cc): reads p.dtype, accumulates in float, splits the runs through parallel_for.
void GroupNormActCpu(const GroupNormActParams& p, const ParallelFor& parallel_for);

namespace cuda {
// The ahead-of-time Triton kernel on `stream` (cuda_launch.cc): "" on success, else what failed.
std::string LaunchGroupNormAct(const GroupNormActParams& params, void* stream);
// The variant a launch would run ("op/dtype/tier"; a split launch: its two variants and its chunks,
// "<stats key> <apply key> chunk <elements> x <chunks>"), or "error: ..."; needs no GPU.
std::string GroupNormActVariant(const GroupNormActParams& params);
// The scratch memory LaunchGroupNormAct needs in params.partials: 0 unless the launch splits.
int64_t GroupNormActScratchBytes(const GroupNormActParams& params);
}  // namespace cuda

}  // namespace graphopt
