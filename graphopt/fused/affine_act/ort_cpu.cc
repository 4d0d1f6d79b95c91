// AffineAct on the CPU: rows of X converted to float, scaled, shifted, activated and rounded back,
// split into chunks for the thread pool.
#include <cstdint>

#include "affine_act/ort_kernel.h"
#include "cpu_rows.h"

namespace graphopt {

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
      cpu::Activate(p.activation, v, cols);
      cpu::StoreRow(p.dtype, v, p.y, offset, cols);
    }
  });
}

}  // namespace graphopt
