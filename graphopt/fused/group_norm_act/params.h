// GroupNormAct's kernel parameters, shared by the CPU kernel (ort_kernel.cc) and the CUDA launcher
// (graphopt/ort/cuda/cuda_launch.cc). Plain data: no ONNX Runtime or CUDA headers.
#pragma once

#include <cstdint>

#include "../../ort/src/fused_params.h"

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
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t spatial = 0;  // product of the dims after C (1 for [N, C])
  int64_t groups = 1;
  float epsilon = 1e-5f;
  Activation activation = Activation::kIdentity;
  DType dtype = DType::kFloat32;
};

}  // namespace graphopt
