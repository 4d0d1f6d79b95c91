// graphopt::AffineAct for ONNX Runtime's CPU provider: the kernel (rows of X converted to float,
// scaled, shifted, activated and rounded back, split into chunks for the thread pool) and the spec
// that reads a node's tensors into its parameters.
#include "affine_act/ort_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "cpu_kernels.h"
#include "cpu_rows.h"
#include "shape_inference.h"
#include "tensors.h"
#ifdef GRAPHOPT_WITH_CUDA
#include "cuda_launch.h"
#endif

namespace graphopt {

namespace {

// x * g(x) activations below this are -0 to float precision (|silu(-100)| < 4e-42); the shared row
// activations are accurate where a normalized value can fall, not here (their clamped exponential
// makes silu(-3e38) -1.8), and give 0 for -inf where torch and ONNX's ops give -inf * 0, NaN.
constexpr float kNegligibleBelow = -100.0f;

bool ScalesItsInput(Activation activation) {
  return activation == Activation::kSilu || activation == Activation::kGelu || activation == Activation::kGeluTanh;
}

void ActivateRow(Activation activation, float* v, int64_t n) {
  bool far_negative = false;
  if (ScalesItsInput(activation))
    for (int64_t i = 0; i < n; ++i) far_negative |= v[i] < kNegligibleBelow;
  if (!far_negative) {
    cpu::Activate(activation, v, n);
    return;
  }
  float* before = cpu::Scratch(1, static_cast<size_t>(n));
  std::copy(v, v + n, before);
  cpu::Activate(activation, v, n);
  for (int64_t i = 0; i < n; ++i) {
    if (before[i] < kNegligibleBelow)
      v[i] = std::isinf(before[i]) ? std::numeric_limits<float>::quiet_NaN() : -0.0f;
  }
}

}  // namespace

void AffineActCpu(const AffineActParams& p, const ParallelFor& parallel_for) {
  if (p.rows == 0 || p.cols == 0) return;
  const int64_t cols = p.cols;
  const cpu::FloatView scale_view(p.scale, p.dtype, p.channels), bias_view(p.bias, p.dtype, p.channels);
  const float* scale = scale_view.data();
  const float* bias = bias_view.data();
  cpu::ForEachChunk(p.rows, cpu::RowsPerChunk(cols * 2, p.rows), parallel_for, [&](int64_t begin, int64_t end) {
    float* v = cpu::Scratch(0, static_cast<size_t>(cols));
    for (int64_t r = begin; r < end; ++r) {
      const int64_t offset = r * cols;
      cpu::LoadRow(p.dtype, p.x, offset, v, cols);
      if (p.per_row) {
        const int64_t c = r % p.channels;
        const float s = scale != nullptr ? scale[c] : 1.0f;
        const float b = bias != nullptr ? bias[c] : 0.0f;
        for (int64_t i = 0; i < cols; ++i) v[i] = v[i] * s + b;
      } else {
        if (scale != nullptr)
          for (int64_t i = 0; i < cols; ++i) v[i] *= scale[i];
        if (bias != nullptr)
          for (int64_t i = 0; i < cols; ++i) v[i] += bias[i];
      }
      ActivateRow(p.activation, v, cols);
      cpu::StoreRow(p.dtype, v, p.y, offset, cols);
    }
  });
}

void AffineActSpec::Compute(const Ort::KernelContext& context, const Attributes& attributes, DType dtype, Ep ep,
                            const std::string& node) {
  const Ort::ConstValue x = context.GetInput(0);
  const Shape shape = ShapeOf(x);
  const auto rank = static_cast<int64_t>(shape.size());
  if (rank == 0) throw Error(node + ": input X must have rank >= 1, got a scalar");
  if (attributes.axis < -rank || attributes.axis >= rank)
    throw Error(node + ": attribute 'axis' is " + std::to_string(attributes.axis) + ", out of range for X of shape " +
                ShapeString(shape) + "; expected a value in [" + std::to_string(-rank) + ", " +
                std::to_string(rank - 1) + "]");
  const auto axis = static_cast<size_t>(attributes.axis < 0 ? attributes.axis + rank : attributes.axis);
  const Shape channel_shape = {shape[axis]};

  AffineActParams p;
  p.channels = shape[axis];
  p.per_row = axis + 1 < shape.size();
  p.cols = p.per_row ? Elements(shape, axis + 1, shape.size()) : p.channels;
  p.rows = p.cols == 0 ? 0 : Elements(shape, 0, shape.size()) / p.cols;
  p.activation = attributes.activation;
  p.dtype = dtype;
  p.x = x.GetTensorRawData();
  if (const Ort::ConstValue scale = OptionalInput(context, 1)) {
    CheckShape(node, "Scale ([X.shape[axis]])", scale, channel_shape);
    p.scale = scale.GetTensorRawData();
  }
  if (const Ort::ConstValue bias = OptionalInput(context, 2)) {
    CheckShape(node, "Bias ([X.shape[axis]])", bias, channel_shape);
    p.bias = bias.GetTensorRawData();
  }
  p.y = context.GetOutput(0, shape).GetTensorMutableRawData();
  if (p.rows == 0 || p.cols == 0) return;  // empty outputs: nothing to compute
  if (ep == Ep::kCpu) {
    AffineActCpu(p, OrtParallelFor(context));
    return;
  }
#ifdef GRAPHOPT_WITH_CUDA
  const std::string error = cuda::LaunchAffineAct(p, context.GetGPUComputeStream());
  if (!error.empty()) throw Error(node + ": " + error, ORT_RUNTIME_EXCEPTION);
#else
  throw Error(node + ": this graphopt_ort library was built without CUDA kernels", ORT_NOT_IMPLEMENTED);
#endif
}

void AffineActSpec::InferOutputShape(OrtShapeInferContext* context) {
  const TypeAndShape x = InputTypeAndShape(context, 0);  // Y has X's type and shape
  if (!x.dims.empty() && x.Expressible()) SetOutputTypeAndShape(context, 0, x);
}

}  // namespace graphopt
