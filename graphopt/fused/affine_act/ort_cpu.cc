// AffineAct on the CPU: rows of X converted to float, scaled, shifted, activated and rounded back,
// split into chunks for the thread pool.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "affine_act/ort_kernel.h"
#include "cpu_rows.h"

namespace graphopt {

namespace {

// x * g(x) activations below this are -0 to float precision (|silu(-100)| < 4e-42); the shared row
// activations are accurate where a normalized value can fall, not here (their clamped exponential
// makes silu(-3e38) -1.8), and give 0 for -inf where torch and ONNX's ops give -inf * 0, NaN.
constexpr float kNegligibleBelow = -100.0f;

bool ScalesItsInput(Activation activation) {
  return activation == Activation::kSilu || activation == Activation::kGelu || activation == Activation::kGeluTanh;
}

void ActivateRow(Activation activation, float* v, int64_t n) {
  bool far_negative = false;
  if (ScalesItsInput(activation))
    for (int64_t i = 0; i < n; ++i) far_negative |= v[i] < kNegligibleBelow;
  if (!far_negative) {
    cpu::Activate(activation, v, n);
    return;
  }
  float* before = cpu::Scratch(1, static_cast<size_t>(n));
  std::copy(v, v + n, before);
  cpu::Activate(activation, v, n);
  for (int64_t i = 0; i < n; ++i) {
    if (before[i] < kNegligibleBelow)
      v[i] = std::isinf(before[i]) ? std::numeric_limits<float>::quiet_NaN() : -0.0f;
  }
}

}  // namespace

void AffineActCpu(const AffineActParams& p, const ParallelFor& parallel_for) {
  if (p.rows == 0 || p.cols == 0) return;
  const int64_t cols = p.cols;
  const cpu::FloatView scale_view(p.scale, p.dtype, p.channels), bias_view(p.bias, p.dtype, p.channels);
  const float* scale = scale_view.data();
  const float* bias = bias_view.data();
  cpu::ForEachChunk(p.rows, cpu::RowsPerChunk(cols * 2, p.rows), parallel_for, [&](int64_t begin, int64_t end) {
    float* v = cpu::Scratch(0, static_cast<size_t>(cols));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t offset = r * cols;
      cpu::LoadRow(p.dtype, p.x, offset, v, cols);
      if (p.per_row) {
        const int64_t c = r % p.channels;
        const float s = scale != nullptr ? scale[c] : 1.0f;
        const float b = bias != nullptr ? bias[c] : 0.0f;
        for (int64_t i = 0; i < cols; ++i) v[i] = v[i] * s + b;
      } else {
        if (scale != nullptr)
          for (int64_t i = 0; i < cols; ++i) v[i] *= scale[i];
        if (bias != nullptr)
          for (int64_t i = 0; i < cols; ++i) v[i] += bias[i];
      }
      ActivateRow(p.activation, v, cols);
      cpu::StoreRow(p.dtype, v, p.y, offset, cols);
    }
  });
}

}  // namespace graphopt
