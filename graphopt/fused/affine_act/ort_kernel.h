// graphopt::AffineAct (graphopt/fused/affine_act/spec.py): Y = activation(X * Scale + Bias), Scale
// and Bias of shape [X.shape[axis]] broadcast along the channel axis, float32 arithmetic. CPU only.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "attributes.h"
#include "fused_op.h"

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

void AffineActCpu(const AffineActParams& p, const ParallelFor& parallel_for);

struct AffineActSpec {
  static constexpr const char* kName = "AffineAct";
  // X, Scale, Bias
  static constexpr std::array<bool, 3> kInputOptional = {false, true, true};
  // Y
  static constexpr std::array<bool, 1> kOutputOptional = {false};

  using Attributes = AffineActAttributes;
  static Attributes ReadAttributes(const OrtKernelInfo* info) { return ReadAffineActAttributes(info); }
  static void Compute(const Ort::KernelContext& context, const Attributes& attributes, DType dtype, Ep ep,
                      const std::string& node);
  static void InferOutputShape(OrtShapeInferContext* context);
};

}  // namespace graphopt
