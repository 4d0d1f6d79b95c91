// GroupNormAct's ONNX Runtime kernel: Compute and InferOutputShape of GroupNormActSpec (declared, with
// its attribute reader, in the generated fused_ops.h).
#include "group_norm_act/ort_kernel.h"

#include "device_scratch.h"
#include "fused_op.h"
#include "fused_ops.h"
#include "shape_inference.h"
#include "tensors.h"

namespace graphopt {

void GroupNormActSpec::Compute(const Ort::KernelContext& context, const Attributes& attributes, DType dtype, Ep ep,
                               const std::string& node) {
  const Ort::ConstValue x = context.GetInput(0);
  const Shape shape = ShapeOf(x);
  if (shape.size() < 2) throw Error(node + ": input X must be [N, C, *], got shape " + ShapeString(shape));
  if (attributes.groups < 1)
    throw Error(node + ": attribute 'groups' is " + std::to_string(attributes.groups) +
                "; expected a positive number");
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
  const DeviceScratch partials(context, x, static_cast<size_t>(cuda::GroupNormActScratchBytes(p)));
  p.partials = partials.data();
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
