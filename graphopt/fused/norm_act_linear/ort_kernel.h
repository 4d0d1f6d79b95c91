// NormActLinear's kernels for ONNX Runtime (the spec, NormActLinearSpec, is generated: fused_ops.h):
//   Y[r, k] = out_act(sum_d act(norm(X[r, :]) * scale + bias)[d] * weight[k, d] + linear_bias[k]).
#pragma once

#include <cstdint>
#include <string>

#include "fused_enums.h"
#include "parallel_for.h"

namespace graphopt {

struct NormActLinearParams {
  const void* x = nullptr;
  const void* scale = nullptr;
  const void* bias = nullptr;
  const void* weight = nullptr;       // [out_features, cols]
  const void* linear_bias = nullptr;  // [out_features]
  void* y = nullptr;                  // [rows, out_features]
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t out_features = 0;
  float epsilon = 1e-5f;
  Norm norm = Norm::kLayer;
  Activation activation = Activation::kIdentity;
  Activation out_activation = Activation::kIdentity;
  DType dtype = DType::kFloat32;
};

// On the CPU (ort_cpu.cc).
void NormActLinearCpu(const NormActLinearParams& p, const ParallelFor& parallel_for);

namespace cuda {
// The ahead-of-time Triton kernel on `stream` (cuda_launch.cc): "" on success, else what failed.
std::string LaunchNormActLinear(const NormActLinearParams& params, void* stream);
// The variant a launch would run ("op/dtype/tier"), or "error: ..."; needs no GPU.
std::string NormActLinearVariant(const NormActLinearParams& params);
}  // namespace cuda

}  // namespace graphopt
