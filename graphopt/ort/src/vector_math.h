// exp, tanh and erf in float, written for loops the compiler vectorizes: no libm calls, no
// branches (each alternative is computed and one is selected), only +, *, comparisons and bit
// operations. Accuracy, measured against float64 over [-10, 10]: exp within 2e-7 relative,
// tanh and erf within 2e-7 absolute and relative (tests/ort/test_activations.py).
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

GRAPHOPT_INLINE float Erf(float x) {
  const float a = std::fabs(x);
  // |x| < 1: Taylor series 2/sqrt(pi) * sum (-1)^n x^(2n+1) / (n! (2n+1)), to n = 11.
  const float x2 = x * x;
  float p = -1.22905552e-09f;
  p = p * x2 + 1.48071928e-08f;
  p = p * x2 - 1.63658441e-07f;
  p = p * x2 + 1.64621144e-06f;
  p = p * x2 - 1.49256502e-05f;
  p = p * x2 + 0.000120553326f;
  p = p * x2 - 0.000854832702f;
  p = p * x2 + 0.00522397785f;
  p = p * x2 - 0.0268661715f;
  p = p * x2 + 0.112837918f;
  p = p * x2 - 0.376126379f;
  p = p * x2 + 1.12837923f;
  const float small = x * p;
  // |x| >= 1: erf = 1 - erfc, erfc(a) = e^(-a^2) Q(t), t = 1 / (1 + a/2), where Q is a degree-7
  // polynomial fitted (least squares, relative, float64) to erfc(a) e^(a^2) on a in [0.875, 4];
  // its relative error is below 3e-7 in float evaluation. Past 4, erf is 1 in float.
  const float c = a > 4.0f ? 4.0f : a;  // NaN falls through
  const float t = 1.0f / (1.0f + 0.5f * c);
  float q = 0.120024055f;
  q = q * t - 0.473630756f;
  q = q * t + 0.566975415f;
  q = q * t - 0.106713794f;
  q = q * t + 0.349340826f;
  q = q * t + 0.259236068f;
  q = q * t + 0.284985214f;
  q = q * t - 0.000159133808f;
  const float large = std::copysign(1.0f - Exp(-c * c) * q, x);
  return a < 1.0f ? small : large;
}

}  // namespace graphopt
