// graphopt::AffineAct (graphopt/fused/affine_act/spec.py): Y = activation(X * Scale + Bias), Scale
// and Bias of shape [X.shape[axis]] broadcast along the channel axis, float32 arithmetic.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "affine_act/params.h"
#include "attributes.h"
#include "fused_op.h"

namespace graphopt {

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
