// What every op's CUDA launch shares (see launch.h).
#include "launch.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <vector>

#include "driver_api.h"
#include "kernel_loader.h"
#include "kernel_table.h"

namespace graphopt::cuda {

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "float32";
    case DType::kFloat16: return "float16";
    case DType::kBFloat16: return "bfloat16";
  }
  return "unknown";
}

bool IsAligned(const KernelTable& table, int64_t cols, std::initializer_list<const void*> pointers) {
  if (cols % table.align_elements != 0) return false;
  for (const void* p : pointers) {
    if (p != nullptr && reinterpret_cast<uintptr_t>(p) % table.align_bytes != 0) return false;
  }
  return true;
}

const KernelVariant* Select(const KernelTable& table, KernelOp op, const char* part, DType dtype, int64_t rows,
                            int64_t cols, bool aligned, int64_t uniform_rows, int64_t out_features,
                            int64_t channel) {
  for (size_t i = 0; i < table.count; ++i) {
    const KernelVariant& v = table.variants[i];
    if (v.op != op || v.dtype != dtype || std::strcmp(v.part, part) != 0) continue;
    if (cols > v.max_cols || cols < v.min_cols || rows > v.max_rows || channel < v.min_channel) continue;
    if ((v.shared && uniform_rows != 0) || (v.blockwise && uniform_rows % v.block_m != 0)) continue;
    if (v.out_features != 0 && v.out_features != out_features) continue;
    if ((cols == v.max_cols || !v.exact) && (aligned || !v.aligned)) return &v;
  }
  return nullptr;
}

bool ValidActivation(Activation a) {
  return static_cast<int32_t>(a) >= 0 && static_cast<int32_t>(a) <= static_cast<int32_t>(Activation::kSigmoid);
}
bool ValidNorm(Norm n) { return n == Norm::kLayer || n == Norm::kRms; }

int ReportFailure(const std::string& failure, char* error, size_t size) {
  if (failure.empty()) return kLaunched;
  if (error != nullptr && size > 0) {
    const size_t n = std::min(size - 1, failure.size());
    std::memcpy(error, failure.data(), n);
    error[n] = '\0';
  }
  return kFailed;
}

std::string CheckShape(int64_t rows, int64_t cols) {
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (rows < 0 || cols <= 0) return "bad shape: rows=" + std::to_string(rows) + ", cols=" + std::to_string(cols);
  if (rows > kMax || cols > kMax) return "rows and cols must each fit in 32 bits";
  return "";
}

std::string Launch::Run(const DriverApi& api, CUstream stream, int64_t rows) {
  ContextScope scope(api, stream);
  if (!scope.error().empty()) return kPrefix + scope.error();
  LoadedKernel kernel;
  if (std::string e = GetKernel(api, scope.context(), variant_, &kernel); !e.empty()) return kPrefix + e;
  const int64_t rows_per_program = int64_t{variant_.block_m} * variant_.iters;
  const int64_t grid = (rows + rows_per_program - 1) / rows_per_program;
  if (grid > std::numeric_limits<int32_t>::max()) return std::string(kPrefix) + "too many rows";
  // Triton appends global and profile scratch pointers; both are null unless a kernel needs them.
  std::vector<CUdeviceptr> scratch(variant_.hidden_args, 0);
  auto release = [&] {
    for (CUdeviceptr p : scratch) {
      if (p != 0) api.MemFreeAsync(p, stream);  // stream-ordered: after the kernel has run
    }
  };
  const int64_t sizes[2] = {variant_.global_scratch_size, variant_.profile_scratch_size};
  for (int32_t i = 0; i < variant_.hidden_args && i < 2; ++i) {
    if (sizes[i] == 0) continue;
    if (api.MemAllocAsync == nullptr || api.MemFreeAsync == nullptr) {
      release();
      return std::string(kPrefix) + "scratch memory needs CUDA 11.2 or newer";
    }
    if (CUresult r = api.MemAllocAsync(&scratch[i], static_cast<size_t>(sizes[i] * grid), stream);
        r != CUDA_SUCCESS) {
      release();
      return kPrefix + api.Describe("cuMemAllocAsync", r);
    }
  }
  for (CUdeviceptr& p : scratch) args_.push_back(&p);
  const unsigned threads = 32u * static_cast<unsigned>(variant_.num_warps);
  CUresult r = api.LaunchKernel(kernel.function, static_cast<unsigned>(grid), 1, 1, threads, 1, 1,
                                static_cast<unsigned>(kernel.shared_bytes), stream, args_.data(), nullptr);
  release();
  if (r != CUDA_SUCCESS) return kPrefix + api.Describe(variant_.key, r);
  return "";
}

}  // namespace graphopt::cuda
