// NormActLinear's launch of its ahead-of-time Triton kernel on ONNX Runtime's stream. Argument order: the
// kernel's AOT_KERNEL (triton_kernel.py).
#include <limits>

#include "launch.h"
#include "norm_act_linear/ort_kernel.h"

namespace graphopt::cuda {
namespace {

const KernelVariant* SelectNormActLinear(const NormActLinearParams& p) {
  const KernelTable& table = GeneratedKernelTable();
  const bool aligned = IsAligned(table, p.cols, {p.x, p.residual, p.scale, p.bias, p.weight, p.residual_sum});
  const int64_t uniform = UniformRows({p.scale_rows, p.bias_rows, p.weight_rows, p.linear_bias_rows});
  return Select(table, KernelOp::kNormActLinear, p.dtype, p.cols, aligned, uniform, p.out_features);
}

int32_t I32(int64_t v) { return static_cast<int32_t>(v); }

}  // namespace

std::string NormActLinearVariant(const NormActLinearParams& params) {
  if (std::string e = CheckShape(params.rows, params.cols); !e.empty()) return "error: " + e;
  const KernelVariant* v = SelectNormActLinear(params);
  return v ? v->key : std::string("error: no NormActLinear kernel for dtype ") + DTypeName(params.dtype);
}

std::string LaunchNormActLinear(const NormActLinearParams& p, void* stream) {
  if (std::string e = CheckShape(p.rows, p.cols); !e.empty()) return kPrefix + e;
  if (p.x == nullptr || p.weight == nullptr || p.y == nullptr) {
    return std::string(kPrefix) + "NormActLinear needs X, Weight and Y";
  }
  if (p.out_features < 0 || p.out_features > std::numeric_limits<int32_t>::max()) {
    return std::string(kPrefix) + "bad out_features " + std::to_string(p.out_features);
  }
  if (!ValidNorm(p.norm) || !ValidActivation(p.activation) || !ValidActivation(p.out_activation)) {
    return std::string(kPrefix) + "unknown norm or activation";
  }
  const bool write_sum = p.residual != nullptr && p.residual_sum != nullptr;
  if (p.rows == 0 || (p.out_features == 0 && !write_sum)) return "";
  std::string error;
  const DriverApi* api = Driver(&error);
  if (api == nullptr) return kPrefix + error;
  const KernelVariant* v = SelectNormActLinear(p);
  if (v == nullptr) return std::string(kPrefix) + "no NormActLinear kernel for dtype " + DTypeName(p.dtype);

  // Absent inputs get a harmless stand-in: the kernel never reads them (nor writes an unread sum).
  const CUdeviceptr x = Ptr(p.x), wl = Ptr(p.weight), y = Ptr(p.y);
  const CUdeviceptr r = p.residual ? Ptr(p.residual) : x, w = p.scale ? Ptr(p.scale) : x;
  const CUdeviceptr b = p.bias ? Ptr(p.bias) : x, lb = p.linear_bias ? Ptr(p.linear_bias) : wl;
  const CUdeviceptr s = write_sum ? Ptr(p.residual_sum) : x;
  const int32_t rows = I32(p.rows), cols = I32(p.cols), k = I32(p.out_features);
  const int64_t stride = p.cols;  // ONNX Runtime tensors are contiguous
  const float eps = p.epsilon;
  const int32_t norm = static_cast<int32_t>(p.norm), act = static_cast<int32_t>(p.activation);
  const int32_t out_act = static_cast<int32_t>(p.out_activation);
  const int32_t has_scale = p.scale != nullptr, has_bias = p.bias != nullptr, has_lb = p.linear_bias != nullptr;
  const int32_t has_res = p.residual != nullptr, write = write_sum;
  const int32_t r_groups = I32(p.residual_rows.groups == 0 ? p.rows : p.residual_rows.groups);
  const int32_t row_args[] = {
      I32(p.scale_rows.inner),  I32(p.scale_rows.groups),       I32(p.bias_rows.inner),
      I32(p.bias_rows.groups),  I32(p.residual_rows.inner),     r_groups,
      I32(p.weight_rows.inner), I32(p.weight_rows.groups),      I32(p.linear_bias_rows.inner),
      I32(p.linear_bias_rows.groups)};
  Launch launch(*v);
  launch.Arg(x), launch.Arg(r), launch.Arg(w), launch.Arg(b), launch.Arg(wl), launch.Arg(lb), launch.Arg(y);
  launch.Arg(s);
  launch.Arg(rows), launch.Arg(cols), launch.Arg(k), launch.Arg(stride), launch.Arg(stride);
  launch.Arg(eps), launch.Arg(norm), launch.Arg(act), launch.Arg(out_act);
  launch.Arg(has_scale), launch.Arg(has_bias), launch.Arg(has_lb), launch.Arg(has_res), launch.Arg(write);
  for (const int32_t& value : row_args) launch.Arg(value);
  return launch.Run(*api, static_cast<CUstream>(stream), p.rows);
}

}  // namespace graphopt::cuda

// The same launch for PyTorch's eager calls (graphopt/fused/torch_native): contiguous tensors of one
// dtype (the DType code), X and Residual [rows, cols], Scale and Bias [cols], Weight [out_features,
// cols], LinearBias [out_features]. Returns as GraphoptEagerNormActRows does (cuda_launch.cc of norm_act).
extern "C" __attribute__((visibility("default"))) int GraphoptEagerNormActLinear(
    const void* x, const void* residual, const void* scale, const void* bias, const void* weight,
    const void* linear_bias, void* y, void* residual_sum, int64_t rows, int64_t cols, int64_t out_features,
    float epsilon, const char* norm, const char* activation, const char* out_activation, int32_t dtype, void* stream,
    char* error, size_t error_size) {
  using namespace graphopt;
  NormActLinearParams p;
  p.x = x, p.residual = residual, p.scale = scale, p.bias = bias, p.weight = weight, p.linear_bias = linear_bias;
  p.y = y, p.residual_sum = residual_sum, p.rows = rows, p.cols = cols, p.out_features = out_features;
  p.epsilon = epsilon, p.dtype = static_cast<DType>(dtype);
  if (!cuda::ParseSpelling(kNormSpellings, norm, &p.norm) ||
      !cuda::ParseSpelling(kActivationSpellings, activation, &p.activation) ||
      !cuda::ParseSpelling(kActivationSpellings, out_activation, &p.out_activation) || !cuda::KnownDType(dtype)) {
    return cuda::kDeclined;
  }
  return cuda::ReportFailure(cuda::LaunchNormActLinear(p, stream), error, error_size);
}
