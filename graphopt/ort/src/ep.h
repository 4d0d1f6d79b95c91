// The execution providers a fused kernel is registered for.
#pragma once

namespace graphopt {

enum class Ep { kCpu, kCuda };

}  // namespace graphopt
