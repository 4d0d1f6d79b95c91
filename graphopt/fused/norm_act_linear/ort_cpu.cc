// NormActLinear on the CPU: each row of X converted to float, normalized and activated, then
// multiplied by the [K, D] weight in tiles of rows; rows split into chunks for the thread pool.
#include "cpu_rows.h"
#include "norm_act_linear/ort_kernel.h"

namespace graphopt {

void NormActLinearCpu(const NormActLinearParams& p, const ParallelFor& parallel_for) {
  if (p.rows == 0 || p.out_features == 0) return;
  const int64_t d = p.cols, k_out = p.out_features;
  const cpu::FloatView scale(p.scale, p.dtype, d), bias(p.bias, p.dtype, d);
  const cpu::FloatView weight(p.weight, p.dtype, k_out * d), linear_bias(p.linear_bias, p.dtype, k_out);
  const cpu::RowNorm rn{p.norm, p.epsilon, scale.data(), bias.data(), p.activation};
  constexpr int64_t kTile = 4;  // rows sharing each pass over the weight
  cpu::ForEachChunk(p.rows, cpu::RowsPerChunk(d * (8 + k_out), p.rows), parallel_for, [&](int64_t begin, int64_t end) {
    float* hidden = cpu::Scratch(0, static_cast<size_t>(kTile * d));
    float* out = cpu::Scratch(1, static_cast<size_t>(kTile * k_out));
    for (int64_t r0 = begin; r0 < end; r0 += kTile) {
      const int64_t tile = std::min(kTile, end - r0);
      for (int64_t j = 0; j < tile; ++j) {
        cpu::LoadRow(p.dtype, p.x, (r0 + j) * d, hidden + j * d, d);
        cpu::NormalizeRow(rn, hidden + j * d, d);
      }
      cpu::MultiplyTile(hidden, tile, d, weight.data(), linear_bias.data(), k_out, out);
      if (p.out_activation != Activation::kIdentity) cpu::Activate(p.out_activation, out, tile * k_out);
      cpu::StoreRow(p.dtype, out, p.y, r0 * k_out, tile * k_out);
    }
  });
}

}  // namespace graphopt
