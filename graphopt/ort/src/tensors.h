// Helpers the op files share to read a kernel context: optional inputs and outputs, shapes in
// error messages, element types, and the bridge from ORT's thread pool to parallel_for.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "parallel_for.h"
#include "fused_enums.h"
#include "ort_api.h"

namespace graphopt {

using Shape = std::vector<int64_t>;

ONNXTensorElementDataType OnnxType(DType dtype);

// "[2, 3, 4]"
std::string ShapeString(const Shape& shape);

// Product of shape[begin:end].
int64_t Elements(const Shape& shape, size_t begin, size_t end);

// The non-negative dimension that attribute 'axis' names in X of `shape`; throws (naming `node`)
// when X is a scalar or the axis is out of range.
size_t ResolveAxis(const std::string& node, int64_t axis, const Shape& shape);

// An input of the node, or an empty value when the optional input is absent.
Ort::ConstValue OptionalInput(const Ort::KernelContext& context, size_t index);

Shape ShapeOf(const Ort::ConstValue& value);

// Throws unless `value` has exactly `expected` as its shape; `what` names the input and the
// rule, e.g. "Scale (X.shape[axis:])".
void CheckShape(const std::string& node, const char* what, const Ort::ConstValue& value, const Shape& expected);

// Allocates output `index` with `shape`; an empty value when the optional output is not wanted.
Ort::UnownedValue OptionalOutput(const Ort::KernelContext& context, size_t index, const Shape& shape);

// Runs bodies on the session's intra-op thread pool (inline when there is a single chunk).
ParallelFor OrtParallelFor(const Ort::KernelContext& context);

}  // namespace graphopt
