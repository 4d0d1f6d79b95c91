#include "shape_inference.h"

#include <memory>

namespace graphopt {

bool TypeAndShape::Expressible() const {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] < 0 && symbols[i].empty()) return false;
  return true;
}

TypeAndShape InputTypeAndShape(OrtShapeInferContext* context, size_t index) {
  const OrtApi& api = Ort::GetApi();
  OrtTensorTypeAndShapeInfo* info = nullptr;  // owned by the context: not released here
  Ort::ThrowOnError(api.ShapeInferContext_GetInputTypeShape(context, index, &info));
  TypeAndShape out;
  size_t rank = 0;
  Ort::ThrowOnError(api.GetTensorElementType(info, &out.type));
  Ort::ThrowOnError(api.GetDimensionsCount(info, &rank));
  out.dims.resize(rank);
  std::vector<const char*> symbols(rank, nullptr);
  Ort::ThrowOnError(api.GetDimensions(info, out.dims.data(), rank));
  Ort::ThrowOnError(api.GetSymbolicDimensions(info, symbols.data(), rank));
  for (const char* symbol : symbols) out.symbols.emplace_back(symbol != nullptr ? symbol : "");
  return out;
}

void SetOutputTypeAndShape(OrtShapeInferContext* context, size_t index, const TypeAndShape& value) {
  const OrtApi& api = Ort::GetApi();
  OrtTensorTypeAndShapeInfo* raw = nullptr;
  Ort::ThrowOnError(api.CreateTensorTypeAndShapeInfo(&raw));
  std::unique_ptr<OrtTensorTypeAndShapeInfo, void (*)(OrtTensorTypeAndShapeInfo*)> info(
      raw, [](OrtTensorTypeAndShapeInfo* p) { Ort::GetApi().ReleaseTensorTypeAndShapeInfo(p); });
  std::vector<const char*> symbols;
  for (const std::string& symbol : value.symbols) symbols.push_back(symbol.c_str());
  Ort::ThrowOnError(api.SetTensorElementType(info.get(), value.type));
  Ort::ThrowOnError(api.SetDimensions(info.get(), value.dims.data(), value.dims.size()));
  Ort::ThrowOnError(api.SetSymbolicDimensions(info.get(), symbols.data(), symbols.size()));
  Ort::ThrowOnError(api.ShapeInferContext_SetOutputTypeShape(context, index, info.get()));
}

}  // namespace graphopt
