// CPU kernels: one templated implementation per op over the storage type (float, Half,
// BFloat16), float accumulation, rows split into chunks for the thread pool, the row loops
// compiled per instruction set (cpu_target.h).
#include "cpu_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "activation.h"
#include "cpu_target.h"
#include "storage.h"

namespace graphopt {
namespace {

// Reductions keep kLanes independent partial sums: the compiler can then vectorize them
// without reassociating float additions (we do not build with -ffast-math), and the shorter
// summation chains lose less precision on long rows.
constexpr int kLanes = 16;

GRAPHOPT_INLINE float AddLanes(const float* lanes) {
  float total = 0.0f;
  for (int l = 0; l < kLanes; ++l) total += lanes[l];
  return total;
}

GRAPHOPT_INLINE float Sum(const float* v, int64_t n) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += v[i + l];
  float tail = 0.0f;
  for (; i < n; ++i) tail += v[i];
  return AddLanes(lanes) + tail;
}

GRAPHOPT_INLINE float SumSquares(const float* v, float center, int64_t n) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float d = v[i + l] - center;
      lanes[l] += d * d;
    }
  float tail = 0.0f;
  for (; i < n; ++i) tail += (v[i] - center) * (v[i] - center);
  return AddLanes(lanes) + tail;
}

GRAPHOPT_INLINE float Dot(const float* a, const float* b, int64_t n) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lanes[l] += a[i + l] * b[i + l];
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return AddLanes(lanes) + tail;
}

template <class T>
GRAPHOPT_INLINE void Load(const T* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = ToFloat(src[i]);
}

template <class T>
GRAPHOPT_INLINE void Store(const float* src, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = FromFloat<T>(src[i]);
}

// A per-thread float buffer, reused across rows and calls so the hot loop never allocates.
// `slot` keeps apart the buffers that one chunk needs at the same time.
float* Scratch(int slot, size_t n) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& buffer = buffers[slot];
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

// A read-only float view of a small parameter tensor (scale, bias, weight): converted once per
// call and shared by all threads; float storage is used in place.
class FloatView {
 public:
  FloatView(const void* data, DType dtype, int64_t n) {
    if (data == nullptr) return;
    if (dtype == DType::kFloat32) {
      data_ = static_cast<const float*>(data);
      return;
    }
    owned_.resize(static_cast<size_t>(n));
    if (dtype == DType::kFloat16)
      Load(static_cast<const Half*>(data), owned_.data(), n);
    else
      Load(static_cast<const BFloat16*>(data), owned_.data(), n);
    data_ = owned_.data();
  }
  const float* data() const { return data_; }

 private:
  std::vector<float> owned_;
  const float* data_ = nullptr;
};

struct RowNorm {
  Norm norm;
  float epsilon;
  const float* scale;  // null when absent
  const float* bias;   // null when absent
  Activation activation;
};

// v <- activation(norm(v) * scale + bias), in place, statistics in float. Layer norm takes the
// variance around the mean in a second pass (more accurate than E[x^2] - E[x]^2).
GRAPHOPT_INLINE void NormalizeRow(const RowNorm& rn, float* v, int64_t n) {
  const float inv_n = 1.0f / static_cast<float>(n);
  const float mean = rn.norm == Norm::kLayer ? Sum(v, n) * inv_n : 0.0f;
  const float rstd = 1.0f / std::sqrt(SumSquares(v, mean, n) * inv_n + rn.epsilon);
  // One pass per present combination, so no loop tests for a missing scale or bias.
  const float* scale = rn.scale;
  const float* bias = rn.bias;
  if (scale != nullptr && bias != nullptr) {
    for (int64_t i = 0; i < n; ++i) v[i] = (v[i] - mean) * rstd * scale[i] + bias[i];
  } else if (scale != nullptr) {
    for (int64_t i = 0; i < n; ++i) v[i] = (v[i] - mean) * rstd * scale[i];
  } else if (bias != nullptr) {
    for (int64_t i = 0; i < n; ++i) v[i] = (v[i] - mean) * rstd + bias[i];
  } else {
    for (int64_t i = 0; i < n; ++i) v[i] = (v[i] - mean) * rstd;
  }
  ApplyActivation(rn.activation, v, n);
}

template <class T>
GRAPHOPT_INLINE void NormActRowsTyped(const NormActParams& p, const RowNorm& rn, int64_t begin, int64_t end) {
  const int64_t cols = p.cols;
  const T* x = static_cast<const T*>(p.x);
  const T* residual = static_cast<const T*>(p.residual);
  T* y = static_cast<T*>(p.y);
  T* residual_sum = static_cast<T*>(p.residual_sum);
  float* v = Scratch(0, static_cast<size_t>(cols));
  for (int64_t r = begin; r < end; ++r) {
    const int64_t offset = r * cols;
    Load(x + offset, v, cols);
    if (residual != nullptr) {
      // The norm sees the float sum; ResidualSum is that sum rounded to the storage type.
      for (int64_t i = 0; i < cols; ++i) v[i] += ToFloat(residual[offset + i]);
      if (residual_sum != nullptr) Store(v, residual_sum + offset, cols);
    }
    NormalizeRow(rn, v, cols);
    Store(v, y + offset, cols);
  }
}

