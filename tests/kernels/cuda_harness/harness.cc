// C entry points over graphopt::cuda for ctypes. Each returns "" on success, else the message.
#include <cstdint>
#include <string>

#include "group_norm_act/ort_kernel.h"
#include "norm_act/ort_kernel.h"
#include "norm_act_linear/ort_kernel.h"

namespace {

thread_local std::string result;

const void* P(uint64_t address) { return reinterpret_cast<const void*>(static_cast<uintptr_t>(address)); }
void* M(uint64_t address) { return reinterpret_cast<void*>(static_cast<uintptr_t>(address)); }

}  // namespace

extern "C" {

// mode 0 launches; mode 1 returns the variant the launch would use.
const char* harness_norm_act(uint64_t x, uint64_t residual, uint64_t scale, uint64_t bias, uint64_t y,
                             uint64_t residual_sum, int64_t rows, int64_t cols, float eps, int32_t norm,
                             int32_t activation, int32_t dtype, uint64_t stream, int32_t mode) {
  graphopt::NormActParams p;
  p.x = P(x), p.residual = P(residual), p.scale = P(scale), p.bias = P(bias);
  p.y = M(y), p.residual_sum = M(residual_sum);
  p.rows = rows, p.cols = cols, p.epsilon = eps;
  p.norm = static_cast<graphopt::Norm>(norm);
  p.activation = static_cast<graphopt::Activation>(activation);
  p.dtype = static_cast<graphopt::DType>(dtype);
  result = mode == 1 ? graphopt::cuda::NormActVariant(p) : graphopt::cuda::LaunchNormAct(p, M(stream));
  return result.c_str();
}

const char* harness_norm_act_linear(uint64_t x, uint64_t scale, uint64_t bias, uint64_t weight,
                                    uint64_t linear_bias, uint64_t y, int64_t rows, int64_t cols,
                                    int64_t out_features, float eps, int32_t norm, int32_t activation,
                                    int32_t out_activation, int32_t dtype, uint64_t stream, int32_t mode) {
  graphopt::NormActLinearParams p;
  p.x = P(x), p.scale = P(scale), p.bias = P(bias), p.weight = P(weight), p.linear_bias = P(linear_bias);
  p.y = M(y);
  p.rows = rows, p.cols = cols, p.out_features = out_features, p.epsilon = eps;
  p.norm = static_cast<graphopt::Norm>(norm);
  p.activation = static_cast<graphopt::Activation>(activation);
  p.out_activation = static_cast<graphopt::Activation>(out_activation);
  p.dtype = static_cast<graphopt::DType>(dtype);
  result = mode == 1 ? graphopt::cuda::NormActLinearVariant(p) : graphopt::cuda::LaunchNormActLinear(p, M(stream));
  return result.c_str();
}

// The same with a residual (and its sum) and operands read row by row: `broadcasts` holds (inner,
// groups) of scale, bias, weight, linear bias and residual, in that order.
const char* harness_norm_act_linear_rows(uint64_t x, uint64_t residual, uint64_t scale, uint64_t bias,
                                         uint64_t weight, uint64_t linear_bias, uint64_t y, uint64_t residual_sum,
                                         int64_t rows, int64_t cols, int64_t out_features, const int64_t* broadcasts,
                                         float eps, int32_t norm, int32_t activation, int32_t out_activation,
                                         int32_t dtype, uint64_t stream) {
  graphopt::NormActLinearParams p;
  p.x = P(x), p.residual = P(residual), p.scale = P(scale), p.bias = P(bias), p.weight = P(weight);
  p.linear_bias = P(linear_bias), p.y = M(y), p.residual_sum = M(residual_sum);
  p.rows = rows, p.cols = cols, p.out_features = out_features, p.epsilon = eps;
  graphopt::RowBroadcast* targets[] = {&p.scale_rows, &p.bias_rows, &p.weight_rows, &p.linear_bias_rows,
                                       &p.residual_rows};
  for (int i = 0; i < 5; ++i) *targets[i] = graphopt::RowBroadcast{broadcasts[2 * i], broadcasts[2 * i + 1]};
  p.norm = static_cast<graphopt::Norm>(norm);
  p.activation = static_cast<graphopt::Activation>(activation);
  p.out_activation = static_cast<graphopt::Activation>(out_activation);
  p.dtype = static_cast<graphopt::DType>(dtype);
  result = graphopt::cuda::LaunchNormActLinear(p, M(stream));
  return result.c_str();
}

// mode 0 launches; mode 1 returns the variants the launch would use; mode 2 the scratch bytes it needs.
const char* harness_group_norm_act(uint64_t x, uint64_t residual, uint64_t scale, uint64_t bias, uint64_t y,
                                   uint64_t residual_sum, uint64_t partials, int64_t batch, int64_t channels,
                                   int64_t spatial, int64_t groups, float eps, int32_t activation, int32_t dtype,
                                   uint64_t stream, int32_t mode) {
  graphopt::GroupNormActParams p;
  p.x = P(x), p.residual = P(residual), p.scale = P(scale), p.bias = P(bias);
  p.y = M(y), p.residual_sum = M(residual_sum), p.partials = M(partials);
  p.batch = batch, p.channels = channels, p.spatial = spatial, p.groups = groups, p.epsilon = eps;
  p.activation = static_cast<graphopt::Activation>(activation);
  p.dtype = static_cast<graphopt::DType>(dtype);
  if (mode == 1) {
    result = graphopt::cuda::GroupNormActVariant(p);
  } else if (mode == 2) {
    result = std::to_string(graphopt::cuda::GroupNormActScratchBytes(p));
  } else {
    result = graphopt::cuda::LaunchGroupNormAct(p, M(stream));
  }
  return result.c_str();
}

}  // extern "C"
