// GroupNormAct's launch of its ahead-of-time Triton kernel on ONNX Runtime's stream: one "row" per
// (sample, group), its run of channels / groups * spatial elements. Argument order: the kernel's
// AOT_KERNEL (triton_kernel.py).
#include <limits>

#include "group_norm_act/ort_kernel.h"
#include "launch.h"

namespace graphopt::cuda {
namespace {

const KernelVariant* SelectGroupNormAct(const GroupNormActParams& p, int64_t group_size) {
  return Select(GeneratedKernelTable(), KernelOp::kGroupNormAct, p.dtype, group_size, false);
}

// (rows, cols) of the launch: one row per (sample, group).
std::string Shape(const GroupNormActParams& p, int64_t* rows, int64_t* cols) {
  if (p.groups <= 0 || p.channels % p.groups != 0) return "bad groups " + std::to_string(p.groups);
  if (p.spatial > std::numeric_limits<int32_t>::max()) return "too many spatial positions";
  *rows = p.batch * p.groups;
  *cols = p.channels / p.groups * p.spatial;
  return CheckShape(*rows, *cols);
}

}  // namespace

std::string GroupNormActVariant(const GroupNormActParams& params) {
  int64_t rows = 0, cols = 0;
  if (std::string e = Shape(params, &rows, &cols); !e.empty()) return "error: " + e;
  const KernelVariant* v = SelectGroupNormAct(params, cols);
  return v ? v->key : std::string("error: no GroupNormAct kernel for dtype ") + DTypeName(params.dtype);
}

std::string LaunchGroupNormAct(const GroupNormActParams& p, void* stream) {
  int64_t rows = 0, cols = 0;
  if (std::string e = Shape(p, &rows, &cols); !e.empty()) return kPrefix + e;
  if (p.x == nullptr || p.y == nullptr) return std::string(kPrefix) + "GroupNormAct needs X and Y";
  if (!ValidActivation(p.activation)) return std::string(kPrefix) + "unknown activation";
  if (rows == 0) return "";
  std::string error;
  const DriverApi* api = Driver(&error);
  if (api == nullptr) return kPrefix + error;
  const KernelVariant* v = SelectGroupNormAct(p, cols);
  if (v == nullptr) return std::string(kPrefix) + "no GroupNormAct kernel for dtype " + DTypeName(p.dtype);

  // Absent inputs get a harmless stand-in the kernel never reads; without a ResidualSum output the
  // kernel stores no sum (write_sum 0).
  const CUdeviceptr x = Ptr(p.x), y = Ptr(p.y);
  const CUdeviceptr r = p.residual ? Ptr(p.residual) : x, w = p.scale ? Ptr(p.scale) : x;
  const CUdeviceptr b = p.bias ? Ptr(p.bias) : x, s = p.residual_sum ? Ptr(p.residual_sum) : y;
  const int32_t groups = static_cast<int32_t>(p.groups), group_size = static_cast<int32_t>(cols);
  const int32_t spatial = static_cast<int32_t>(p.spatial);
  const float eps = p.epsilon;
  const int32_t act = static_cast<int32_t>(p.activation);
  const int32_t has_scale = p.scale != nullptr, has_bias = p.bias != nullptr, has_res = p.residual != nullptr;
  const int32_t write_sum = p.residual != nullptr && p.residual_sum != nullptr;
  Launch launch(*v);
  launch.Arg(x), launch.Arg(r), launch.Arg(w), launch.Arg(b), launch.Arg(y), launch.Arg(s);
  launch.Arg(groups), launch.Arg(group_size), launch.Arg(spatial);
  launch.Arg(eps), launch.Arg(act), launch.Arg(has_scale), launch.Arg(has_bias), launch.Arg(has_res);
  launch.Arg(write_sum);
  return launch.Run(*api, static_cast<CUstream>(stream), rows);
}

}  // namespace graphopt::cuda
