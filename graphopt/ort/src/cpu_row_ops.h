// Element loops over one row shared by the CPU kernels' row functions (cpu_rows.cc) and
// NormActLinear's per-instruction-set kernels (cpu_norm_linear.cc): conversions between storage
// and float, and a norm's affine step and activation. Plain loops, always inlined, which the
// compiler vectorizes for whichever instruction set the function they land in is compiled for.
#pragma once

#include <cstdint>

#include "activation.h"
#include "cpu_rows.h"
#include "cpu_target.h"
#include "storage.h"

namespace graphopt {
namespace cpu {

template <class T>
GRAPHOPT_INLINE void Load(const T* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = ToFloat(src[i]);
}

template <class T>
GRAPHOPT_INLINE void Add(const T* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += ToFloat(src[i]);
}

template <class T>
GRAPHOPT_INLINE void Store(const float* src, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = FromFloat<T>(src[i]);
}

template <class T>
GRAPHOPT_INLINE void Round(float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = ToFloat(FromFloat<T>(v[i]));
}

// v <- activation((v - mean) * rstd * scale + bias), scale and bias as rn has them.
GRAPHOPT_INLINE void AffineActivate(const RowNorm& rn, float* v, int64_t n, float mean, float rstd) {
  // One pass per present combination, so no loop tests for a missing scale or bias.
  const float* scale = rn.scale;
  const float* bias = rn.bias;
  if (scale != nullptr && bias != nullptr) {
    for (int64_t i = 0; i < n; ++i) v[i] = (v[i] - mean) * rstd * scale[i] + bias[i];
  } else if (scale != nullptr) {
    for (int64_t i = 0; i < n; ++i) v[i] = (v[i] - mean) * rstd * scale[i];
  } else if (bias != nullptr) {
    for (int64_t i = 0; i < n; ++i) v[i] = (v[i] - mean) * rstd + bias[i];
  } else {
    for (int64_t i = 0; i < n; ++i) v[i] = (v[i] - mean) * rstd;
  }
  ApplyActivation(rn.activation, v, n);
}

}  // namespace cpu
}  // namespace graphopt
