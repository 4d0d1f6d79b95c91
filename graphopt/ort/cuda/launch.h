// Launching the ahead-of-time compiled Triton kernels through the CUDA driver API: what every op's
// launch (cuda_launch.cc in its folder) shares. The variant comes from the generated table by the same
// rule as the Python launchers (graphopt/kernels/launch_rules.py): per op, part and dtype, the first
// variant that admits the row length and row count and whose alignment assumption the arguments meet. Argument order follows each kernel's AOT_KERNEL. libcuda is opened lazily on the
// first launch, so the library loads on machines without a GPU.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "driver_api.h"
#include "fused_enums.h"
#include "kernel_table.h"

namespace graphopt::cuda {

inline constexpr const char* kPrefix = "graphopt CUDA kernels: ";

const char* DTypeName(DType dtype);
bool IsAligned(const KernelTable& table, int64_t cols, std::initializer_list<const void*> pointers);
// The first variant of `op`'s kernel `part` for `dtype` that admits `rows` rows of `cols` elements.
const KernelVariant* Select(const KernelTable& table, KernelOp op, const char* part, DType dtype, int64_t rows,
                            int64_t cols, bool aligned);
// An op's only (or main) kernel, whatever the row count.
inline const KernelVariant* Select(const KernelTable& table, KernelOp op, DType dtype, int64_t cols, bool aligned) {
  return Select(table, op, "", dtype, 0, cols, aligned);
}
bool ValidActivation(Activation a);
bool ValidNorm(Norm n);
// "" when rows x cols is a shape the kernels take, else what is wrong with it.
std::string CheckShape(int64_t rows, int64_t cols);

inline CUdeviceptr Ptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// One launch: pointers to each declared argument's value, then the hidden scratch pointers.
class Launch {
 public:
  explicit Launch(const KernelVariant& variant) : variant_(variant) {}

  template <typename T>
  void Arg(const T& value) {
    args_.push_back(const_cast<T*>(&value));
  }

  // Launches on `stream` with a grid covering `rows`: "" on success, else what failed.
  std::string Run(const DriverApi& api, CUstream stream, int64_t rows);

 private:
  const KernelVariant& variant_;
  std::vector<void*> args_;
};

}  // namespace graphopt::cuda
