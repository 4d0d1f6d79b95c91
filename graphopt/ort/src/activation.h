// The activations of graphopt/fused/table.py (Activation), in float.
#pragma once

#include <cstdint>

#include "cpu_target.h"
#include "fused_enums.h"
#include "vector_math.h"

namespace graphopt {

// One branch per call, not per element: each loop below has a fixed activation and vectorizes
// (the transcendental functions come from vector_math.h, not libm).
GRAPHOPT_INLINE void ApplyActivation(Activation kind, float* v, int64_t n) {
  constexpr float kSqrt2OverPi = 0.79788456080286536f;
  switch (kind) {
    case Activation::kIdentity:
      return;
    case Activation::kRelu:
      // Written so that NaN stays NaN, as in numpy and torch.
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] < 0.0f ? 0.0f : v[i];
      return;
    case Activation::kTanh:
      for (int64_t i = 0; i < n; ++i) v[i] = Tanh(v[i]);
      return;
    case Activation::kGelu:
      for (int64_t i = 0; i < n; ++i) v[i] = Gelu(v[i]);
      return;
    case Activation::kGeluTanh:
      for (int64_t i = 0; i < n; ++i) {
        const float x = v[i];
        v[i] = 0.5f * x * (1.0f + Tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
      }
      return;
    case Activation::kSilu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] / (1.0f + Exp(-v[i]));
      return;
    case Activation::kSigmoid:
      for (int64_t i = 0; i < n; ++i) v[i] = 1.0f / (1.0f + Exp(-v[i]));
      return;
  }
}

}  // namespace graphopt
