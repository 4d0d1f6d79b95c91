// NormAct's ONNX Runtime kernel: Compute and InferOutputShape of NormActSpec (declared, with its
// attribute reader, in the generated fused_ops.h).
#include "norm_act/ort_kernel.h"

#include "fused_op.h"
#include "fused_ops.h"
#include "shape_inference.h"
#include "tensors.h"

namespace graphopt {
namespace {

// How X's rows read an operand (broadcast_rows.h), or a one-line error naming it and why not.
RowBroadcast RowsOf(const std::string& node, const char* what, const Ort::ConstValue& operand, const Shape& x,
                    size_t axis) {
  const Shape shape = ShapeOf(operand);
  RowBroadcast rows;
  if (std::string why = ReadRowBroadcast(shape, x, axis, &rows); !why.empty())
    throw Error(node + ": input " + what + " has shape " + ShapeString(shape) + "; " + why + " (X has shape " +
                ShapeString(x) + ")");
  return rows;
}

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
  const size_t axis = ResolveAxis(node, attributes.axis, shape);

  NormActParams p;
  p.rows = Elements(shape, 0, axis);
  p.cols = Elements(shape, axis, shape.size());
  p.epsilon = attributes.epsilon;
  p.norm = attributes.norm;
  p.activation = attributes.activation;
  p.dtype = dtype;
  p.x = x.GetTensorRawData();
  if (const Ort::ConstValue scale = OptionalInput(context, 1)) {
    p.scale_rows = RowsOf(node, "Scale", scale, shape, axis);
    p.scale = scale.GetTensorRawData();
  }
  if (const Ort::ConstValue bias = OptionalInput(context, 2)) {
    p.bias_rows = RowsOf(node, "Bias", bias, shape, axis);
    p.bias = bias.GetTensorRawData();
  }
  if (const Ort::ConstValue residual = OptionalInput(context, 3)) {
    p.residual_rows = RowsOf(node, "Residual", residual, shape, axis);
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
