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

namespace graphopt {

// Each (sample, group) is the contiguous run of channels_per_group * spatial elements at
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
