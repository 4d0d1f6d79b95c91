// graphopt::NormActLinear (graphopt/fused/table.py: NORM_ACT_LINEAR):
//   Y = out_activation(activation(norm(X) * Scale + Bias) @ Weight^T + LinearBias),
//   the norm over the last dimension D, Weight of shape [K, D], Y of shape X.shape[:-1] + [K].
#pragma once

#include <array>
#include <string>

#include "attributes.h"
#include "fused_op.h"

namespace graphopt {

struct NormActLinearSpec {
  static constexpr const char* kName = "NormActLinear";
  // X, Scale, Bias, Weight, LinearBias
  static constexpr std::array<bool, 5> kInputOptional = {false, true, true, false, true};
  // Y
  static constexpr std::array<bool, 1> kOutputOptional = {false};

  using Attributes = NormActLinearAttributes;
  static Attributes ReadAttributes(const OrtKernelInfo* info) { return ReadNormActLinearAttributes(info); }
  static void Compute(const Ort::KernelContext& context, const Attributes& attributes, DType dtype, Ep ep,
                      const std::string& node);
  static void InferOutputShape(OrtShapeInferContext* context);
};

}  // namespace graphopt