// Rows [begin, end) of NormAct; one clone per instruction set (cpu_target.h).
GRAPHOPT_CPU_CLONES void NormActRows(const NormActParams& p, const RowNorm& rn, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::kFloat32:
      return NormActRowsTyped<float>(p, rn, begin, end);
    case DType::kFloat16:
      return NormActRowsTyped<Half>(p, rn, begin, end);
    case DType::kBFloat16:
      return NormActRowsTyped<BFloat16>(p, rn, begin, end);
  }
}

// Rows of a NormActLinear tile, normalized into `hidden` while the tile is multiplied by each
// weight row as that row is hot in cache.
constexpr int64_t kTile = 4;

template <class T>
GRAPHOPT_INLINE void NormActLinearRowsTyped(const NormActLinearParams& p, const RowNorm& rn, const float* weight,
                                            const float* linear_bias, int64_t begin, int64_t end) {
  const int64_t d = p.cols, k_out = p.out_features;
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  float* hidden = Scratch(0, static_cast<size_t>(kTile * d));
  float* out = Scratch(1, static_cast<size_t>(kTile * k_out));
  for (int64_t r0 = begin; r0 < end; r0 += kTile) {
    const int64_t tile = std::min(kTile, end - r0);
    for (int64_t j = 0; j < tile; ++j) {
      Load(x + (r0 + j) * d, hidden + j * d, d);
      NormalizeRow(rn, hidden + j * d, d);
    }
    for (int64_t k = 0; k < k_out; ++k) {
      const float* w = weight + k * d;
      const float b = linear_bias != nullptr ? linear_bias[k] : 0.0f;
      for (int64_t j = 0; j < tile; ++j) out[j * k_out + k] = Dot(hidden + j * d, w, d) + b;
    }
    for (int64_t j = 0; j < tile; ++j) {
      ApplyActivation(p.out_activation, out + j * k_out, k_out);
      Store(out + j * k_out, y + (r0 + j) * k_out, k_out);
    }
  }
}

GRAPHOPT_CPU_CLONES void NormActLinearRows(const NormActLinearParams& p, const RowNorm& rn, const float* weight,
                                           const float* linear_bias, int64_t begin, int64_t end) {
  switch (p.dtype) {
    case DType::kFloat32:
      return NormActLinearRowsTyped<float>(p, rn, weight, linear_bias, begin, end);
    case DType::kFloat16:
      return NormActLinearRowsTyped<Half>(p, rn, weight, linear_bias, begin, end);
    case DType::kBFloat16:
      return NormActLinearRowsTyped<BFloat16>(p, rn, weight, linear_bias, begin, end);
  }
}

// Rows per parallel chunk: enough work (~64K element operations) to amortize scheduling.
int64_t RowsPerChunk(int64_t work_per_row, int64_t rows) {
  const int64_t target = int64_t{1} << 16;
  return std::clamp<int64_t>(target / std::max<int64_t>(work_per_row, 1), 1, std::max<int64_t>(rows, 1));
}

// Calls rows(begin, end) over [0, rows) in chunks of `chunk` rows through parallel_for.
template <class Rows>
void ForEachChunk(int64_t rows, int64_t chunk, const ParallelFor& parallel_for, const Rows& body) {
  const size_t chunks = static_cast<size_t>((rows + chunk - 1) / chunk);
  parallel_for(chunks, [&](size_t c) {
    const int64_t begin = static_cast<int64_t>(c) * chunk;
    body(begin, std::min(rows, begin + chunk));
  });
}

}  // namespace

void NormActCpu(const NormActParams& p, const ParallelFor& parallel_for) {
  if (p.rows == 0 || p.cols == 0) return;
  const FloatView scale(p.scale, p.dtype, p.cols), bias(p.bias, p.dtype, p.cols);
  const RowNorm rn{p.norm, p.epsilon, scale.data(), bias.data(), p.activation};
  ForEachChunk(p.rows, RowsPerChunk(p.cols * 8, p.rows), parallel_for,
               [&](int64_t begin, int64_t end) { NormActRows(p, rn, begin, end); });
}

void NormActLinearCpu(const NormActLinearParams& p, const ParallelFor& parallel_for) {
  if (p.rows == 0 || p.out_features == 0) return;
  const int64_t d = p.cols;
  const FloatView scale(p.scale, p.dtype, d), bias(p.bias, p.dtype, d);
  const FloatView weight(p.weight, p.dtype, p.out_features * d), linear_bias(p.linear_bias, p.dtype, p.out_features);
  const RowNorm rn{p.norm, p.epsilon, scale.data(), bias.data(), p.activation};
  ForEachChunk(p.rows, RowsPerChunk(d * (8 + p.out_features), p.rows), parallel_for, [&](int64_t begin, int64_t end) {
    NormActLinearRows(p, rn, weight.data(), linear_bias.data(), begin, end);
  });
}

}  // namespace graphopt
