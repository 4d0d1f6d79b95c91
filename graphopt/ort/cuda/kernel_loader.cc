#include "kernel_loader.h"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace graphopt::cuda {
namespace {

// Stream handles that stand for "the current context's default stream".
bool IsSpecialStream(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

std::string RetainPrimaryContext(const DriverApi& api, CUcontext* context) {
  static std::mutex mutex;
  static CUcontext primary = nullptr;  // retained for the life of the process
  std::lock_guard<std::mutex> lock(mutex);
  if (primary == nullptr) {
    int count = 0;
    if (CUresult r = api.DeviceGetCount(&count); r != CUDA_SUCCESS) return api.Describe("cuDeviceGetCount", r);
    if (count == 0) return "no CUDA device found";
    CUdevice device = 0;
    if (CUresult r = api.DeviceGet(&device, 0); r != CUDA_SUCCESS) return api.Describe("cuDeviceGet", r);
    if (CUresult r = api.DevicePrimaryCtxRetain(&primary, device); r != CUDA_SUCCESS) {
      primary = nullptr;
      return api.Describe("cuDevicePrimaryCtxRetain", r);
    }
  }
  *context = primary;
  return "";
}

// Images in order of preference for a device of capability `arch` (major * 10 + minor).
std::vector<const KernelImage*> Candidates(const KernelVariant& variant, int arch) {
  std::vector<const KernelImage*> exact, compatible, ptx;
  for (int32_t i = 0; i < variant.image_count; ++i) {
    const KernelImage& image = variant.images[i];
    if (image.arch == 0) {
      ptx.push_back(&image);
    } else if (image.arch == arch) {
      exact.push_back(&image);
    } else if (arch / 10 == 8 && image.arch / 10 == 8 && image.arch < arch) {
      // sm_8x cubins run on later 8.x devices. Triton's sm_90 cubins are sm_90a: 9.0 only.
      compatible.insert(compatible.begin(), &image);  // the table lists archs ascending
    }
  }
  exact.insert(exact.end(), compatible.begin(), compatible.end());
  exact.insert(exact.end(), ptx.begin(), ptx.end());
  return exact;
}

std::string DeviceArch(const DriverApi& api, int* arch) {
  CUdevice device = 0;
  if (CUresult r = api.CtxGetDevice(&device); r != CUDA_SUCCESS) return api.Describe("cuCtxGetDevice", r);
  int major = 0, minor = 0;
  if (CUresult r = api.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
      r != CUDA_SUCCESS) {
    return api.Describe("cuDeviceGetAttribute", r);
  }
  if (CUresult r = api.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
      r != CUDA_SUCCESS) {
    return api.Describe("cuDeviceGetAttribute", r);
  }
  *arch = major * 10 + minor;
  return "";
}

std::string Load(const DriverApi& api, const KernelVariant& variant, LoadedKernel* out) {
  int arch = 0;
  if (std::string error = DeviceArch(api, &arch); !error.empty()) return error;
  std::string failures;
  for (const KernelImage* image : Candidates(variant, arch)) {
    CUmodule module = nullptr;
    CUresult r = api.ModuleLoadData(&module, image->data);
    if (r != CUDA_SUCCESS) {
      // e.g. PTX newer than the driver: say so, and try the next image.
      failures += "; " + std::string(image->arch ? "sm_" + std::to_string(image->arch) : "PTX") + ": " +
                  api.Describe("cuModuleLoadData", r);
      continue;
    }
    CUfunction function = nullptr;
    if (r = api.ModuleGetFunction(&function, module, variant.entry); r != CUDA_SUCCESS) {
      return api.Describe("cuModuleGetFunction", r);
    }
    // Beyond 48 KiB of dynamic shared memory a kernel has to opt in.
    if (image->shared_bytes > 48 * 1024) {
      r = api.FuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, image->shared_bytes);
      if (r != CUDA_SUCCESS) return api.Describe("cuFuncSetAttribute", r);
    }
    out->function = function;
    out->shared_bytes = image->shared_bytes;
    return "";  // the module stays loaded while the context lives
  }
  return std::string("no image of ") + variant.key + " loads on a device of compute capability " +
         std::to_string(arch / 10) + "." + std::to_string(arch % 10) + failures;
}

}  // namespace

ContextScope::ContextScope(const DriverApi& api, CUstream stream) : api_(api) {
  CUcontext current = nullptr;
  if (CUresult r = api.CtxGetCurrent(&current); r != CUDA_SUCCESS) {
    error_ = api.Describe("cuCtxGetCurrent", r);
    return;
  }
  CUcontext wanted = current;
  if (!IsSpecialStream(stream)) {
    if (CUresult r = api.StreamGetCtx(stream, &wanted); r != CUDA_SUCCESS) {
      error_ = api.Describe("cuStreamGetCtx", r);
      return;
    }
  }
  if (wanted == nullptr) {
    error_ = RetainPrimaryContext(api, &wanted);
    if (!error_.empty()) return;
    if (CUresult r = api.CtxSetCurrent(wanted); r != CUDA_SUCCESS) {
      error_ = api.Describe("cuCtxSetCurrent", r);
      return;
    }
  } else if (wanted != current) {
    if (CUresult r = api.CtxPushCurrent(wanted); r != CUDA_SUCCESS) {
      error_ = api.Describe("cuCtxPushCurrent", r);
      return;
    }
    pushed_ = true;
  }
  context_ = wanted;
}

ContextScope::~ContextScope() {
  if (pushed_) {
    CUcontext popped = nullptr;
    api_.CtxPopCurrent(&popped);
  }
}

std::string GetKernel(const DriverApi& api, CUcontext context, const KernelVariant& variant, LoadedKernel* out) {
  static std::mutex mutex;
  static std::map<std::pair<CUcontext, const KernelVariant*>, LoadedKernel> cache;
  std::lock_guard<std::mutex> lock(mutex);  // loads are rare; launches hold it only for a lookup
  auto key = std::make_pair(context, &variant);
  if (auto it = cache.find(key); it != cache.end()) {
    *out = it->second;
    return "";
  }
  LoadedKernel loaded;
  if (std::string error = Load(api, variant, &loaded); !error.empty()) return error;
  cache.emplace(key, loaded);
  *out = loaded;
  return "";
}

}  // namespace graphopt::cuda
