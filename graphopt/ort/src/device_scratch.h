// Scratch memory for a kernel's CUDA launches, from ONNX Runtime's own allocator for the device.
//
// ORT hands it out through KernelContext_GetScratchBuffer, which allocates on the kernel's compute
// stream (a stream-aware arena then reuses it only for work ordered after this kernel's), and takes it
// back when this object dies, right after the launches were queued: as ORT's own CUDA kernels free
// their scratch buffers, since the memory goes again only to work queued later on that stream. No
// allocation costs a device synchronization, and the memory counts in the session's arena.
#pragma once

#include <cstddef>

#include "ort_api.h"

namespace graphopt {

class DeviceScratch {
 public:
  // `bytes` of scratch on the device holding `like` (nothing when bytes is 0).
  DeviceScratch(const Ort::KernelContext& context, const Ort::ConstValue& like, size_t bytes) {
    if (bytes == 0) return;
    const OrtApi& api = Ort::GetApi();
    const Ort::ConstMemoryInfo info = like.GetTensorMemoryInfo();
    OrtKernelContext* raw = context.GetOrtKernelContext();
    Ort::ThrowOnError(api.KernelContext_GetAllocator(raw, info, &allocator_));
    if (OrtStatus* status = api.KernelContext_GetScratchBuffer(raw, info, bytes, &data_)) {
      api.ReleaseAllocator(allocator_);  // (no destructor runs for a constructor that throws)
      Ort::ThrowOnError(status);
    }
  }
  ~DeviceScratch() {
    if (data_ != nullptr) allocator_->Free(allocator_, data_);
    if (allocator_ != nullptr) Ort::GetApi().ReleaseAllocator(allocator_);
  }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  void* data() const { return data_; }

 private:
  OrtAllocator* allocator_ = nullptr;
  void* data_ = nullptr;
};

}  // namespace graphopt
