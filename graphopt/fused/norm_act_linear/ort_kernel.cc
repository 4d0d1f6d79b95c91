// NormActLinear's ONNX Runtime kernel: Compute and InferOutputShape of NormActLinearSpec (declared, with its
// attribute reader, in the generated fused_ops.h).
#include "norm_act_linear/ort_kernel.h"

#include "fused_op.h"
#include "fused_ops.h"
#include "shape_inference.h"
#include "tensors.h"

namespace graphopt {
namespace {

// How the rows of `against` (X, or Y for the linear bias) read an operand that is `expected` (a
// [D] or [K] row, or X's shape) or a broadcast of it over their leading dims (broadcast_rows.h);
// else a one-line error naming it and why not.
RowBroadcast RowsOf(const std::string& node, const char* what, const Shape& shape, const std::string& expected,
                    const char* against_name, const Shape& against) {
  RowBroadcast rows;
  if (std::string why = ReadRowBroadcast(shape, against, against.size() - 1, &rows); !why.empty())
    throw Error(node + ": input " + what + " has shape " + ShapeString(shape) + "; expected " + expected +
                " or a broadcast of it over one block of " + against_name + "'s leading dims, but " + why + " (" +
                against_name + " has shape " + ShapeString(against) + ")");
  return rows;
}

// Weight is [K, D], or [*G, K, D]: one matrix per block of X's rows, G read as an operand
// [*G, 1, D] of X's would be.
RowBroadcast MatricesOf(const std::string& node, const Shape& weight, const Shape& x) {
  const int64_t d = x.back();
  if (weight.size() < 2 || weight.back() != d)
    throw Error(node + ": input Weight must have shape [K, " + std::to_string(d) + "] or [..., K, " +
                std::to_string(d) + "] (X's last dimension is " + std::to_string(d) + "), got " +
                ShapeString(weight));
  if (weight.size() == 2) return RowBroadcast{};
  Shape operand(weight.begin(), weight.end() - 2);
  operand.push_back(1);
  operand.push_back(d);
  RowBroadcast rows;
  if (std::string why = ReadRowBroadcast(operand, x, x.size() - 1, &rows); !why.empty())
    throw Error(node + ": input Weight has shape " + ShapeString(weight) +
                "; its leading dims must pick one [K, D] matrix per block of X's rows: " + why + " (X has shape " +
                ShapeString(x) + ")");
  return rows;
}

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
  const Ort::ConstValue weight = context.GetInput(3);
  const Shape weight_shape = ShapeOf(weight);

  NormActLinearParams p;
  p.weight_rows = MatricesOf(node, weight_shape, shape);
  p.rows = Elements(shape, 0, shape.size() - 1);
  p.cols = shape.back();
  p.out_features = weight_shape[weight_shape.size() - 2];
  p.epsilon = attributes.epsilon;
  p.norm = attributes.norm;
  p.activation = attributes.activation;
  p.out_activation = attributes.out_activation;
  p.dtype = dtype;
  p.x = x.GetTensorRawData();
  p.weight = weight.GetTensorRawData();
  Shape out_shape(shape.begin(), shape.end() - 1);
  out_shape.push_back(p.out_features);
  const std::string row_d = "[" + std::to_string(p.cols) + "]", row_k = "[" + std::to_string(p.out_features) + "]";
  if (const Ort::ConstValue scale = OptionalInput(context, 1)) {
    p.scale_rows = RowsOf(node, "Scale", ShapeOf(scale), row_d, "X", shape);
    p.scale = scale.GetTensorRawData();
  }
  if (const Ort::ConstValue bias = OptionalInput(context, 2)) {
    p.bias_rows = RowsOf(node, "Bias", ShapeOf(bias), row_d, "X", shape);
    p.bias = bias.GetTensorRawData();
  }
  if (const Ort::ConstValue linear_bias = OptionalInput(context, 4)) {
    p.linear_bias_rows = RowsOf(node, "LinearBias", ShapeOf(linear_bias), row_k, "Y", out_shape);
    p.linear_bias = linear_bias.GetTensorRawData();
  }
  if (const Ort::ConstValue residual = OptionalInput(context, 5)) {
    p.residual_rows = RowsOf(node, "Residual", ShapeOf(residual), "X's shape", "X", shape);
    p.residual = residual.GetTensorRawData();
  }
  p.y = context.GetOutput(0, out_shape).GetTensorMutableRawData();
  if (Ort::UnownedValue sum = OptionalOutput(context, 1, shape)) {
    if (p.residual == nullptr) throw Error(node + ": output ResidualSum is requested but input Residual is absent");
    p.residual_sum = sum.GetTensorMutableRawData();
  }
  // Empty outputs: nothing to launch (a residual sum is still written when K is 0).
  if (p.rows == 0 || (p.out_features == 0 && p.residual_sum == nullptr)) return;
  Run(p, context, ep, node);
}

void NormActLinearSpec::InferOutputShape(OrtShapeInferContext* context) {
  // Y: X.shape[:-1] + [Weight.shape[-2]], X's type. (ResidualSum: see NormActSpec::InferOutputShape.)
  const TypeAndShape x = InputTypeAndShape(context, 0);
  const TypeAndShape weight = InputTypeAndShape(context, 3);
  if (x.dims.empty() || weight.dims.size() < 2) return;  // unknown ranks (or invalid: the kernel says so)
  TypeAndShape y = x;
  y.dims.back() = weight.dims[weight.dims.size() - 2];
  y.symbols.back() = weight.symbols[weight.symbols.size() - 2];
  if (y.Expressible()) SetOutputTypeAndShape(context, 0, y);
}

}  // namespace graphopt
