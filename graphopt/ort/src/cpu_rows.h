// Row primitives of the CPU kernels (the fused ops' ort_cpu.cc): conversion of rows between their
// storage type and float and the activations, plus per-thread scratch and chunking. (The norms' row
// statistics, which NormAct, GroupNormAct and NormActLinear share, and NormActLinear's matrix product:
// cpu_norm_linear.h.) The kernels are plain loops calling these; each primitive is compiled once per
// instruction set (GRAPHOPT_CPU_CLONES, cpu_target.h), the dispatch costing one indirect call.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "parallel_for.h"
#include "fused_enums.h"

namespace graphopt {
namespace cpu {

// A norm's affine step and activation (cpu_row_ops.h's AffineActivate).
struct RowNorm {
  Norm norm;
  float epsilon;
  const float* scale;  // null when absent
  const float* bias;   // null when absent
  Activation activation;
};

// dst[i] = float(src[offset + i]), src holding `dtype` storage.
void LoadRow(DType dtype, const void* src, int64_t offset, float* dst, int64_t n);
// dst[offset + i] = src[i] rounded to `dtype` (to nearest even).
void StoreRow(DType dtype, const float* src, void* dst, int64_t offset, int64_t n);

void Activate(Activation activation, float* v, int64_t n);

// A per-thread float buffer of at least n floats, reused across rows and calls so the hot loop
// never allocates. `slot` (0 or 1) keeps apart the buffers that one chunk needs at the same time.
float* Scratch(int slot, size_t n);

// A read-only float view of a small parameter tensor (scale, bias, weight): converted once per
// call and shared by all threads; float storage is used in place.
class FloatView {
 public:
  FloatView(const void* data, DType dtype, int64_t n);
  const float* data() const { return data_; }

 private:
  std::vector<float> owned_;
  const float* data_ = nullptr;
};

// Rows per parallel chunk: enough work (~64K element operations) to amortize scheduling.
int64_t RowsPerChunk(int64_t work_per_row, int64_t rows);

// Calls body(begin, end) over [0, rows) in chunks of `chunk` rows through parallel_for.
template <class Body>
void ForEachChunk(int64_t rows, int64_t chunk, const ParallelFor& parallel_for, const Body& body) {
  const size_t chunks = static_cast<size_t>((rows + chunk - 1) / chunk);
  parallel_for(chunks, [&](size_t c) {
    const int64_t begin = static_cast<int64_t>(c) * chunk;
    body(begin, std::min(rows, begin + chunk));
  });
}

}  // namespace cpu
}  // namespace graphopt
