// NormAct on the CPU: each row of X (plus Residual) converted to float, normalized and activated,
// rounded back; rows split into chunks for the thread pool.
#include "cpu_rows.h"
#include "norm_act/ort_kernel.h"

namespace graphopt {

void NormActCpu(const NormActParams& p, const ParallelFor& parallel_for) {
  if (p.rows == 0 || p.cols == 0) return;
  const int64_t cols = p.cols;
  const cpu::FloatView scale(p.scale, p.dtype, cols), bias(p.bias, p.dtype, cols);
  const cpu::RowNorm rn{p.norm, p.epsilon, scale.data(), bias.data(), p.activation};
  cpu::ForEachChunk(p.rows, cpu::RowsPerChunk(cols * 8, p.rows), parallel_for, [&](int64_t begin, int64_t end) {
    float* v = cpu::Scratch(0, static_cast<size_t>(cols));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t offset = r * cols;
      cpu::LoadRow(p.dtype, p.x, offset, v, cols);
      if (p.residual != nullptr) {
        // The sum is rounded to the storage type before the norm sees it, as the unfused graph
        // stores it (an fp16 sum that overflows is infinite there, and its row NaN).
        cpu::AddRow(p.dtype, p.residual, offset, v, cols);
        cpu::RoundRow(p.dtype, v, cols);
        if (p.residual_sum != nullptr) cpu::StoreRow(p.dtype, v, p.residual_sum, offset, cols);
      }
      cpu::NormalizeRow(rn, v, cols);
      cpu::StoreRow(p.dtype, v, p.y, offset, cols);
    }
  });
}

}  // namespace graphopt
