// NormalizeRows and NarrowLinear (cpu_norm_linear.h): their kernels, one copy per vector width
// (cpu_norm_linear_kernels.h), and the choice between them. Built with -ffp-contract=fast
// (CMakeLists.txt; GCC's default for C++ anyway): `acc += h * w` is one fused multiply-add where
// the instruction set has one, half the instructions and one rounding instead of two.
//
// The product has two kernels, picked per layer by an estimate of their instructions per row:
// - rows: a dot product per (row, output), the row's columns across the vector lanes, for a
//   register block of NR rows x K outputs; each block's NR x K vectors of partial sums are then
//   summed across lanes together, W at a time, by a tree of shuffles (Reduce). Reads the weight
//   as it is. Its cost is K * D / W products plus the tree, so it suits few outputs.
// - columns: the outputs across the lanes (one vector holds W outputs), each row's value broadcast
//   against a row of the transposed weight; D * ceil(K / W) products and no tree, so it suits
//   K close to a multiple of W on short rows, where the tree would dominate.
// In both, each output is summed in a fixed order that does not depend on the other rows of its
// block, so a row's result is the same whichever block or thread computes it.
#include "cpu_norm_linear.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "cpu_row_ops.h"
#include "cpu_target.h"

namespace graphopt {
namespace cpu {
namespace {

using Layout = NarrowLinear::Layout;
using MultiplyFn = void (*)(const Layout&, bool, const float*, int64_t, int64_t, const float*, float*);

// Rows per register block of the rows kernel for K outputs (the kernels' kAccumulators / K up to
// kGroup outputs, else kGroupRows).
int64_t RowsPerBlock(int width, int64_t k) {
  const int64_t accumulators = width == 16 ? 16 : 8, group_rows = width == 16 ? 4 : 2;
  return k <= accumulators / group_rows ? accumulators / std::max<int64_t>(k, 1) : group_rows;
}

namespace w4 {
#define GRAPHOPT_VECTOR_WIDTH 4
#include "cpu_norm_linear_kernels.h"
#undef GRAPHOPT_VECTOR_WIDTH
}  // namespace w4

#if GRAPHOPT_X86_MULTIVERSION
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
namespace w8 {
#define GRAPHOPT_VECTOR_WIDTH 8
#include "cpu_norm_linear_kernels.h"
#undef GRAPHOPT_VECTOR_WIDTH
}  // namespace w8
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
namespace w16 {
#define GRAPHOPT_VECTOR_WIDTH 16
#include "cpu_norm_linear_kernels.h"
#undef GRAPHOPT_VECTOR_WIDTH
}  // namespace w16
#pragma GCC pop_options
#endif

using NormalizeFn = void (*)(const NormRows&, int64_t, int64_t, float*, int64_t);

struct Isa {
  int width;
  MultiplyFn multiply;
  NormalizeFn normalize;
};

// The widest kernels this CPU runs (and its OS saves the registers of), chosen once. The
// environment variable GRAPHOPT_CPU_VECTOR_WIDTH (4 or 8) caps the width, so tests reach the
// narrower kernels on any machine.
const Isa& Selected() {
  static const Isa isa = [] {
    const char* cap_text = std::getenv("GRAPHOPT_CPU_VECTOR_WIDTH");
    const int cap = cap_text != nullptr ? std::atoi(cap_text) : 16;
#if GRAPHOPT_X86_MULTIVERSION
    if (cap >= 16 && __builtin_cpu_supports("x86-64-v4")) return Isa{16, w16::Multiply, w16::Normalize};
    if (cap >= 8 && __builtin_cpu_supports("x86-64-v3")) return Isa{8, w8::Multiply, w8::Normalize};
#endif
    (void)cap;
    return Isa{4, w4::Multiply, w4::Normalize};
  }();
  return isa;
}

// Whether the columns kernel is the one to use: where the rows kernel's estimated instructions per
// row (products, plus its share of the reduction trees, about 3 (W - 1) per W sums) are a third
// more than the columns kernel's (products; SSE has no broadcast load, a second instruction) and
// the weight is small enough that transposing it on every call costs little beside them. (On
// longer rows the two are within a few percent, and transposing 16 x 768 floats took more time
// than that difference saved on 64 rows.)
bool PreferColumns(int width, int64_t matrices, int64_t k, int64_t d) {
  const int64_t rows_per_block = RowsPerBlock(width, k), group = (width == 16 ? 16 : 8) / rows_per_block;
  const int64_t groups = (k + group - 1) / group, chunks = (d + width - 1) / width;
  const int64_t trees = groups * ((rows_per_block * std::min(k, group) + width - 1) / width);  // per block
  const double rows_cost = static_cast<double>(k * chunks) + 3.0 * (width - 1) * trees / rows_per_block;
  const double columns_cost = static_cast<double>(d * ((k + width - 1) / width)) * (width == 4 ? 2.0 : 1.0);
  return columns_cost * 4 < rows_cost * 3 && matrices * k * d <= 4096;
}

typedef float F4 __attribute__((vector_size(4 * sizeof(float))));
typedef int32_t I4 __attribute__((vector_size(4 * sizeof(int32_t))));

// to[i * stride + o] = from[o * d + i] for o < k, i < d: four by four through registers where the
// block is whole (a float at a time, the transpose took a tenth of a call on 64 rows of D = 64).
void Transpose(const float* from, int64_t k, int64_t d, int64_t stride, float* to) {
  int64_t o = 0;
  for (; o + 4 <= k; o += 4) {
    int64_t i = 0;
    for (; i + 4 <= d; i += 4) {
      F4 r[4];
      for (int j = 0; j < 4; ++j) std::memcpy(&r[j], from + (o + j) * d + i, sizeof r[j]);
      // (rows 0 and 1 interleaved, 2 and 3 interleaved, then the halves of those paired)
      const F4 low01 = GRAPHOPT_SHUFFLE(I4, r[0], r[1], 0, 4, 1, 5);
      const F4 high01 = GRAPHOPT_SHUFFLE(I4, r[0], r[1], 2, 6, 3, 7);
      const F4 low23 = GRAPHOPT_SHUFFLE(I4, r[2], r[3], 0, 4, 1, 5);
      const F4 high23 = GRAPHOPT_SHUFFLE(I4, r[2], r[3], 2, 6, 3, 7);
      const F4 c[4] = {GRAPHOPT_SHUFFLE(I4, low01, low23, 0, 1, 4, 5), GRAPHOPT_SHUFFLE(I4, low01, low23, 2, 3, 6, 7),
                       GRAPHOPT_SHUFFLE(I4, high01, high23, 0, 1, 4, 5),
                       GRAPHOPT_SHUFFLE(I4, high01, high23, 2, 3, 6, 7)};
      for (int j = 0; j < 4; ++j) std::memcpy(to + (i + j) * stride + o, &c[j], sizeof c[j]);
    }
    for (; i < d; ++i)
      for (int j = 0; j < 4; ++j) to[i * stride + o + j] = from[(o + j) * d + i];
  }
  for (; o < k; ++o)
    for (int64_t i = 0; i < d; ++i) to[i * stride + o] = from[o * d + i];
}

}  // namespace

NarrowLinear::NarrowLinear(const float* weight, int64_t matrices, int64_t k, int64_t d) {
  const int w = Selected().width;
  columns_ = PreferColumns(w, matrices, k, d);
  stride_ = (d + w - 1) / w * w;
  const int64_t rows_per_block = columns_ ? (w == 16 ? 8 : 4) : RowsPerBlock(w, k);
  // Blocks of about 16 rows (fewer on long rows, so that a block stays in the L1 cache), of whole
  // register blocks.
  const int64_t target = std::clamp<int64_t>(8192 / std::max<int64_t>(stride_, 1), 1, 16);
  block_rows_ = std::max<int64_t>(1, target / rows_per_block) * rows_per_block;
  layout_ = Layout{k, d, stride_, weight, nullptr, nullptr, 0};
  if (columns_) {
    layout_.padded_k = (k + w - 1) / w * w;
    packed_.assign(static_cast<size_t>(matrices * d * layout_.padded_k), 0.0f);
    for (int64_t m = 0; m < matrices; ++m)
      Transpose(weight + m * k * d, k, d, layout_.padded_k, &packed_[m * d * layout_.padded_k]);
    layout_.transposed = packed_.data();
  } else {
    const int64_t full = d / w * w;
    packed_.assign(static_cast<size_t>(matrices * k * w), 0.0f);
    for (int64_t m = 0; m < matrices; ++m)
      for (int64_t o = 0; o < k; ++o)
        std::copy(weight + (m * k + o) * d + full, weight + (m * k + o + 1) * d, &packed_[(m * k + o) * w]);
    layout_.tail = packed_.data();
  }
}

void NormalizeRows(const NormRows& p, int64_t r0, int64_t n, float* out, int64_t stride) {
  Selected().normalize(p, r0, n, out, stride);
}

void NarrowLinear::Multiply(const float* hidden, int64_t rows, int64_t matrix, const float* bias, float* out) const {
  Selected().multiply(layout_, columns_, hidden, rows, matrix, bias, out);
}

}  // namespace cpu
}  // namespace graphopt
