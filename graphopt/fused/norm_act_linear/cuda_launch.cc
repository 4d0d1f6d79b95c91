// NormActLinear's launch of its ahead-of-time Triton kernel on ONNX Runtime's stream. Argument order: the
// kernel's AOT_KERNEL (triton_kernel.py).
#include <limits>

#include "launch.h"
#include "norm_act_linear/ort_kernel.h"

namespace graphopt::cuda {
namespace {

const KernelVariant* SelectNormActLinear(const NormActLinearParams& p) {
  const KernelTable& table = GeneratedKernelTable();
  const bool aligned = IsAligned(table, p.cols, {p.x, p.scale, p.bias, p.weight, p.linear_bias, p.y});
  return Select(table, KernelOp::kNormActLinear, p.dtype, p.cols, aligned);
}

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
  if (p.rows == 0 || p.out_features == 0) return "";
  std::string error;
  const DriverApi* api = Driver(&error);
  if (api == nullptr) return kPrefix + error;
  const KernelVariant* v = SelectNormActLinear(p);
  if (v == nullptr) return std::string(kPrefix) + "no NormActLinear kernel for dtype " + DTypeName(p.dtype);

  const CUdeviceptr x = Ptr(p.x), wl = Ptr(p.weight), y = Ptr(p.y);
  const CUdeviceptr w = p.scale ? Ptr(p.scale) : x, b = p.bias ? Ptr(p.bias) : x;
  const CUdeviceptr lb = p.linear_bias ? Ptr(p.linear_bias) : wl;
  const int32_t rows = static_cast<int32_t>(p.rows), cols = static_cast<int32_t>(p.cols);
  const int32_t k = static_cast<int32_t>(p.out_features);
  const int64_t stride = p.cols;
  const float eps = p.epsilon;
  const int32_t norm = static_cast<int32_t>(p.norm), act = static_cast<int32_t>(p.activation);
  const int32_t out_act = static_cast<int32_t>(p.out_activation);
  const int32_t has_scale = p.scale != nullptr, has_bias = p.bias != nullptr, has_lb = p.linear_bias != nullptr;
  Launch launch(*v);
  launch.Arg(x), launch.Arg(w), launch.Arg(b), launch.Arg(wl), launch.Arg(lb), launch.Arg(y);
  launch.Arg(rows), launch.Arg(cols), launch.Arg(k), launch.Arg(stride);
  launch.Arg(eps), launch.Arg(norm), launch.Arg(act), launch.Arg(out_act);
  launch.Arg(has_scale), launch.Arg(has_bias), launch.Arg(has_lb);
  return launch.Run(*api, static_cast<CUstream>(stream), p.rows);
}

}  // namespace graphopt::cuda
