// AffineAct on the CPU: rows of X converted to float, scaled, shifted, activated and rounded back,
// split into chunks for the thread pool.
#include <algorithm>
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
  // Short rows in blocks (about 4096 values, in the L1 cache) converted, activated and stored by one
  // call each: one row at a time, 7 x 7 maps paid three dispatched calls per 49 values (ReLU 0.62-0.67x
  // -> 0.49-0.50x and SiLU 0.84-0.87x -> 0.62-0.65x the time of ONNX Runtime's Mul, Add and activation;
  // 14 x 14 SiLU 0.99-1.14x -> 0.93-0.98x). Rows of 512 values and more stay one at a time: at 28 x 28,
  // blocks measured 3-5% slower, within the noise (bench/results/2026-11-28-cpu/affine_act_cpu.json).
  const int64_t block = cols < 512 ? std::clamp<int64_t>(4096 / cols, 1, 64) : 1;
  cpu::ForEachChunk(p.rows, cpu::RowsPerChunk(cols * 2, p.rows), parallel_for, [&](int64_t begin, int64_t end) {
    float* v = cpu::Scratch(0, static_cast<size_t>(block * cols));
    for (int64_t r0 = begin; r0 < end; r0 += block) {
      const int64_t n = std::min(block, end - r0);
      cpu::LoadRow(p.dtype, p.x, r0 * cols, v, n * cols);
      for (int64_t j = 0; j < n; ++j) {
        float* w = v + j * cols;
        if (p.per_row) {
          const int64_t c = (r0 + j) % p.channels;
          const float s = scale != nullptr ? scale[c] : 1.0f;
          const float b = bias != nullptr ? bias[c] : 0.0f;
          for (int64_t i = 0; i < cols; ++i) w[i] = w[i] * s + b;
        } else {
          if (scale != nullptr)
            for (int64_t i = 0; i < cols; ++i) w[i] *= scale[i];
          if (bias != nullptr)
            for (int64_t i = 0; i < cols; ++i) w[i] += bias[i];
        }
      }
      cpu::Activate(p.activation, v, n * cols);
      cpu::StoreRow(p.dtype, v, p.y, r0 * cols, n * cols);
    }
  });
}

}  // namespace graphopt
