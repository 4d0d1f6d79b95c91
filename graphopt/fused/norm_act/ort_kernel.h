// NormAct's kernels for ONNX Runtime (the spec, NormActSpec, is generated: fused_ops.h):
//   Y = activation(norm(X [+ Residual]) * Scale + Bias) over dimensions [axis, rank),
//   ResidualSum = X + Residual.
#pragma once

#include <cstdint>
#include <string>

#include "fused_enums.h"
#include "parallel_for.h"

namespace graphopt {

// Y[r, :] = act(norm(X[r, :] (+ R[r, :])) * scale + bias), rows of `cols` elements.
// Optional pointers are null when absent. residual_sum is written only when residual is given.
struct NormActParams {
  const void* x = nullptr;
  const void* residual = nullptr;
  const void* scale = nullptr;
  const void* bias = nullptr;
  void* y = nullptr;
  void* residual_sum = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  float epsilon = 1e-5f;
  Norm norm = Norm::kLayer;
  Activation activation = Activation::kIdentity;
  DType dtype = DType::kFloat32;
};

// On the CPU (ort_cpu.cc): reads p.dtype, accumulates in float, splits rows through parallel_for.
void NormActCpu(const NormActParams& p, const ParallelFor& parallel_for);

namespace cuda {
// The ahead-of-time Triton kernel on `stream` (cuda_launch.cc): "" on success, else what failed.
std::string LaunchNormAct(const NormActParams& params, void* stream);
// The variant a launch would run ("op/dtype/tier"), or "error: ..."; needs no GPU.
std::string NormActVariant(const NormActParams& params);
}  // namespace cuda

}  // namespace graphopt
