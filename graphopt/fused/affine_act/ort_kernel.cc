// AffineAct's ONNX Runtime kernel: Compute and InferOutputShape of AffineActSpec (declared, with its
// attribute reader, in the generated fused_ops.h).
#include "affine_act/ort_kernel.h"

#include "fused_op.h"
#include "fused_ops.h"
#include "shape_inference.h"
#include "tensors.h"

namespace graphopt {

void AffineActSpec::Compute(const Ort::KernelContext& context, const Attributes& attributes, DType dtype, Ep ep,
                            const std::string& node) {
  const Ort::ConstValue x = context.GetInput(0);
  const Shape shape = ShapeOf(x);
  const size_t axis = ResolveAxis(node, attributes.axis, shape);
  const Shape channel_shape = {shape[axis]};

  AffineActParams p;
  p.channels = shape[axis];
  p.per_row = axis + 1 < shape.size();
  p.cols = p.per_row ? Elements(shape, axis + 1, shape.size()) : p.channels;
  p.rows = p.cols == 0 ? 0 : Elements(shape, 0, shape.size()) / p.cols;
  p.activation = attributes.activation;
  p.dtype = dtype;
  p.x = x.GetTensorRawData();
  if (const Ort::ConstValue scale = OptionalInput(context, 1)) {
    CheckShape(node, "Scale ([X.shape[axis]])", scale, channel_shape);
    p.scale = scale.GetTensorRawData();
  }
  if (const Ort::ConstValue bias = OptionalInput(context, 2)) {
    CheckShape(node, "Bias ([X.shape[axis]])", bias, channel_shape);
    p.bias = bias.GetTensorRawData();
  }
  p.y = context.GetOutput(0, shape).GetTensorMutableRawData();
  if (p.rows == 0 || p.cols == 0) return;  // empty outputs: nothing to compute
  if (ep == Ep::kCpu) {
    AffineActCpu(p, OrtParallelFor(context));
    return;
  }
#ifdef GRAPHOPT_WITH_CUDA
  const std::string error = cuda::LaunchAffineAct(p, context.GetGPUComputeStream());
  if (!error.empty()) throw Error(node + ": " + error, ORT_RUNTIME_EXCEPTION);
#else
  throw Error(node + ": this graphopt_ort library was built without CUDA kernels", ORT_NOT_IMPLEMENTED);
#endif
}

void AffineActSpec::InferOutputShape(OrtShapeInferContext* context) {
  const TypeAndShape x = InputTypeAndShape(context, 0);  // Y has X's type and shape
  if (!x.dims.empty() && x.Expressible()) SetOutputTypeAndShape(context, 0, x);
}

}  // namespace graphopt
