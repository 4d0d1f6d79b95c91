// Storage types of the fused kernels and their conversions to and from float.
//
// The kernels compute in float and convert at the edges. The conversions use integer and float
// operations and selects only, no branches, so the compiler vectorizes the load/store loops;
// float -> half/bfloat16 rounds to nearest even, as numpy, torch and ONNX Runtime do.
#pragma once

#include <cstdint>
#include <cstring>

#include "cpu_target.h"
#include "fused_enums.h"

namespace graphopt {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

GRAPHOPT_INLINE uint32_t BitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
GRAPHOPT_INLINE float FloatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

GRAPHOPT_INLINE float ToFloat(float x) { return x; }

GRAPHOPT_INLINE float ToFloat(BFloat16 x) { return FloatOf(static_cast<uint32_t>(x.bits) << 16); }

GRAPHOPT_INLINE float ToFloat(Half x) {
  // Exponent and mantissa move into float position and the exponent bias is fixed; infinity and
  // NaN need a larger exponent shift; a subnormal half becomes a normal float by subtracting the
  // implicit leading one. All three are computed and one selected, so loops vectorize.
  const uint32_t sign = static_cast<uint32_t>(x.bits & 0x8000u) << 16;
  const uint32_t body = static_cast<uint32_t>(x.bits & 0x7fffu) << 13;
  const uint32_t exponent = body & (0x7c00u << 13);
  const uint32_t normal = body + ((127u - 15u) << 23);
  const uint32_t inf_nan = normal + ((128u - 16u) << 23);
  const uint32_t subnormal = BitsOf(FloatOf(normal + (1u << 23)) - FloatOf(113u << 23));
  const uint32_t out = exponent == (0x7c00u << 13) ? inf_nan : exponent == 0 ? subnormal : normal;
  return FloatOf(out | sign);
}

template <class T>
T FromFloat(float x);

template <>
GRAPHOPT_INLINE float FromFloat<float>(float x) {
  return x;
}

template <>
GRAPHOPT_INLINE BFloat16 FromFloat<BFloat16>(float x) {
  const uint32_t u = BitsOf(x);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;  // to nearest, ties to even
  const uint32_t quiet_nan = (u >> 16) | 0x40u;
  return BFloat16{static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded)};
}

template <>
GRAPHOPT_INLINE Half FromFloat<Half>(float x) {
  // Three candidates, one selected (see ToFloat(Half)): too large for a half (infinity, or NaN
  // kept NaN), subnormal half (float addition rounds the low bits to nearest even), normal half
  // (rounded to nearest even by adding half an ulp minus one, plus the lowest kept bit).
  const uint32_t all = BitsOf(x);
  const uint32_t sign = all & 0x80000000u;
  const uint32_t u = all ^ sign;
  const uint32_t overflow = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
  const float magic = FloatOf(((127u - 15u) + (23u - 10u) + 1u) << 23);
  const uint32_t subnormal = BitsOf(FloatOf(u) + magic) - BitsOf(magic);
  const uint32_t normal = (u + (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + ((u >> 13) & 1u)) >> 13;
  const uint32_t out = u >= ((127u + 16u) << 23) ? overflow : u < (113u << 23) ? subnormal : normal;
  return Half{static_cast<uint16_t>(out | (sign >> 16))};
}

// Calls body(T{}) with T the storage type of `dtype` (a generic lambda picks T up from its argument).
template <class Body>
void DispatchStorage(DType dtype, Body&& body) {
  switch (dtype) {
    case DType::kFloat32:
      body(float{});
      return;
    case DType::kFloat16:
      body(Half{});
      return;
    case DType::kBFloat16:
      body(BFloat16{});
      return;
  }
}

}  // namespace graphopt
