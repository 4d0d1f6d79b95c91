// Output type and shape inference through ORT's C shape-inference context, so that ORT (and
// anything reading the session's graph) knows the shapes of a fused node's outputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ort_api.h"

namespace graphopt {

// A tensor type as shape inference sees it: element type, and per dimension either a value or
// a symbol. Dimensions that are neither stay unknown.
struct TypeAndShape {
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  std::vector<int64_t> dims;         // -1 where unknown or symbolic
  std::vector<std::string> symbols;  // "" where not symbolic

  // False when some dimension is neither a value nor a symbol: ORT's context can only write
  // values or symbols, so such a shape is left for ORT to discover at run time.
  bool Expressible() const;
};

// The type and shape of input `index`. ORT reports an input of unknown rank as rank 0, so
// callers whose inputs have rank >= 1 treat an empty `dims` as unknown.
TypeAndShape InputTypeAndShape(OrtShapeInferContext* context, size_t index);

void SetOutputTypeAndShape(OrtShapeInferContext* context, size_t index, const TypeAndShape& value);

}  // namespace graphopt
