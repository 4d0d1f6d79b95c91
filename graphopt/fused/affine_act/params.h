// Parameters of the AffineAct kernels (graphopt/fused/affine_act/spec.py), shared by the CPU kernel
// and the CUDA launcher: Y = activation(X * Scale + Bias), Scale and Bias of [channels].
#pragma once

#include <cstdint>

#include "../../ort/src/fused_params.h"

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

}  // namespace graphopt
