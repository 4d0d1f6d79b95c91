// EmbeddingLookups' kernels for ONNX Runtime (the spec, EmbeddingLookupsSpec, is generated: fused_ops.h):
//   Y[k, ...] = Table[Offsets[k] + Indices[k, ...]], each index checked against feature k's own table.
#pragma once

#include <cstdint>
#include <string>

#include "fused_enums.h"
#include "parallel_for.h"

namespace graphopt {

// The indices seen as one flat run of `rows` (feature k's `per_feature` of them from k * per_feature),
// Y as contiguous [rows, cols].
struct EmbeddingLookupsParams {
  const void* table = nullptr;  // [table_rows, cols]
  const void* indices = nullptr;  // [rows], int32 or int64
  int32_t index_bytes = 8;  // 4: int32 indices, 8: int64
  const int64_t* offsets = nullptr;  // [features]: the first row of each feature's table
  const int64_t* sizes = nullptr;  // [features]: the rows of each feature's table
  void* y = nullptr;  // [rows, cols]
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t table_rows = 0;
  int64_t features = 0;
  int64_t per_feature = 0;
  bool wrap_negative = false;  // -sizes[k]..-1 count from the end of feature k's table (ONNX Gather)
  DType dtype = DType::kFloat32;
};

// On the CPU (ort_cpu.cc), offsets and sizes in host memory: "" on success, else what is wrong: a
// feature's table that does not fit Table, or, for the first index out of range of its own feature's
// table, ONNX Runtime's Gather message with that feature's bounds (that row is then left as zeros).
std::string EmbeddingLookupsCpu(const EmbeddingLookupsParams& p, const ParallelFor& parallel_for);

namespace cuda {
// The ahead-of-time Triton kernel on `stream` (cuda_launch.cc): "" on success, else what failed. An
// index out of range of its feature's table gives a row of zeros, as ONNX Runtime's CUDA Gather does.
std::string LaunchEmbeddingLookups(const EmbeddingLookupsParams& params, void* stream);
// The variant a launch would run ("op/dtype/tier"), or "error: ..."; needs no GPU.
std::string EmbeddingLookupsVariant(const EmbeddingLookupsParams& params);
}  // namespace cuda

}  // namespace graphopt
