// GroupNormAct on the CPU: each (sample, group) converted to float, normalized with shifted
// statistics, scaled and shifted per channel, activated, rounded back; the runs split into chunks
// for the thread pool.
#include "cpu_norm_linear.h"
#include "cpu_rows.h"
#include "group_norm_act/ort_kernel.h"

namespace graphopt {

void GroupNormActCpu(const GroupNormActParams& p, const ParallelFor& parallel_for) {
  const int64_t channels_per_group = p.channels / p.groups;
  const int64_t group_size = channels_per_group * p.spatial;
  const int64_t runs = p.batch * p.groups;
  if (runs == 0 || group_size == 0) return;
  const cpu::FloatView scale(p.scale, p.dtype, p.channels), bias(p.bias, p.dtype, p.channels);
  // Each run is a row of a layer norm without scale or activation, normalized by the row kernel
  // NormAct and NormActLinear share (cpu_norm_linear.h: the residual added, rounded and stored there
  // too); the per-channel affine part and the activation follow. (With the statistics in loops the
  // compiler vectorized, the kernel took 0.96-1.03x the time of ONNX Runtime's InstanceNormalization
  // spelling with SiLU; 0.75-0.85x now: bench/results/2026-11-28-cpu/group_norm_act_cpu.json.
  // Activating each channel right after its affine step, in the L1 cache, was no faster.)
  cpu::NormRows runs_as_rows{};
  runs_as_rows.dtype = p.dtype;
  runs_as_rows.x = p.x;
  runs_as_rows.residual = p.residual;
  runs_as_rows.residual_rows = RowBroadcast{1, 0};  // (groups 0: X's own rows)
  runs_as_rows.residual_sum = p.residual_sum;
  runs_as_rows.norm = Norm::kLayer;
  runs_as_rows.epsilon = p.epsilon;
  runs_as_rows.activation = Activation::kIdentity;
  runs_as_rows.cols = group_size;
  const int64_t chunk = cpu::RowsPerChunk(group_size * 8, runs);
  cpu::ForEachChunk(runs, chunk, parallel_for, [&](int64_t begin, int64_t end) {
    float* v = cpu::Scratch(0, static_cast<size_t>(group_size));
    for (int64_t run = begin; run < end; ++run) {
      cpu::NormalizeRows(runs_as_rows, run, 1, v, group_size);
      const int64_t first_channel = (run % p.groups) * channels_per_group;
      for (int64_t c = 0; c < channels_per_group; ++c) {
        const float s = scale.data() != nullptr ? scale.data()[first_channel + c] : 1.0f;
        const float b = bias.data() != nullptr ? bias.data()[first_channel + c] : 0.0f;
        float* w = v + c * p.spatial;
        for (int64_t i = 0; i < p.spatial; ++i) w[i] = w[i] * s + b;
      }
      if (p.activation != Activation::kIdentity) cpu::Activate(p.activation, v, group_size);
      cpu::StoreRow(p.dtype, v, p.y, run * group_size, group_size);
    }
  });
}

}  // namespace graphopt
