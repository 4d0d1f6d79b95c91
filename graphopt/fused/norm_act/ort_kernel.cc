// NormAct's ONNX Runtime kernel: Compute and InferOutputShape of NormActSpec (declared, with its
// attribute reader, in the generated fused_ops.h).
#include "norm_act/ort_kernel.h"

#include "fused_op.h"
#include "fused_ops.h"
#include "shape_inference.h"
#include "tensors.h"

namespace graphopt {
namespace {

void Run(const NormActParams& p, const Ort::KernelContext& context, Ep ep, const std::string& node) {
  if (ep == Ep::kCpu) {
    NormActCpu(p, OrtParallelFor(context));
    return;
  }
#ifdef GRAPHOPT_WITH_CUDA
  const std::string error = cuda::LaunchNormAct(p, context.GetGPUComputeStream());
  if (!error.empty()) throw Error(node + ": " + error, ORT_RUNTIME_EXCEPTION);
#else
  throw Error(node + ": this graphopt_ort library was built without CUDA kernels", ORT_NOT_IMPLEMENTED);
#endif
}

}  // namespace

void NormActSpec::Compute(const Ort::KernelContext& context, const Attributes& attributes, DType dtype, Ep ep,
                          const std::string& node) {
  const Ort::ConstValue x = context.GetInput(0);
  const Shape shape = ShapeOf(x);
  const auto rank = static_cast<int64_t>(shape.size());
  if (rank == 0) throw Error(node + ": input X must have rank >= 1, got a scalar");
  if (attributes.axis < -rank || attributes.axis >= rank)
    throw Error(node + ": attribute 'axis' is " + std::to_string(attributes.axis) + ", out of range for X of shape " +
                ShapeString(shape) + "; expected a value in [" + std::to_string(-rank) + ", " +
                std::to_string(rank - 1) + "]");
  const auto axis = static_cast<size_t>(attributes.axis < 0 ? attributes.axis + rank : attributes.axis);
  const Shape normalized(shape.begin() + static_cast<std::ptrdiff_t>(axis), shape.end());

  NormActParams p;
  p.rows = Elements(shape, 0, axis);
  p.cols = Elements(shape, axis, shape.size());
  p.epsilon = attributes.epsilon;
  p.norm = attributes.norm;
  p.activation = attributes.activation;
  p.dtype = dtype;
  p.x = x.GetTensorRawData();
  if (const Ort::ConstValue scale = OptionalInput(context, 1)) {
    CheckShape(node, "Scale (X.shape[axis:])", scale, normalized);
    p.scale = scale.GetTensorRawData();
  }
  if (const Ort::ConstValue bias = OptionalInput(context, 2)) {
    CheckShape(node, "Bias (X.shape[axis:])", bias, normalized);
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
  if (p.rows == 0 || p.cols == 0) return;  // empty outputs: nothing to launch
  Run(p, context, ep, node);
}

void NormActSpec::InferOutputShape(OrtShapeInferContext* context) {
  // Y has X's type and shape. ResidualSum has them too, but the context cannot tell whether the
  // node has that output, and writing an output the node lacks is out of bounds inside ORT; its
  // type still comes from ORT's own matching of the registered kernels.
  const TypeAndShape x = InputTypeAndShape(context, 0);
  if (!x.dims.empty() && x.Expressible()) SetOutputTypeAndShape(context, 0, x);
}

}  // namespace graphopt
