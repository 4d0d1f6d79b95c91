// AffineAct's kernels for ONNX Runtime (the spec, AffineActSpec, is generated: fused_ops.h):
//   Y = activation(X * Scale + Bias), Scale and Bias of [X.shape[axis]], float32 arithmetic.
#pragma once

#include <cstdint>
#include <string>

#include "fused_enums.h"
#include "parallel_for.h"

namespace graphopt {

// X seen as contiguous [rows, cols]: with the channel axis last the channel of an element is its
// column (cols == channels); otherwise the dims after the channel axis are the columns and row r
// belongs to channel r % channels.
struct AffineActParams {
  const void* x = nullptr;
  const void* scale = nullptr;  // [channels], null when absent
  const void* bias = nullptr;   // [channels], null when absent
  void* y = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t channels = 0;
  bool per_row = false;  // channel = row % channels (else channel = column)
  Activation activation = Activation::kIdentity;
  DType dtype = DType::kFloat32;
};

// On the CPU (ort_cpu.cc): reads p.dtype, computes in float, splits rows through parallel_for.
void AffineActCpu(const AffineActParams& p, const ParallelFor& parallel_for);

namespace cuda {
// The ahead-of-time Triton kernel on `stream` (cuda_launch.cc): "" on success, else what failed.
std::string LaunchAffineAct(const AffineActParams& params, void* stream);
// The variant a launch would run ("op/dtype/tier"), or "error: ..."; needs no GPU.
std::string AffineActVariant(const AffineActParams& params);
}  // namespace cuda

}  // namespace graphopt
