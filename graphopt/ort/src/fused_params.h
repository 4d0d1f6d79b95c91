// Parameters of the graphopt fused kernels, shared by the CPU kernels and the CUDA launchers.
// The enums mirror graphopt/fused/table.py (Activation, Norm): the codes are part of the ABI.
#pragma once

#include <cstdint>

namespace graphopt {

enum class Activation : int32_t { kIdentity = 0, kRelu = 1, kTanh = 2, kGelu = 3, kGeluTanh = 4, kSilu = 5, kSigmoid = 6 };
enum class Norm : int32_t { kLayer = 0, kRms = 1 };
enum class DType : int32_t { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

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

// Y[r, k] = out_act(sum_d act(norm(X[r, :]) * scale + bias)[d] * weight[k, d] + linear_bias[k]).
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

}  // namespace graphopt
