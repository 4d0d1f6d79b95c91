// EmbeddingLookups on the CPU: each index mapped to its row of the concatenated table and the row
// copied as it is (a lookup is exact), split into chunks for the thread pool. An index out of range of
// its own feature's table fails the call with the message ONNX Runtime's Gather gives for it.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>

#include "cpu_rows.h"
#include "embedding_lookups/ort_kernel.h"

namespace graphopt {

namespace {

int64_t IndexAt(const EmbeddingLookupsParams& p, int64_t i) {
  return p.index_bytes == 4 ? static_cast<const int32_t*>(p.indices)[i] : static_cast<const int64_t*>(p.indices)[i];
}

std::string CheckTables(const EmbeddingLookupsParams& p) {
  for (int64_t k = 0; k < p.features; ++k) {
    const int64_t first = p.offsets[k], size = p.sizes[k];
    if (first < 0 || size < 0 || first > p.table_rows || size > p.table_rows - first)
      return "feature " + std::to_string(k) + "'s table (Offsets " + std::to_string(first) + ", Sizes " +
             std::to_string(size) + ") does not fit Table's " + std::to_string(p.table_rows) + " rows";
  }
  return "";
}

// Lowers `target` to `value` if that is smaller (the first failing index whatever the thread order).
void KeepSmallest(std::atomic<int64_t>& target, int64_t value) {
  int64_t seen = target.load();
  while (value < seen && !target.compare_exchange_weak(seen, value)) {
  }
}

}  // namespace

std::string EmbeddingLookupsCpu(const EmbeddingLookupsParams& p, const ParallelFor& parallel_for) {
  if (std::string e = CheckTables(p); !e.empty()) return e;
  if (p.rows == 0 || p.cols == 0) return "";
  const size_t row_bytes = static_cast<size_t>(p.cols) * (p.dtype == DType::kFloat32 ? 4 : 2);
  const auto* table = static_cast<const unsigned char*>(p.table);
  auto* y = static_cast<unsigned char*>(p.y);
  std::atomic<int64_t> first_bad{std::numeric_limits<int64_t>::max()};
  cpu::ForEachChunk(p.rows, cpu::RowsPerChunk(p.cols, p.rows), parallel_for, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t k = r / p.per_feature, size = p.sizes[k];
      int64_t index = IndexAt(p, r);
      if (p.wrap_negative && index < 0) index += size;
      unsigned char* out = y + static_cast<size_t>(r) * row_bytes;
      if (index < 0 || index >= size) {
        std::memset(out, 0, row_bytes);
        KeepSmallest(first_bad, r);
        continue;
      }
      std::memcpy(out, table + static_cast<size_t>(p.offsets[k] + index) * row_bytes, row_bytes);
    }
  });
  const int64_t bad = first_bad.load();
  if (bad == std::numeric_limits<int64_t>::max()) return "";
  const int64_t size = p.sizes[bad / p.per_feature];
  const int64_t lowest = p.wrap_negative ? -size : 0;
  return "indices element out of data bounds, idx=" + std::to_string(IndexAt(p, bad)) +
         " must be within the inclusive range [" + std::to_string(lowest) + "," + std::to_string(size - 1) + "]";
}

}  // namespace graphopt
