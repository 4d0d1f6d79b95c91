// GroupNormAct on the CPU: each (sample, group) converted to float, normalized with shifted
// statistics, scaled and shifted per channel, activated, rounded back; the runs split into chunks
// for the thread pool.
#include "cpu_rows.h"
#include "group_norm_act/ort_kernel.h"

namespace graphopt {

void GroupNormActCpu(const GroupNormActParams& p, const ParallelFor& parallel_for) {
  const int64_t channels_per_group = p.channels / p.groups;
  const int64_t group_size = channels_per_group * p.spatial;
  const int64_t runs = p.batch * p.groups;
  if (runs == 0 || group_size == 0) return;
  const cpu::FloatView scale(p.scale, p.dtype, p.channels), bias(p.bias, p.dtype, p.channels);
  // The statistics and the normalization of a layer norm over the whole run (shifted by its first
  // element, see cpu_rows.cc); the per-channel affine part and the activation follow.
  const cpu::RowNorm statistics{Norm::kLayer, p.epsilon, nullptr, nullptr, Activation::kIdentity};
  const int64_t chunk = cpu::RowsPerChunk(group_size * 8, runs);
  cpu::ForEachChunk(runs, chunk, parallel_for, [&](int64_t begin, int64_t end) {
    float* v = cpu::Scratch(0, static_cast<size_t>(group_size));
    for (int64_t run = begin; run < end; ++run) {
      const int64_t offset = run * group_size;
      cpu::LoadRow(p.dtype, p.x, offset, v, group_size);
      if (p.residual != nullptr) {
        // Rounded to the storage type before the norm sees it, as the unfused graph stores it.
        cpu::AddRow(p.dtype, p.residual, offset, v, group_size);
        cpu::RoundRow(p.dtype, v, group_size);
        if (p.residual_sum != nullptr) cpu::StoreRow(p.dtype, v, p.residual_sum, offset, group_size);
      }
      cpu::NormalizeRow(statistics, v, group_size);
      const int64_t first_channel = (run % p.groups) * channels_per_group;
      for (int64_t c = 0; c < channels_per_group; ++c) {
        const float s = scale.data() != nullptr ? scale.data()[first_channel + c] : 1.0f;
        const float b = bias.data() != nullptr ? bias.data()[first_channel + c] : 0.0f;
        float* w = v + c * p.spatial;
        for (int64_t i = 0; i < p.spatial; ++i) w[i] = w[i] * s + b;
      }
      if (p.activation != Activation::kIdentity) cpu::Activate(p.activation, v, group_size);
      cpu::StoreRow(p.dtype, v, p.y, offset, group_size);
    }
  });
}

}  // namespace graphopt
