// AffineAct's launch of its ahead-of-time Triton kernel on ONNX Runtime's stream. Argument order: the
// kernel's AOT_KERNEL (triton_kernel.py).
#include <limits>

#include "affine_act/ort_kernel.h"
#include "launch.h"

namespace graphopt::cuda {
namespace {

const KernelVariant* SelectAffineAct(const AffineActParams& p) {
  const KernelTable& table = GeneratedKernelTable();
  const bool aligned = IsAligned(table, p.cols, {p.x, p.scale, p.bias, p.y});
  return Select(table, KernelOp::kAffineAct, p.dtype, p.cols, aligned);
}

std::string CheckAffineAct(const AffineActParams& p) {
  if (std::string e = CheckShape(p.rows, p.cols); !e.empty()) return e;
  if (p.channels <= 0 || p.channels > std::numeric_limits<int32_t>::max())
    return "bad channel count " + std::to_string(p.channels);
  if (!p.per_row && p.channels != p.cols) return "the channel count must be the row length when not per row";
  return "";
}

}  // namespace

std::string AffineActVariant(const AffineActParams& params) {
  if (std::string e = CheckAffineAct(params); !e.empty()) return "error: " + e;
  const KernelVariant* v = SelectAffineAct(params);
  return v ? v->key : std::string("error: no AffineAct kernel for dtype ") + DTypeName(params.dtype);
}

std::string LaunchAffineAct(const AffineActParams& p, void* stream) {
  if (std::string e = CheckAffineAct(p); !e.empty()) return kPrefix + e;
  if (p.x == nullptr || p.y == nullptr) return std::string(kPrefix) + "AffineAct needs X and Y";
  if (!ValidActivation(p.activation)) return std::string(kPrefix) + "unknown activation";
  if (p.rows == 0) return "";
  std::string error;
  const DriverApi* api = Driver(&error);
  if (api == nullptr) return kPrefix + error;
  const KernelVariant* v = SelectAffineAct(p);
  if (v == nullptr) return std::string(kPrefix) + "no AffineAct kernel for dtype " + DTypeName(p.dtype);

  // Absent inputs get a harmless stand-in: the kernel never reads them.
  const CUdeviceptr x = Ptr(p.x), y = Ptr(p.y);
  const CUdeviceptr s = p.scale ? Ptr(p.scale) : x, b = p.bias ? Ptr(p.bias) : x;
  const int32_t rows = static_cast<int32_t>(p.rows), cols = static_cast<int32_t>(p.cols);
  const int32_t channels = static_cast<int32_t>(p.channels), act = static_cast<int32_t>(p.activation);
  const int32_t has_scale = p.scale != nullptr, has_bias = p.bias != nullptr, per_row = p.per_row;
  Launch launch(*v);
  launch.Arg(x), launch.Arg(s), launch.Arg(b), launch.Arg(y), launch.Arg(rows), launch.Arg(cols);
  launch.Arg(channels), launch.Arg(act), launch.Arg(has_scale), launch.Arg(has_bias), launch.Arg(per_row);
  return launch.Run(*api, static_cast<CUstream>(stream), p.rows);
}

}  // namespace graphopt::cuda

// The same launch for PyTorch's eager calls (graphopt/fused/torch_native): contiguous tensors of one
// dtype (the DType code), X as [rows, cols], Scale and Bias [channels]. Returns as
// GraphoptEagerNormActRows does (cuda_launch.cc of norm_act).
extern "C" __attribute__((visibility("default"))) int GraphoptEagerAffineAct(
    const void* x, const void* scale, const void* bias, void* y, int64_t rows, int64_t cols, int64_t channels,
    int32_t per_row, const char* activation, int32_t dtype, void* stream, char* error, size_t error_size) {
  using namespace graphopt;
  AffineActParams p;
  p.x = x, p.scale = scale, p.bias = bias, p.y = y, p.rows = rows, p.cols = cols, p.channels = channels;
  p.per_row = per_row != 0, p.dtype = static_cast<DType>(dtype);
  if (!cuda::ParseSpelling(kActivationSpellings, activation, &p.activation) || !cuda::KnownDType(dtype)) {
    return cuda::kDeclined;
  }
  return cuda::ReportFailure(cuda::LaunchAffineAct(p, stream), error, error_size);
}
