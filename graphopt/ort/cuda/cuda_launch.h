// Launching the ahead-of-time compiled Triton kernels through the CUDA driver API.
// libcuda is opened lazily on the first launch, so the library loads on machines without a GPU.
#pragma once

#include <string>

#include "../../fused/group_norm_act/params.h"
#include "../src/fused_params.h"

namespace graphopt::cuda {

// Each returns an empty string on success, otherwise a message naming what failed.
// `stream` is the CUstream (== cudaStream_t) ONNX Runtime gives the kernel.
std::string LaunchNormAct(const NormActParams& params, void* stream);
std::string LaunchNormActLinear(const NormActLinearParams& params, void* stream);
std::string LaunchGroupNormAct(const GroupNormActParams& params, void* stream);

// The compiled variant a launch with these parameters would run ("op/dtype/tier", the names of
// graphopt/kernels/launch_rules.py), or "error: ..." when none applies. Needs no GPU: for tests
// that check C++ and Python pick the same variant, and for diagnostics.
std::string NormActVariant(const NormActParams& params);
std::string NormActLinearVariant(const NormActLinearParams& params);
std::string GroupNormActVariant(const GroupNormActParams& params);

}  // namespace graphopt::cuda
