// NormActLinear's CPU rows, a block at a time: the rows of X (+ Residual) normalized and activated
// into a float staging buffer (NormalizeRows), then multiplied by a [K, D] matrix with few outputs
// K, plus a bias (NarrowLinear). A block's rows are multiplied together in registers, so each weight
// load serves several rows and each hidden load several outputs. Both are compiled once per vector
// width (4, 8 or 16 floats: SSE2, AVX2 with FMA, AVX-512) and the widest this CPU runs is picked
// once (cpu_norm_linear.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "broadcast_rows.h"
#include "fused_enums.h"

namespace graphopt {
namespace cpu {

// The rows a NormalizeRows call reads: X (+ Residual) with their storage type, a norm's scale and
// bias in float. Scale, bias and residual rows are read as broadcast_rows.h says;
// residual_rows.groups = 0 means X's rows.
struct NormRows {
  DType dtype;
  const void* x;
  const void* residual;  // null when absent
  RowBroadcast residual_rows;
  void* residual_sum;  // written when residual is given and this is not null
  const float* scale;  // [scale_rows.groups, cols], null when absent
  RowBroadcast scale_rows;
  const float* bias;  // [bias_rows.groups, cols], null when absent
  RowBroadcast bias_rows;
  Norm norm;
  float epsilon;
  Activation activation;
  int64_t cols;
};

// Rows [r0, r0 + n) of X (+ Residual, which it stores to residual_sum, rounded to storage),
// normalized and activated as NormAct normalizes them (statistics in double, the row first
// shifted by its mean), into out[j * stride : j * stride + cols], zeros from cols up to stride
// (NarrowLinear::stride()).
void NormalizeRows(const NormRows& p, int64_t r0, int64_t n, float* out, int64_t stride);

class NarrowLinear {
 public:
  // `matrices` float matrices [k, d] at `weight`, read in place (they must outlive this object);
  // what a kernel needs rearranged is prepared here, once per call of the op.
  NarrowLinear(const float* weight, int64_t matrices, int64_t k, int64_t d);

  // Floats between two staged rows (d rounded up to the vector width): the row's values, then
  // zeros, which the products read.
  int64_t stride() const { return stride_; }
  // Rows per block: Multiply's `rows` may be anything up to this.
  int64_t block_rows() const { return block_rows_; }

  // out[j * k + o] = dot(hidden[j * stride() : j * stride() + d], matrix[o, :]) + bias[o] for
  // j < rows, o < k; bias may be null; out has room for block_rows() rows. Each output is summed
  // in the same order whichever rows share its block, so results do not depend on how rows are
  // split between threads.
  void Multiply(const float* hidden, int64_t rows, int64_t matrix, const float* bias, float* out) const;

  // Kernel layouts, public for the per-instruction-set kernels in cpu_norm_linear.cc.
  struct Layout {
    int64_t k, d, stride;
    const float* weight;      // [k, d] per matrix, read in place by the rows kernel
    const float* tail;        // per matrix [k, width]: the columns past d's last full vector, zero-padded
    const float* transposed;  // per matrix [d, padded k], for the columns kernel
    int64_t padded_k;
  };

 private:
  Layout layout_{};
  int64_t stride_ = 0, block_rows_ = 0;
  bool columns_ = false;
  std::vector<float> packed_;
};

}  // namespace cpu
}  // namespace graphopt
