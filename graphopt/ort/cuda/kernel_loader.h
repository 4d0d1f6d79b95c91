// Contexts and modules for the ahead-of-time kernels: which context a launch runs in, which image
// suits the device, and one loaded module per (context, variant), cached for the process.
#pragma once

#include <string>

#include "driver_api.h"
#include "kernel_table.h"

namespace graphopt::cuda {

// Makes the context a launch on `stream` must use current for this scope: the stream's own
// context when the stream has one, else the thread's current context, else (no context at all)
// the primary context of device 0, retained once and set current, as the CUDA runtime would.
class ContextScope {
 public:
  ContextScope(const DriverApi& api, CUstream stream);
  ~ContextScope();
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

  const std::string& error() const { return error_; }
  CUcontext context() const { return context_; }

 private:
  const DriverApi& api_;
  CUcontext context_ = nullptr;
  bool pushed_ = false;
  std::string error_;
};

struct LoadedKernel {
  CUfunction function = nullptr;
  int32_t shared_bytes = 0;
};

// The variant's function in `context` (which must be current), loading its module on first use:
// the cubin for the device's exact architecture, else a binary-compatible sm_8x cubin, else PTX.
// Thread-safe. Returns an empty string on success.
std::string GetKernel(const DriverApi& api, CUcontext context, const KernelVariant& variant, LoadedKernel* out);

}  // namespace graphopt::cuda
