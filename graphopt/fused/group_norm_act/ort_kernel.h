// graphopt::GroupNormAct (graphopt/fused/group_norm_act/spec.py) in ONNX Runtime:
//   Y = activation(group_norm(X [+ Residual]) * Scale + Bias) on X of shape [N, C, *],
//   ResidualSum = X + Residual.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "attributes.h"
#include "cpu_kernels.h"
#include "fused_op.h"
#include "fused_params.h"
#include "params.h"

namespace graphopt {

void GroupNormActCpu(const GroupNormActParams& p, const ParallelFor& parallel_for);

struct GroupNormActSpec {
  static constexpr const char* kName = "GroupNormAct";
  // X, Scale, Bias, Residual
  static constexpr std::array<bool, 4> kInputOptional = {false, true, true, true};
  // Y, ResidualSum
  static constexpr std::array<bool, 2> kOutputOptional = {false, true};

  using Attributes = GroupNormActAttributes;
  static Attributes ReadAttributes(const OrtKernelInfo* info);  // also checks the node's ports
  static void Compute(const Ort::KernelContext& context, const Attributes& attributes, DType dtype, Ep ep,
                      const std::string& node);
  static void InferOutputShape(OrtShapeInferContext* context);
};

}  // namespace graphopt
