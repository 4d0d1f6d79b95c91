// exp, tanh and GELU in float, written for loops the compiler vectorizes: no libm calls, no
// branches (each alternative is computed and one is selected), only +, *, comparisons and bit
// operations. Accuracy, measured against float64 over [-12, 12]: exp within 2e-7 relative,
// tanh within 2e-7 absolute and relative, GELU within 3e-7 max(1, |GELU|) (tests/ort/test_ort_activations.py).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "cpu_target.h"
#include "storage.h"

namespace graphopt {

// e^x for x in [-87, 88]; infinity past 88 and e^-87 = 1.6e-38 (standing in for zero) below -87,
// which is all the activations need. NaN propagates. (A finite stand-in for infinity made
// silu(-inf) = -inf / (1 + e^88) -inf, not NaN, and silu(-3e38) -1.8.)
GRAPHOPT_INLINE float Exp(float x) {
  const bool overflows = x > 88.0f;
  x = x > 88.0f ? 88.0f : x;  // comparisons written so that NaN falls through unchanged
  x = x < -87.0f ? -87.0f : x;
  // x = n ln2 + r with |r| <= ln2 / 2: n by adding and removing 1.5 * 2^23, which rounds to the
  // nearest integer in plain IEEE arithmetic; ln2 split in two for an exact n * ln2_hi.
  constexpr float kRound = 12582912.0f;
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
  // e^r by its Taylor series to r^7 (truncation error below 6e-9 on |r| <= ln2 / 2).
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // Times 2^n, built directly in the exponent bits (n is in [-126, 127] after the clamp; the
  // select keeps a NaN n out of the float-to-int conversion, p carries the NaN instead).
  const float safe_n = n == n ? n : 0.0f;
  const uint32_t scale = static_cast<uint32_t>(static_cast<int32_t>(safe_n) + 127) << 23;
  return overflows ? std::numeric_limits<float>::infinity() : p * FloatOf(scale);
}

GRAPHOPT_INLINE float Tanh(float x) {
  const float a = std::fabs(x);
  // Small |x|: the odd Taylor series to x^15 (alternating, so the error is below the next term,
  // 6e-4 |x|^17 <= 5e-8 |x| for |x| <= 0.55), which keeps full relative accuracy near zero.
  const float x2 = x * x;
  float p = -929569.0f / 638512875.0f;
  p = p * x2 + 21844.0f / 6081075.0f;
  p = p * x2 - 1382.0f / 155925.0f;
  p = p * x2 + 62.0f / 2835.0f;
  p = p * x2 - 17.0f / 315.0f;
  p = p * x2 + 2.0f / 15.0f;
  p = p * x2 - 1.0f / 3.0f;
  const float small = x + x * x2 * p;
  // Otherwise 1 - 2 / (e^2|x| + 1), where the subtraction no longer cancels much.
  const float large = std::copysign(1.0f - 2.0f / (Exp(2.0f * a) + 1.0f), x);
  return a < 0.55f ? small : large;
}

// GELU(x) = x Phi(x), with Phi(-a) = 2^p(a) for a = min(|x|, 6), p of degree 10 fitted minimax in
// the log2 domain (bench/fit_gelu_tail.py --degrees 10; within 4e-8 max(|x|, 1) of GELU in float64,
// 1.2e-7 in this float evaluation, the erf form 1.4e-7). One exp and no division, where
// x (1 + erf(x / sqrt 2)) / 2 took an erf of both branches and a quotient, and ONNX Runtime's own
// Gelu was faster. The negative side has no cancellation (Phi(x) is the tail itself); below -6 the
// factor is 0, as Phi is to 1e-9, so -inf gives NaN (-inf * 0) as torch and ONNX Runtime do. NaN
// falls through every comparison.
GRAPHOPT_INLINE float Gelu(float x) {
  const float a0 = std::fabs(x);
  const float a = a0 > 6.0f ? 6.0f : a0;
  float p = -1.2316898074116262e-08f;
  p = p * a + 4.1466295413834764e-07f;
  p = p * a - 5.938373064448798e-06f;
  p = p * a + 4.5272858539385956e-05f;
  p = p * a - 0.0001642452566400812f;
  p = p * a - 0.0002607177296187933f;
  p = p * a + 0.007299987963735679f;
  p = p * a - 0.052711679012799356f;
  p = p * a - 0.45911722687650525f;
  p = p * a - 1.1511193731536493f;
  p = p * a - 0.9999996396597851f;
  const float tail = Exp(p * 0.693147180559945309f);
  return x * (x >= 0.0f ? 1.0f - tail : (x >= -6.0f ? tail : 0.0f));
}

}  // namespace graphopt
