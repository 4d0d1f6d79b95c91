// CPU implementations of the fused ops, independent of ONNX Runtime.
//
// Both functions read p.dtype to pick the storage type, accumulate in float, and split the rows
// into chunks run through `parallel_for` (ONNX Runtime's intra-op thread pool in the library;
// any loop in a test). Shapes are assumed validated by the caller.
#pragma once

#include <cstddef>
#include <functional>

#include "fused_params.h"

namespace graphopt {

// Calls body(i) for every i in [0, n), possibly concurrently.
using ParallelFor = std::function<void(size_t n, const std::function<void(size_t)>& body)>;

void NormActCpu(const NormActParams& p, const ParallelFor& parallel_for);
void NormActLinearCpu(const NormActLinearParams& p, const ParallelFor& parallel_for);

}  // namespace graphopt
