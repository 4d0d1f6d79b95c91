// The CUDA driver API entry points the launcher uses, resolved from libcuda.so.1 at first use.
// Nothing links against libcuda, so the library loads (and its CPU kernels run) without a driver.
// Types and signatures come from the toolkit's cuda.h; only the symbols are looked up at run time.
#pragma once

#include <cuda.h>

#include <string>

namespace graphopt::cuda {

struct DriverApi {
  decltype(&::cuInit) Init;
  decltype(&::cuDriverGetVersion) DriverGetVersion;
  decltype(&::cuGetErrorString) GetErrorString;
  decltype(&::cuGetErrorName) GetErrorName;
  decltype(&::cuDeviceGet) DeviceGet;
  decltype(&::cuDeviceGetCount) DeviceGetCount;
  decltype(&::cuDeviceGetAttribute) DeviceGetAttribute;
  decltype(&::cuDevicePrimaryCtxRetain) DevicePrimaryCtxRetain;
  decltype(&::cuCtxGetCurrent) CtxGetCurrent;
  decltype(&::cuCtxSetCurrent) CtxSetCurrent;
  decltype(&::cuCtxPushCurrent) CtxPushCurrent;
  decltype(&::cuCtxPopCurrent) CtxPopCurrent;
  decltype(&::cuCtxGetDevice) CtxGetDevice;
  decltype(&::cuStreamGetCtx) StreamGetCtx;
  decltype(&::cuModuleLoadData) ModuleLoadData;
  decltype(&::cuModuleGetFunction) ModuleGetFunction;
  decltype(&::cuFuncSetAttribute) FuncSetAttribute;
  decltype(&::cuLaunchKernel) LaunchKernel;
  decltype(&::cuMemAllocAsync) MemAllocAsync;  // only for kernels that need scratch memory
  decltype(&::cuMemFreeAsync) MemFreeAsync;

  // "cuFoo failed: CUDA_ERROR_NAME (description)"
  std::string Describe(const char* call, CUresult result) const;
};

// The driver, opened and initialized once (thread-safe). On failure returns null and sets *error
// to a message such as "libcuda.so.1 not found: no NVIDIA driver on this machine".
const DriverApi* Driver(std::string* error);

}  // namespace graphopt::cuda
