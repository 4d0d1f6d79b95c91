// EmbeddingLookups' ONNX Runtime kernel: Compute and InferOutputShape of EmbeddingLookupsSpec (declared,
// with its attribute reader, in the generated fused_ops.h).
#include "embedding_lookups/ort_kernel.h"

#include "fused_op.h"
#include "fused_ops.h"
#include "shape_inference.h"
#include "tensors.h"

namespace graphopt {

void EmbeddingLookupsSpec::Compute(const Ort::KernelContext& context, const Attributes& attributes, DType dtype,
                                   Ep ep, const std::string& node) {
  const Ort::ConstValue table = context.GetInput(0), indices = context.GetInput(1);
  const Shape table_shape = ShapeOf(table), shape = ShapeOf(indices);
  if (table_shape.size() != 2)
    throw Error(node + ": input Table must be [rows, dim], got shape " + ShapeString(table_shape));
  if (shape.empty()) throw Error(node + ": input Indices must be [N, ...], one row per feature; got a scalar");
  const ONNXTensorElementDataType index_type = indices.GetTensorTypeAndShapeInfo().GetElementType();
  if (index_type != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 && index_type != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64)
    throw Error(node + ": input Indices must be int32 or int64, got element type " + std::to_string(index_type));
  if (attributes.wrap_negative != 0 && attributes.wrap_negative != 1)
    throw Error(node + ": attribute 'wrap_negative' is " + std::to_string(attributes.wrap_negative) +
                "; expected 0 or 1");
  const Shape features = {shape[0]};
  const Ort::ConstValue offsets = context.GetInput(2), sizes = context.GetInput(3);
  CheckShape(node, "Offsets ([N], N = Indices.shape[0])", offsets, features);
  CheckShape(node, "Sizes ([N], N = Indices.shape[0])", sizes, features);

  EmbeddingLookupsParams p;
  p.table = table.GetTensorRawData();
  p.indices = indices.GetTensorRawData();
  p.index_bytes = index_type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 ? 4 : 8;
  p.offsets = offsets.GetTensorData<int64_t>();
  p.sizes = sizes.GetTensorData<int64_t>();
  p.rows = Elements(shape, 0, shape.size());
  p.cols = table_shape[1];
  p.table_rows = table_shape[0];
  p.features = shape[0];
  p.per_feature = p.features == 0 ? 0 : p.rows / p.features;
  p.wrap_negative = attributes.wrap_negative != 0;
  p.dtype = dtype;
  Shape out_shape = shape;
  out_shape.push_back(p.cols);
  p.y = context.GetOutput(0, out_shape).GetTensorMutableRawData();
  if (ep == Ep::kCpu) {
    // (before the empty-output return: a feature's table that does not fit is an error even then)
    if (std::string e = EmbeddingLookupsCpu(p, OrtParallelFor(context)); !e.empty()) throw Error(node + ": " + e);
    return;
  }
  if (p.rows == 0 || p.cols == 0) return;  // empty outputs: nothing to compute
#ifdef GRAPHOPT_WITH_CUDA
  const std::string error = cuda::LaunchEmbeddingLookups(p, context.GetGPUComputeStream());
  if (!error.empty()) throw Error(node + ": " + error, ORT_RUNTIME_EXCEPTION);
#else
  throw Error(node + ": this graphopt_ort library was built without CUDA kernels", ORT_NOT_IMPLEMENTED);
#endif
}

void EmbeddingLookupsSpec::InferOutputShape(OrtShapeInferContext* context) {
  // Y is Indices.shape + [D], of Table's type.
  const TypeAndShape table = InputTypeAndShape(context, 0);
  TypeAndShape y = InputTypeAndShape(context, 1);
  if (table.dims.size() != 2 || y.dims.empty()) return;
  y.type = table.type;
  y.dims.push_back(table.dims[1]);
  y.symbols.push_back(table.symbols[1]);
  if (y.Expressible()) SetOutputTypeAndShape(context, 0, y);
}

}  // namespace graphopt
