// NormActLinear's kernels for ONNX Runtime (the spec, NormActLinearSpec, is generated: fused_ops.h):
//   S = X [+ Residual],
//   Y[r, k] = out_act(sum_d act(norm(S[r, :]) * scale + bias)[d] * weight[k, d] + linear_bias[k]),
//   ResidualSum = S when a residual is given.
#pragma once

#include <cstdint>
#include <string>

#include "broadcast_rows.h"
#include "fused_enums.h"
#include "parallel_for.h"

namespace graphopt {

// Scale, bias, residual, weight and linear bias may broadcast over X's rows: row r reads the
// operand's row (or matrix) (r / inner) % groups (broadcast_rows.h); the residual's default,
// groups = 0, means X's rows. Optional pointers are null when absent; residual_sum is written only
// when residual is given, and may be null then (nobody reads the sum).
struct NormActLinearParams {
  const void* x = nullptr;
  const void* residual = nullptr;     // [residual_rows.groups, cols]
  const void* scale = nullptr;        // [scale_rows.groups, cols]
  const void* bias = nullptr;         // [bias_rows.groups, cols]
  const void* weight = nullptr;       // [weight_rows.groups, out_features, cols]
  const void* linear_bias = nullptr;  // [linear_bias_rows.groups, out_features]
  void* y = nullptr;                  // [rows, out_features]
  void* residual_sum = nullptr;       // [rows, cols]
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t out_features = 0;
  RowBroadcast scale_rows, bias_rows, weight_rows, linear_bias_rows;
  RowBroadcast residual_rows{1, 0};
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
