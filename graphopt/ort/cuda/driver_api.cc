#include "driver_api.h"

#include <dlfcn.h>

#include <mutex>

namespace graphopt::cuda {
namespace {

// cuda.h maps some names to versioned symbols (cuCtxPushCurrent -> cuCtxPushCurrent_v2):
// stringizing after expansion looks up the symbol that matches the declaration we call through.
#define GRAPHOPT_CU_STR2(x) #x
#define GRAPHOPT_CU_STR(x) GRAPHOPT_CU_STR2(x)

struct Loaded {
  DriverApi api{};
  std::string error;  // empty when api is usable
};

template <typename Fn>
bool Resolve(void* lib, const char* symbol, Fn* out, std::string* error) {
  *out = reinterpret_cast<Fn>(dlsym(lib, symbol));
  if (*out == nullptr && error->empty()) error->assign(std::string("libcuda.so.1 lacks ") + symbol);
  return *out != nullptr;
}

Loaded Load() {
  Loaded loaded;
  std::string& error = loaded.error;
  // RTLD_LOCAL keeps libcuda's symbols out of the global namespace; a libcuda the process already
  // loaded (ONNX Runtime's, torch's) is the same library, so contexts and streams are shared.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    error = std::string("libcuda.so.1 not found (no NVIDIA driver on this machine): ") + (why ? why : "");
    return loaded;
  }
  DriverApi& api = loaded.api;
#define GRAPHOPT_CU_RESOLVE(field, name) Resolve(lib, GRAPHOPT_CU_STR(name), &api.field, &error)
  GRAPHOPT_CU_RESOLVE(Init, cuInit);
  GRAPHOPT_CU_RESOLVE(DriverGetVersion, cuDriverGetVersion);
  GRAPHOPT_CU_RESOLVE(GetErrorString, cuGetErrorString);
  GRAPHOPT_CU_RESOLVE(GetErrorName, cuGetErrorName);
  GRAPHOPT_CU_RESOLVE(DeviceGet, cuDeviceGet);
  GRAPHOPT_CU_RESOLVE(DeviceGetCount, cuDeviceGetCount);
  GRAPHOPT_CU_RESOLVE(DeviceGetAttribute, cuDeviceGetAttribute);
  GRAPHOPT_CU_RESOLVE(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain);
  GRAPHOPT_CU_RESOLVE(CtxGetCurrent, cuCtxGetCurrent);
  GRAPHOPT_CU_RESOLVE(CtxSetCurrent, cuCtxSetCurrent);
  GRAPHOPT_CU_RESOLVE(CtxPushCurrent, cuCtxPushCurrent);
  GRAPHOPT_CU_RESOLVE(CtxPopCurrent, cuCtxPopCurrent);
  GRAPHOPT_CU_RESOLVE(CtxGetDevice, cuCtxGetDevice);
  GRAPHOPT_CU_RESOLVE(StreamGetCtx, cuStreamGetCtx);
  GRAPHOPT_CU_RESOLVE(ModuleLoadData, cuModuleLoadData);
  GRAPHOPT_CU_RESOLVE(ModuleGetFunction, cuModuleGetFunction);
  GRAPHOPT_CU_RESOLVE(FuncSetAttribute, cuFuncSetAttribute);
  GRAPHOPT_CU_RESOLVE(LaunchKernel, cuLaunchKernel);
#undef GRAPHOPT_CU_RESOLVE
  // Stream-ordered allocation needs CUDA 11.2; only kernels with scratch memory use it.
  api.MemAllocAsync = reinterpret_cast<decltype(api.MemAllocAsync)>(dlsym(lib, GRAPHOPT_CU_STR(cuMemAllocAsync)));
  api.MemFreeAsync = reinterpret_cast<decltype(api.MemFreeAsync)>(dlsym(lib, GRAPHOPT_CU_STR(cuMemFreeAsync)));
  if (!error.empty()) return loaded;
  // The library stays loaded for the life of the process: modules and functions point into it.
  if (CUresult r = api.Init(0); r != CUDA_SUCCESS) error = api.Describe("cuInit", r);
  return loaded;
}

}  // namespace

std::string DriverApi::Describe(const char* call, CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (GetErrorName == nullptr || GetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
  if (GetErrorString == nullptr || GetErrorString(result, &text) != CUDA_SUCCESS) text = nullptr;
  std::string message = std::string(call) + " failed: ";
  message += name ? name : "CUresult " + std::to_string(static_cast<int>(result));
  if (text != nullptr) message += std::string(" (") + text + ")";
  return message;
}

const DriverApi* Driver(std::string* error) {
  static std::once_flag once;
  static Loaded* loaded = nullptr;
  std::call_once(once, [] { loaded = new Loaded(Load()); });
  if (!loaded->error.empty()) {
    *error = loaded->error;
    return nullptr;
  }
  return &loaded->api;
}

}  // namespace graphopt::cuda
