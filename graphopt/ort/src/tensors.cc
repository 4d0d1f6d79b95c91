#include "tensors.h"

#include <functional>

namespace graphopt {

ONNXTensorElementDataType OnnxType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    case DType::kFloat16:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
    case DType::kBFloat16:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16;
  }
  return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

std::string ShapeString(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

int64_t Elements(const Shape& shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i) n *= shape[i];
  return n;
}

size_t ResolveAxis(const std::string& node, int64_t axis, const Shape& shape) {
  const auto rank = static_cast<int64_t>(shape.size());
  if (rank == 0) throw Error(node + ": input X must have rank >= 1, got a scalar");
  if (axis < -rank || axis >= rank)
    throw Error(node + ": attribute 'axis' is " + std::to_string(axis) + ", out of range for X of shape " +
                ShapeString(shape) + "; expected a value in [" + std::to_string(-rank) + ", " +
                std::to_string(rank - 1) + "]");
  return static_cast<size_t>(axis < 0 ? axis + rank : axis);
}

Ort::ConstValue OptionalInput(const Ort::KernelContext& context, size_t index) {
  if (index >= context.GetInputCount()) return Ort::ConstValue{nullptr};
  return context.GetInput(index);
}

Shape ShapeOf(const Ort::ConstValue& value) { return value.GetTensorTypeAndShapeInfo().GetShape(); }

void CheckShape(const std::string& node, const char* what, const Ort::ConstValue& value, const Shape& expected) {
  const Shape actual = ShapeOf(value);
  if (actual != expected)
    throw Error(node + ": input " + what + " must have shape " + ShapeString(expected) + ", got " +
                ShapeString(actual));
}

Ort::UnownedValue OptionalOutput(const Ort::KernelContext& context, size_t index, const Shape& shape) {
  if (index >= context.GetOutputCount()) return Ort::UnownedValue{nullptr};
  return context.GetOutput(index, shape);
}

ParallelFor OrtParallelFor(const Ort::KernelContext& context) {
  return [&context](size_t n, const std::function<void(size_t)>& body) {
    if (n == 1) {
      body(0);
      return;
    }
    auto trampoline = [](void* data, size_t i) { (*static_cast<const std::function<void(size_t)>*>(data))(i); };
    context.ParallelFor(trampoline, n, 0, const_cast<std::function<void(size_t)>*>(&body));
  };
}

}  // namespace graphopt
