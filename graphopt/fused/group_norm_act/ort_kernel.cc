// GroupNormAct in ONNX Runtime: the CPU kernel (each (sample, group) converted to float,
// normalized with shifted statistics, scaled and shifted per channel, activated, rounded back;
// the runs split into chunks for the thread pool) and the node's checks and shape inference.
#include "ort_kernel.h"

#include "cpu_rows.h"
#include "shape_inference.h"
#include "tensors.h"
#ifdef GRAPHOPT_WITH_CUDA
#include "../../ort/cuda/cuda_launch.h"
#endif

namespace graphopt {

void GroupNormActCpu(const GroupNormActParams& p, const ParallelFor& parallel_for) {
  const int64_t channels_per_group = p.channels / p.groups;
  const int64_t group_size = channels_per_group * p.spatial;
  const int64_t runs = p.batch * p.groups;
  if (runs == 0 || group_size == 0) return;
  const cpu::FloatView scale(p.scale, p.dtype, p.channels), bias(p.bias, p.dtype, p.channels);
  // The statistics and the normalization of a layer norm over the whole run (shifted by its first
  // element, see cpu_rows.cc); the per-channel affine part and the activation follow.
  const cpu::RowNorm statistics{Norm::kLayer, p.epsilon, nullptr, nullptr, Activation::kIdentity};
  const int64_t chunk = cpu::RowsPerChunk(group_size * 8, runs);
  cpu::ForEachChunk(runs, chunk, parallel_for, [&](int64_t begin, int64_t end) {
    float* v = cpu::Scratch(0, static_cast<size_t>(group_size));
    for (int64_t run = begin; run < end; ++run) {
      const int64_t offset = run * group_size;
      cpu::LoadRow(p.dtype, p.x, offset, v, group_size);
      if (p.residual != nullptr) {
        // Rounded to the storage type before the norm sees it, as the unfused graph stores it.
        cpu::AddRow(p.dtype, p.residual, offset, v, group_size);
        cpu::RoundRow(p.dtype, v, group_size);
        if (p.residual_sum != nullptr) cpu::StoreRow(p.dtype, v, p.residual_sum, offset, group_size);
      }
      cpu::NormalizeRow(statistics, v, group_size);
      const int64_t first_channel = (run % p.groups) * channels_per_group;
      for (int64_t c = 0; c < channels_per_group; ++c) {
        const float s = scale.data() != nullptr ? scale.data()[first_channel + c] : 1.0f;
        const float b = bias.data() != nullptr ? bias.data()[first_channel + c] : 0.0f;
        float* w = v + c * p.spatial;
        for (int64_t i = 0; i < p.spatial; ++i) w[i] = w[i] * s + b;
      }
      if (p.activation != Activation::kIdentity) cpu::Activate(p.activation, v, group_size);
      cpu::StoreRow(p.dtype, v, p.y, offset, group_size);
    }
  });
}

GroupNormActSpec::Attributes GroupNormActSpec::ReadAttributes(const OrtKernelInfo* info) {
  GroupNormActAttributes attributes = ReadGroupNormActAttributes(info);
  const Ort::ConstKernelInfo node(info);
  const bool wants_sum = node.GetOutputCount() > 1 && !node.GetOutputName(1).empty();
  const bool has_residual = node.GetInputCount() > 3 && !node.GetInputName(3).empty();
  if (wants_sum && !has_residual)
    throw Error(DescribeNode(kName, info) + ": output ResidualSum is requested but input Residual is absent");
  return attributes;
}

void GroupNormActSpec::Compute(const Ort::KernelContext& context, const Attributes& attributes, DType dtype, Ep ep,
                               const std::string& node) {
  const Ort::ConstValue x = context.GetInput(0);
  const Shape shape = ShapeOf(x);
  if (shape.size() < 2) throw Error(node + ": input X must be [N, C, *], got shape " + ShapeString(shape));
  if (shape[1] % attributes.groups != 0)
    throw Error(node + ": X has " + std::to_string(shape[1]) + " channels, which do not split into " +
                std::to_string(attributes.groups) + " groups");
  GroupNormActParams p;
  p.batch = shape[0];
  p.channels = shape[1];
  p.spatial = Elements(shape, 2, shape.size());
  p.groups = attributes.groups;
  p.epsilon = attributes.epsilon;
  p.activation = attributes.activation;
  p.dtype = dtype;
  p.x = x.GetTensorRawData();
  const Shape per_channel = {shape[1]};
  if (const Ort::ConstValue scale = OptionalInput(context, 1)) {
    CheckShape(node, "Scale ([C])", scale, per_channel);
    p.scale = scale.GetTensorRawData();
  }
  if (const Ort::ConstValue bias = OptionalInput(context, 2)) {
    CheckShape(node, "Bias ([C])", bias, per_channel);
    p.bias = bias.GetTensorRawData();
  }
  if (const Ort::ConstValue residual = OptionalInput(context, 3)) {
    CheckShape(node, "Residual (X.shape)", residual, shape);
    p.residual = residual.GetTensorRawData();
  }
  p.y = context.GetOutput(0, shape).GetTensorMutableRawData();
  if (Ort::UnownedValue sum = OptionalOutput(context, 1, shape)) {
    if (p.residual == nullptr) throw Error(node + ": output ResidualSum is requested but input Residual is absent");
    p.residual_sum = sum.GetTensorMutableRawData();
  }
  if (Elements(shape, 0, shape.size()) == 0) return;  // empty outputs: nothing to compute
  if (ep == Ep::kCpu) {
    GroupNormActCpu(p, OrtParallelFor(context));
    return;
  }
#ifdef GRAPHOPT_WITH_CUDA
  const std::string error = cuda::LaunchGroupNormAct(p, context.GetGPUComputeStream());
  if (!error.empty()) throw Error(node + ": " + error, ORT_RUNTIME_EXCEPTION);
#else
  throw Error(node + ": this graphopt_ort library was built without CUDA kernels", ORT_NOT_IMPLEMENTED);
#endif
}

void GroupNormActSpec::InferOutputShape(OrtShapeInferContext* context) {
  // Y has X's type and shape (ResidualSum too; see NormActSpec::InferOutputShape for why only Y).
  const TypeAndShape x = InputTypeAndShape(context, 0);
  if (!x.dims.empty() && x.Expressible()) SetOutputTypeAndShape(context, 0, x);
}

}  // namespace graphopt
