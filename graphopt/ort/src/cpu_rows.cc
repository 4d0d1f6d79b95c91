#include "cpu_rows.h"

#include "cpu_row_ops.h"
#include "cpu_target.h"

namespace graphopt {
namespace cpu {

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

GRAPHOPT_CPU_CLONES void Activate(Activation activation, float* v, int64_t n) { ApplyActivation(activation, v, n); }

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
