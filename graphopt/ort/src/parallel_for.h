// How the CPU kernels split their rows: ONNX Runtime's intra-op thread pool in the library, any
// loop in a test.
#pragma once

#include <cstddef>
#include <functional>

namespace graphopt {

// Calls body(i) for every i in [0, n), possibly concurrently.
using ParallelFor = std::function<void(size_t n, const std::function<void(size_t)>& body)>;

}  // namespace graphopt
