// graphopt::NormAct (graphopt/fused/table.py: NORM_ACT):
//   Y = activation(norm(X [+ Residual]) * Scale + Bias) over dimensions [axis, rank),
//   ResidualSum = X + Residual.
#pragma once

#include <array>
#include <string>

#include "attributes.h"
#include "fused_op.h"

namespace graphopt {

struct NormActSpec {
  static constexpr const char* kName = "NormAct";
  // X, Scale, Bias, Residual
  static constexpr std::array<bool, 4> kInputOptional = {false, true, true, true};
  // Y, ResidualSum
  static constexpr std::array<bool, 2> kOutputOptional = {false, true};

  using Attributes = NormActAttributes;
  static Attributes ReadAttributes(const OrtKernelInfo* info);  // also checks the node's ports
  static void Compute(const Ort::KernelContext& context, const Attributes& attributes, DType dtype, Ep ep,
                      const std::string& node);
  static void InferOutputShape(OrtShapeInferContext* context);
};

}  // namespace graphopt
