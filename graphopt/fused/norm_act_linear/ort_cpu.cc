// NormActLinear on the CPU: each row of X (plus Residual) converted to float, normalized and
// activated, then multiplied by its [K, D] weight matrix in tiles of rows that share the matrix;
// rows split into chunks for the thread pool.
#include <vector>

#include "cpu_rows.h"
#include "norm_act_linear/ort_kernel.h"

namespace graphopt {

void NormActLinearCpu(const NormActLinearParams& p, const ParallelFor& parallel_for) {
  if (p.rows == 0) return;
  const int64_t d = p.cols, k_out = p.out_features;
  const RowBroadcast s_rows = p.scale_rows, b_rows = p.bias_rows;
  const RowBroadcast w_rows = p.weight_rows, lb_rows = p.linear_bias_rows;
  const RowBroadcast r_rows = p.residual_rows.groups == 0 ? RowBroadcast{1, p.rows} : p.residual_rows;
  const cpu::FloatView scale(p.scale, p.dtype, d * s_rows.groups), bias(p.bias, p.dtype, d * b_rows.groups);
  const cpu::FloatView weight(p.weight, p.dtype, w_rows.groups * k_out * d);
  const cpu::FloatView linear_bias(p.linear_bias, p.dtype, lb_rows.groups * k_out);
  const auto row_of = [](const RowBroadcast& b, int64_t r) { return (r / b.inner) % b.groups; };
  constexpr int64_t kTile = 4;  // rows sharing each pass over the weight
  // Wide layers read their matrices transposed, made once per call (no larger than the weights).
  const bool wide = cpu::WideOutputs(k_out);
  std::vector<float> transposed(wide ? static_cast<size_t>(w_rows.groups * cpu::TransposedSize(k_out, d)) : 0);
  for (int64_t m = 0; wide && m < w_rows.groups; ++m)
    cpu::TransposeWeight(weight.data() + m * k_out * d, k_out, d, transposed.data() + m * cpu::TransposedSize(k_out, d));
  cpu::ForEachChunk(p.rows, cpu::RowsPerChunk(d * (8 + k_out), p.rows), parallel_for, [&](int64_t begin, int64_t end) {
    float* hidden = cpu::Scratch(0, static_cast<size_t>(kTile * d));
    float* out = cpu::Scratch(1, static_cast<size_t>(kTile * k_out));
    cpu::RowNorm rn{p.norm, p.epsilon, scale.data(), bias.data(), p.activation};
    for (int64_t r0 = begin; r0 < end;) {
      // A tile: up to kTile rows that multiply by the same matrix and add the same bias row.
      const int64_t matrix = row_of(w_rows, r0), bias_row = row_of(lb_rows, r0);
      int64_t tile = 1;
      while (tile < kTile && r0 + tile < end && row_of(w_rows, r0 + tile) == matrix &&
             row_of(lb_rows, r0 + tile) == bias_row)
        ++tile;
      for (int64_t j = 0; j < tile; ++j) {
        const int64_t r = r0 + j;
        float* v = hidden + j * d;
        if (rn.scale != nullptr) rn.scale = scale.data() + row_of(s_rows, r) * d;
        if (rn.bias != nullptr) rn.bias = bias.data() + row_of(b_rows, r) * d;
        cpu::LoadRow(p.dtype, p.x, r * d, v, d);
        if (p.residual != nullptr) {
          // The sum is rounded to the storage type before the norm sees it, as the unfused graph
          // stores it (see NormActCpu).
          cpu::AddRow(p.dtype, p.residual, row_of(r_rows, r) * d, v, d);
          cpu::RoundRow(p.dtype, v, d);
          if (p.residual_sum != nullptr) cpu::StoreRow(p.dtype, v, p.residual_sum, r * d, d);
        }
        cpu::NormalizeRow(rn, v, d);
      }
      const float* lb = linear_bias.data() != nullptr ? linear_bias.data() + bias_row * k_out : nullptr;
      const float* wt = wide ? transposed.data() + matrix * cpu::TransposedSize(k_out, d) : nullptr;
      cpu::MultiplyTile(hidden, tile, d, weight.data() + matrix * k_out * d, wt, lb, k_out, out);
      if (p.out_activation != Activation::kIdentity) cpu::Activate(p.out_activation, out, tile * k_out);
      cpu::StoreRow(p.dtype, out, p.y, r0 * k_out, tile * k_out);
      r0 += tile;
    }
  });
}

}  // namespace graphopt
