#include "cpu_rows.h"

#include <cmath>

#include "cpu_row_ops.h"
#include "cpu_target.h"

namespace graphopt {
namespace cpu {
namespace {

// Reductions keep kLanes independent partial sums: the compiler can then vectorize them
// without reassociating float additions (we do not build with -ffast-math), and the shorter
// summation chains lose less precision on long rows. (NormActLinear normalizes its rows with
// explicit vectors instead: cpu_norm_linear_kernels.h.)
constexpr int kLanes = 16;

// The mean of a row, in double: a float sum of values near float's top would be infinite.
GRAPHOPT_INLINE float Mean(const float* v, int64_t n) {
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += v[i + l];
  double total = 0.0;
  for (; i < n; ++i) total += v[i];
  for (int l = 0; l < kLanes; ++l) total += lanes[l];
  return static_cast<float>(total / static_cast<double>(n));
}

// In double: a square of a float beyond 1.8e19 is beyond float's range, and the row's variance
// would be infinite (its normalized values NaN) where the unfused norm's is finite.
GRAPHOPT_INLINE double SumSquares(const float* v, float center, int64_t n) {
  double lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const double d = static_cast<double>(v[i + l]) - center;
      lanes[l] += d * d;
    }
  double total = 0.0;
  for (; i < n; ++i) total += (static_cast<double>(v[i]) - center) * (static_cast<double>(v[i]) - center);
  for (int l = 0; l < kLanes; ++l) total += lanes[l];
  return total;
}

GRAPHOPT_INLINE void Subtract(float* v, float value, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] -= value;
}

}  // namespace

GRAPHOPT_CPU_CLONES void LoadRow(DType dtype, const void* src, int64_t offset, float* dst, int64_t n) {
  switch (dtype) {
    case DType::kFloat32:
      return Load(static_cast<const float*>(src) + offset, dst, n);
    case DType::kFloat16:
      return Load(static_cast<const Half*>(src) + offset, dst, n);
    case DType::kBFloat16:
      return Load(static_cast<const BFloat16*>(src) + offset, dst, n);
  }
}

GRAPHOPT_CPU_CLONES void AddRow(DType dtype, const void* src, int64_t offset, float* dst, int64_t n) {
  switch (dtype) {
    case DType::kFloat32:
      return Add(static_cast<const float*>(src) + offset, dst, n);
    case DType::kFloat16:
      return Add(static_cast<const Half*>(src) + offset, dst, n);
    case DType::kBFloat16:
      return Add(static_cast<const BFloat16*>(src) + offset, dst, n);
  }
}

GRAPHOPT_CPU_CLONES void StoreRow(DType dtype, const float* src, void* dst, int64_t offset, int64_t n) {
  switch (dtype) {
    case DType::kFloat32:
      return Store(src, static_cast<float*>(dst) + offset, n);
    case DType::kFloat16:
      return Store(src, static_cast<Half*>(dst) + offset, n);
    case DType::kBFloat16:
      return Store(src, static_cast<BFloat16*>(dst) + offset, n);
  }
}

GRAPHOPT_CPU_CLONES void RoundRow(DType dtype, float* v, int64_t n) {
  switch (dtype) {
    case DType::kFloat32:
      return;
    case DType::kFloat16:
      return Round<Half>(v, n);
    case DType::kBFloat16:
      return Round<BFloat16>(v, n);
  }
}

GRAPHOPT_CPU_CLONES void Activate(Activation activation, float* v, int64_t n) { ApplyActivation(activation, v, n); }

GRAPHOPT_CPU_CLONES void NormalizeRow(const RowNorm& rn, float* v, int64_t n) {
  // Layer norm takes the variance around the mean in a second pass (more accurate than
  // E[x^2] - E[x]^2); RMS norm centers at 0. The row is first shifted by its float mean (the
  // pivot): a value near the pivot (a row with a large common offset, 1000 + noise) loses
  // nothing in the difference, which is exact, and `mean` is then the small mean of the shifted
  // row, which corrects the pivot's rounding without shifting every value by it. (A shift by the
  // first element, as before, rounds every difference twice where that element is far from the
  // rest: half an ulp more error on ordinary rows, and 0 * inf where a damaged scale is infinite.)
  const float inv_n = 1.0f / static_cast<float>(n);
  if (rn.norm == Norm::kLayer) Subtract(v, Mean(v, n), n);
  const float mean = rn.norm == Norm::kLayer ? Mean(v, n) : 0.0f;
  const float rstd = static_cast<float>(1.0 / std::sqrt(SumSquares(v, mean, n) * inv_n + rn.epsilon));
  AffineActivate(rn, v, n, mean, rstd);
}

float* Scratch(int slot, size_t n) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& buffer = buffers[slot];
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

FloatView::FloatView(const void* data, DType dtype, int64_t n) {
  if (data == nullptr) return;
  if (dtype == DType::kFloat32) {
    data_ = static_cast<const float*>(data);
    return;
  }
  owned_.resize(static_cast<size_t>(n));
  LoadRow(dtype, data, 0, owned_.data(), n);
  data_ = owned_.data();
}

int64_t RowsPerChunk(int64_t work_per_row, int64_t rows) {
  const int64_t target = int64_t{1} << 16;
  return std::clamp<int64_t>(target / std::max<int64_t>(work_per_row, 1), 1, std::max<int64_t>(rows, 1));
}

}  // namespace cpu
}  // namespace graphopt
