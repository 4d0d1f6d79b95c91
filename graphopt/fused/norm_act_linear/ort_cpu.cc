// NormActLinear on the CPU: rows split into chunks for the thread pool; each chunk in blocks of rows
// that share a weight matrix and linear-bias row. A block's rows of X (plus Residual) are converted
// to float, normalized and activated into a staging buffer, then multiplied together by the matrix
// (cpu_norm_linear.h), so that each weight load serves several rows.
#include <algorithm>
#include <cstdint>

#include "cpu_norm_linear.h"
#include "cpu_rows.h"
#include "norm_act_linear/ort_kernel.h"

namespace graphopt {

namespace {

// The first row after r that reads another row (or matrix) of an operand broadcast as `b`.
int64_t NextGroup(const RowBroadcast& b, int64_t r) { return b.groups == 1 ? INT64_MAX : (r / b.inner + 1) * b.inner; }

}  // namespace

void NormActLinearCpu(const NormActLinearParams& p, const ParallelFor& parallel_for) {
  if (p.rows == 0) return;
  const int64_t d = p.cols, k_out = p.out_features;
  const RowBroadcast w_rows = p.weight_rows, lb_rows = p.linear_bias_rows;
  const cpu::FloatView scale(p.scale, p.dtype, d * p.scale_rows.groups), bias(p.bias, p.dtype, d * p.bias_rows.groups);
  const cpu::FloatView weight(p.weight, p.dtype, w_rows.groups * k_out * d);
  const cpu::FloatView linear_bias(p.linear_bias, p.dtype, lb_rows.groups * k_out);
  const cpu::NarrowLinear linear(weight.data(), w_rows.groups, k_out, d);
  const cpu::NormRows norm{p.dtype,     p.x,          p.residual,  p.residual_rows, p.residual_sum,
                           scale.data(), p.scale_rows, bias.data(), p.bias_rows,     p.norm,
                           p.epsilon,    p.activation, d};
  const int64_t block = linear.block_rows(), stride = linear.stride();
  // Chunks of about 2^18 element operations, tens of microseconds (RowsPerChunk's 2^16, a few
  // microseconds, cut 64 rows of D = 256 into four chunks for the thread pool), of whole blocks
  // (only a chunk's, and a matrix's, last block is short), as even as they go.
  const int64_t chunks = (p.rows * d * (8 + k_out) >> 18) + 1;
  const int64_t chunk = ((p.rows + chunks - 1) / chunks + block - 1) / block * block;
  cpu::ForEachChunk(p.rows, chunk, parallel_for, [&](int64_t begin, int64_t end) {
    float* hidden = cpu::Scratch(0, static_cast<size_t>(block * stride));
    float* out = cpu::Scratch(1, static_cast<size_t>(block * k_out));
    for (int64_t r0 = begin; r0 < end;) {
      const int64_t n = std::min({block, end - r0, NextGroup(w_rows, r0) - r0, NextGroup(lb_rows, r0) - r0});
      const int64_t matrix = (r0 / w_rows.inner) % w_rows.groups;
      const float* lb = linear_bias.data();
      if (lb != nullptr) lb += (r0 / lb_rows.inner) % lb_rows.groups * k_out;
      cpu::NormalizeRows(norm, r0, n, hidden, stride);
      linear.Multiply(hidden, n, matrix, lb, out);
      if (p.out_activation != Activation::kIdentity) cpu::Activate(p.out_activation, out, n * k_out);
      cpu::StoreRow(p.dtype, out, p.y, r0 * k_out, n * k_out);
      r0 += n;
    }
  });
}

}  // namespace graphopt
