// NormAct's launch of its ahead-of-time Triton kernel on ONNX Runtime's stream. Argument order: the
// kernel's AOT_KERNEL (triton_kernel.py).
#include <limits>

#include "launch.h"
#include "norm_act/ort_kernel.h"

namespace graphopt::cuda {
namespace {

const KernelVariant* SelectNormAct(const NormActParams& p) {
  const KernelTable& table = GeneratedKernelTable();
  const bool aligned = IsAligned(table, p.cols, {p.x, p.residual, p.scale, p.bias, p.y, p.residual_sum});
  // Scale and bias that every row shares (the usual case) take the variants compiled for that.
  return Select(table, KernelOp::kNormAct, p.dtype, p.cols, aligned, UniformRows({p.scale_rows, p.bias_rows}));
}

}  // namespace

std::string NormActVariant(const NormActParams& params) {
  if (std::string e = CheckShape(params.rows, params.cols); !e.empty()) return "error: " + e;
  const KernelVariant* v = SelectNormAct(params);
  return v ? v->key : std::string("error: no NormAct kernel for dtype ") + DTypeName(params.dtype);
}

std::string LaunchNormAct(const NormActParams& p, void* stream) {
  if (std::string e = CheckShape(p.rows, p.cols); !e.empty()) return kPrefix + e;
  if (p.x == nullptr || p.y == nullptr) return std::string(kPrefix) + "NormAct needs X and Y";
  if (!ValidNorm(p.norm) || !ValidActivation(p.activation)) return std::string(kPrefix) + "unknown norm or activation";
  if (p.rows == 0) return "";
  std::string error;
  const DriverApi* api = Driver(&error);
  if (api == nullptr) return kPrefix + error;
  const KernelVariant* v = SelectNormAct(p);
  if (v == nullptr) return std::string(kPrefix) + "no NormAct kernel for dtype " + DTypeName(p.dtype);

  // Absent inputs get a harmless stand-in: the kernel never reads them.
  const CUdeviceptr x = Ptr(p.x), y = Ptr(p.y);
  const CUdeviceptr r = p.residual ? Ptr(p.residual) : x, w = p.scale ? Ptr(p.scale) : x;
  // A residual sum nobody reads is written over Y: for every element the kernel stores the sum
  // before Y (the same thread, in program order, or in an earlier pass over the row that the second
  // pass does not read back), so Y's values land last. No scratch allocation per call.
  const CUdeviceptr b = p.bias ? Ptr(p.bias) : x, s = p.residual_sum ? Ptr(p.residual_sum) : y;
  const int32_t rows = static_cast<int32_t>(p.rows), cols = static_cast<int32_t>(p.cols);
  const int64_t stride = p.cols;  // ONNX Runtime tensors are contiguous
  const float eps = p.epsilon;
  const int32_t norm = static_cast<int32_t>(p.norm), act = static_cast<int32_t>(p.activation);
  const int32_t has_scale = p.scale != nullptr, has_bias = p.bias != nullptr, has_res = p.residual != nullptr;
  const int32_t residual_groups = static_cast<int32_t>(p.residual_rows.groups == 0 ? p.rows : p.residual_rows.groups);
  const int32_t w_inner = static_cast<int32_t>(p.scale_rows.inner), w_groups = static_cast<int32_t>(p.scale_rows.groups);
  const int32_t b_inner = static_cast<int32_t>(p.bias_rows.inner), b_groups = static_cast<int32_t>(p.bias_rows.groups);
  const int32_t r_inner = static_cast<int32_t>(p.residual_rows.inner);
  Launch launch(*v);
  launch.Arg(x), launch.Arg(r), launch.Arg(w), launch.Arg(b), launch.Arg(y), launch.Arg(s);
  launch.Arg(rows), launch.Arg(cols), launch.Arg(stride), launch.Arg(stride);
  launch.Arg(eps), launch.Arg(norm), launch.Arg(act), launch.Arg(has_scale), launch.Arg(has_bias), launch.Arg(has_res);
  launch.Arg(w_inner), launch.Arg(w_groups), launch.Arg(b_inner), launch.Arg(b_groups);
  launch.Arg(r_inner), launch.Arg(residual_groups);
  return launch.Run(*api, static_cast<CUstream>(stream), p.rows);
}

}  // namespace graphopt::cuda

// The same launch for PyTorch's eager calls (graphopt/fused/torch_native: its C++ kernel holds no
// ONNX Runtime type, so the entry is plain C). Contiguous tensors of one dtype (the DType code): X
// [rows, cols]; scale, bias and residual stored [groups, cols] and read by X's row r at row
// (r / inner) % groups, their (inner, groups) in `operand_rows` in that order (six values:
// broadcast_rows.h; a norm's scale is (1, 1), a residual of X's shape (1, rows)). Returns kLaunched
// after launching on `stream`; kDeclined for arguments it does not take (an unknown norm, activation
// or dtype: the caller's own path then raises the error); kFailed with what failed in `error`. Nothing
// is launched unless it returns kLaunched.
extern "C" __attribute__((visibility("default"))) int GraphoptEagerNormActRows(
    const void* x, const void* residual, const void* scale, const void* bias, void* y, void* residual_sum,
    int64_t rows, int64_t cols, const int64_t* operand_rows, float epsilon, const char* norm,
    const char* activation, int32_t dtype, void* stream, char* error, size_t error_size) {
  using namespace graphopt;
  NormActParams p;
  p.x = x, p.residual = residual, p.scale = scale, p.bias = bias, p.y = y, p.residual_sum = residual_sum;
  p.rows = rows, p.cols = cols, p.epsilon = epsilon, p.dtype = static_cast<DType>(dtype);
  p.scale_rows = {operand_rows[0], operand_rows[1]};
  p.bias_rows = {operand_rows[2], operand_rows[3]};
  p.residual_rows = {operand_rows[4], operand_rows[5]};
  if (!cuda::ParseSpelling(kNormSpellings, norm, &p.norm) ||
      !cuda::ParseSpelling(kActivationSpellings, activation, &p.activation) || !cuda::KnownDType(dtype)) {
    return cuda::kDeclined;
  }
  return cuda::ReportFailure(cuda::LaunchNormAct(p, stream), error, error_size);
}
