// EmbeddingLookups' launch of its ahead-of-time Triton kernel on ONNX Runtime's stream. Argument order:
// the kernel's AOT_KERNEL (triton_kernel.py). The kernel does not trap here: an index out of range
// gives a row of zeros, as ONNX Runtime's own CUDA Gather gives for the original lookup.
#include <limits>

#include "embedding_lookups/ort_kernel.h"
#include "launch.h"

namespace graphopt::cuda {
namespace {

const KernelVariant* SelectEmbeddingLookups(const EmbeddingLookupsParams& p) {
  const KernelTable& table = GeneratedKernelTable();
  const bool aligned = IsAligned(table, p.cols, {p.table, p.y});
  return Select(table, KernelOp::kEmbeddingLookups, p.dtype, p.cols, aligned);
}

std::string CheckEmbeddingLookups(const EmbeddingLookupsParams& p) {
  if (std::string e = CheckShape(p.rows, p.cols); !e.empty()) return e;
  if (p.index_bytes != 4 && p.index_bytes != 8) return "indices must be int32 or int64";
  if (p.rows > 0 && (p.per_feature <= 0 || p.per_feature > std::numeric_limits<int32_t>::max()))
    return "bad count of indices per feature " + std::to_string(p.per_feature);
  return "";
}

}  // namespace

std::string EmbeddingLookupsVariant(const EmbeddingLookupsParams& params) {
  if (std::string e = CheckEmbeddingLookups(params); !e.empty()) return "error: " + e;
  const KernelVariant* v = SelectEmbeddingLookups(params);
  return v ? v->key : std::string("error: no EmbeddingLookups kernel for dtype ") + DTypeName(params.dtype);
}

std::string LaunchEmbeddingLookups(const EmbeddingLookupsParams& p, void* stream) {
  if (std::string e = CheckEmbeddingLookups(p); !e.empty()) return kPrefix + e;
  if (p.table == nullptr || p.indices == nullptr || p.offsets == nullptr || p.sizes == nullptr || p.y == nullptr)
    return std::string(kPrefix) + "EmbeddingLookups needs Table, Indices, Offsets, Sizes and Y";
  if (p.rows == 0) return "";
  std::string error;
  const DriverApi* api = Driver(&error);
  if (api == nullptr) return kPrefix + error;
  const KernelVariant* v = SelectEmbeddingLookups(p);
  if (v == nullptr) return std::string(kPrefix) + "no EmbeddingLookups kernel for dtype " + DTypeName(p.dtype);

  const CUdeviceptr table = Ptr(p.table), ids = Ptr(p.indices), offsets = Ptr(p.offsets), sizes = Ptr(p.sizes);
  const CUdeviceptr y = Ptr(p.y);
  const int32_t rows = static_cast<int32_t>(p.rows), cols = static_cast<int32_t>(p.cols);
  const int64_t table_rows = p.table_rows;
  const int32_t per_feature = static_cast<int32_t>(p.per_feature), index_bytes = p.index_bytes;
  const int32_t wrap_negative = p.wrap_negative, trap = 0;
  Launch launch(*v);
  launch.Arg(table), launch.Arg(ids), launch.Arg(offsets), launch.Arg(sizes), launch.Arg(y), launch.Arg(rows);
  launch.Arg(cols), launch.Arg(table_rows), launch.Arg(per_feature), launch.Arg(index_bytes);
  launch.Arg(wrap_negative), launch.Arg(trap);
  return launch.Run(*api, static_cast<CUstream>(stream), p.rows);
}

}  // namespace graphopt::cuda
