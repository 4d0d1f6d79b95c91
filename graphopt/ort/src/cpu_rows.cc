#include "cpu_rows.h"

#include <cmath>

#include "activation.h"
#include "cpu_target.h"
#include "storage.h"

namespace graphopt {
namespace cpu {
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
GRAPHOPT_INLINE void Add(const T* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += ToFloat(src[i]);
}

template <class T>
GRAPHOPT_INLINE void Store(const float* src, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = FromFloat<T>(src[i]);
}

template <class T>
GRAPHOPT_INLINE void Round(float* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = ToFloat(FromFloat<T>(v[i]));
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
  if (rn.activation != Activation::kIdentity) Activate(rn.activation, v, n);
}

namespace {

// Layers of this many outputs or more accumulate each row's outputs together, a vector of kOutputBlock
// outputs per element of the row, from the weight transposed to [d, k_out]: a dot product per output
// pays a horizontal sum each, which dominated short rows (one thread, 4096 rows, D = 32 and K = 32:
// 5.3x the time of ONNX Runtime's LayerNormalization, Relu, MatMul and Add).
constexpr int64_t kWideOutputs = 8;
constexpr int64_t kOutputBlock = 16;  // (a constant bound: the block's sums stay in vector registers)

int64_t PaddedOutputs(int64_t k_out) { return (k_out + kOutputBlock - 1) / kOutputBlock * kOutputBlock; }

}  // namespace

bool WideOutputs(int64_t k_out) { return k_out >= kWideOutputs; }

int64_t TransposedSize(int64_t k_out, int64_t d) { return d * PaddedOutputs(k_out); }

void TransposeWeight(const float* weight, int64_t k_out, int64_t d, float* out) {
  const int64_t padded = PaddedOutputs(k_out);
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t k = 0; k < padded; ++k) out[i * padded + k] = k < k_out ? weight[k * d + i] : 0.0f;
  }
}

namespace {

// Four floats: a vector every x86-64 level has (GCC splits wider generic vectors into slow code where
// the target lacks them, and the default clone is SSE2).
typedef float Quad __attribute__((vector_size(4 * sizeof(float))));
constexpr int kQuads = kOutputBlock / 4;

// Two rows at a time, so that each load of the transposed weight serves two products.
GRAPHOPT_CPU_CLONES void MultiplyWide(const float* hidden, int64_t tile, int64_t d, const float* transposed,
                                      const float* bias, int64_t k_out, float* out) {
  const int64_t padded = PaddedOutputs(k_out);
  for (int64_t j = 0; j < tile; j += 2) {
    const bool pair = j + 1 < tile;
    const float* h0 = hidden + j * d;
    const float* h1 = pair ? h0 + d : h0;
    for (int64_t k0 = 0; k0 < padded; k0 += kOutputBlock) {
      Quad sums0[kQuads] = {}, sums1[kQuads] = {};
      for (int64_t i = 0; i < d; ++i) {
        const float* w = transposed + i * padded + k0;
        const float x0 = h0[i], x1 = h1[i];
        for (int q = 0; q < kQuads; ++q) {
          Quad v;
          __builtin_memcpy(&v, w + 4 * q, sizeof v);
          sums0[q] += x0 * v;
          sums1[q] += x1 * v;
        }
      }
      float first[kOutputBlock], second[kOutputBlock];
      __builtin_memcpy(first, sums0, sizeof first);
      __builtin_memcpy(second, sums1, sizeof second);
      // (the bias after the products, as the unfused graph adds it to the MatMul's result)
      for (int64_t k = k0; k < std::min(k0 + kOutputBlock, k_out); ++k) {
        const float b = bias != nullptr ? bias[k] : 0.0f;
        out[j * k_out + k] = first[k - k0] + b;
        if (pair) out[(j + 1) * k_out + k] = second[k - k0] + b;
      }
    }
  }
}

}  // namespace

GRAPHOPT_CPU_CLONES void MultiplyTile(const float* hidden, int64_t tile, int64_t d, const float* weight,
                                      const float* transposed, const float* bias, int64_t k_out, float* out) {
  if (transposed != nullptr) return MultiplyWide(hidden, tile, d, transposed, bias, k_out, out);
  // Each weight row is used for the whole tile while it is hot in cache.
  for (int64_t k = 0; k < k_out; ++k) {
    const float* w = weight + k * d;
    const float b = bias != nullptr ? bias[k] : 0.0f;
    for (int64_t j = 0; j < tile; ++j) out[j * k_out + k] = Dot(hidden + j * d, w, d) + b;
  }
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
