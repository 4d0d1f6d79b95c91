// NormActLinear's ONNX Runtime kernel: Compute and InferOutputShape of NormActLinearSpec (declared, with its
// attribute reader, in the generated fused_ops.h).
#include "norm_act_linear/ort_kernel.h"

#include "fused_op.h"
#include "fused_ops.h"
#include "shape_inference.h"
#include "tensors.h"

namespace graphopt {
namespace {

void Run(const NormActLinearParams& p, const Ort::KernelContext& context, Ep ep, const std::string& node) {
  if (ep == Ep::kCpu) {
    NormActLinearCpu(p, OrtParallelFor(context));
    return;
  }
#ifdef GRAPHOPT_WITH_CUDA
  const std::string error = cuda::LaunchNormActLinear(p, context.GetGPUComputeStream());
  if (!error.empty()) throw Error(node + ": " + error, ORT_RUNTIME_EXCEPTION);
#else
  throw Error(node + ": this graphopt_ort library was built without CUDA kernels", ORT_NOT_IMPLEMENTED);
#endif
}

}  // namespace

void NormActLinearSpec::Compute(const Ort::KernelContext& context, const Attributes& attributes, DType dtype, Ep ep,
                                const std::string& node) {
  const Ort::ConstValue x = context.GetInput(0);
  const Shape shape = ShapeOf(x);
  if (shape.empty()) throw Error(node + ": input X must have rank >= 1, got a scalar");
  const int64_t d = shape.back();
  const Ort::ConstValue weight = context.GetInput(3);
  const Shape weight_shape = ShapeOf(weight);
  if (weight_shape.size() != 2 || weight_shape[1] != d)
    throw Error(node + ": input Weight must have shape [K, " + std::to_string(d) + "] (X's last dimension is " +
                std::to_string(d) + "), got " + ShapeString(weight_shape));
  const int64_t k = weight_shape[0];

  NormActLinearParams p;
  p.rows = Elements(shape, 0, shape.size() - 1);
  p.cols = d;
  p.out_features = k;
  p.epsilon = attributes.epsilon;
  p.norm = attributes.norm;
  p.activation = attributes.activation;
  p.out_activation = attributes.out_activation;
  p.dtype = dtype;
  p.x = x.GetTensorRawData();
  p.weight = weight.GetTensorRawData();
  if (const Ort::ConstValue scale = OptionalInput(context, 1)) {
    CheckShape(node, "Scale ([D])", scale, {d});
    p.scale = scale.GetTensorRawData();
  }
  if (const Ort::ConstValue bias = OptionalInput(context, 2)) {
    CheckShape(node, "Bias ([D])", bias, {d});
    p.bias = bias.GetTensorRawData();
  }
  if (const Ort::ConstValue linear_bias = OptionalInput(context, 4)) {
    CheckShape(node, "LinearBias ([K])", linear_bias, {k});
    p.linear_bias = linear_bias.GetTensorRawData();
  }
  Shape out_shape(shape.begin(), shape.end() - 1);
  out_shape.push_back(k);
  p.y = context.GetOutput(0, out_shape).GetTensorMutableRawData();
  if (p.rows == 0 || k == 0) return;  // empty output: nothing to launch
  Run(p, context, ep, node);
}

void NormActLinearSpec::InferOutputShape(OrtShapeInferContext* context) {
  // Y: X.shape[:-1] + [Weight.shape[0]], X's type.
  const TypeAndShape x = InputTypeAndShape(context, 0);
  const TypeAndShape weight = InputTypeAndShape(context, 3);
  if (x.dims.empty() || weight.dims.size() != 2) return;  // unknown ranks (or invalid: the kernel says so)
  TypeAndShape y = x;
  y.dims.back() = weight.dims[0];
  y.symbols.back() = weight.symbols[0];
  if (y.Expressible()) SetOutputTypeAndShape(context, 0, y);
}

}  // namespace graphopt
