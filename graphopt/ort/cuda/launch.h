// Launching the ahead-of-time compiled Triton kernels through the CUDA driver API: what every op's
// launch (cuda_launch.cc in its folder) shares. The variant comes from the generated table by the same
// rule as the Python launchers (graphopt/kernels/launch_rules.py): per op, part and dtype, the first
// variant that admits the row length and row count and whose alignment assumption the arguments meet. Argument order follows each kernel's AOT_KERNEL. libcuda is opened lazily on the
// first launch, so the library loads on machines without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
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
// `uniform_rows` (UniformRows): the aligned runs of rows that read one row of every broadcast operand,
// 0 when all rows do; shared-operand variants need 0, blockwise ones a multiple of their block_m.
// `out_features`: the launch's output count where its kernel has one (0: none); a variant that fixes it
// serves only that count. `channel`: the elements of each channel of a row where the kernel has channels
// (0: none); a variant with a min_channel serves only longer ones.
const KernelVariant* Select(const KernelTable& table, KernelOp op, const char* part, DType dtype, int64_t rows,
                            int64_t cols, bool aligned, int64_t uniform_rows = 1, int64_t out_features = 0,
                            int64_t channel = 0);
// An op's only (or main) kernel, whatever the row count.
inline const KernelVariant* Select(const KernelTable& table, KernelOp op, DType dtype, int64_t cols, bool aligned,
                                   int64_t uniform_rows = 1, int64_t out_features = 0) {
  return Select(table, op, "", dtype, 0, cols, aligned, uniform_rows, out_features);
}
bool ValidActivation(Activation a);
bool ValidNorm(Norm n);
// "" when rows x cols is a shape the kernels take, else what is wrong with it.
std::string CheckShape(int64_t rows, int64_t cols);

// Sets *value to the entry of `table` ({spelling, value} pairs) spelled `text`; false if none is.
template <class Table, class Value>
bool ParseSpelling(const Table& table, const char* text, Value* value) {
  for (const auto& [spelling, entry] : table) {
    if (text != nullptr && std::strcmp(text, spelling) == 0) {
      *value = entry;
      return true;
    }
  }
  return false;
}

// What the C entries for PyTorch's eager calls return (graphopt/fused/torch_native/fast_path.h).
enum EagerOutcome : int { kLaunched = 0, kDeclined = 1, kFailed = 2 };
inline bool KnownDType(int32_t code) { return code >= 0 && code <= static_cast<int32_t>(DType::kBFloat16); }
// kLaunched for no failure, else kFailed with the failure copied into `error` (truncated to `size`,
// always terminated).
int ReportFailure(const std::string& failure, char* error, size_t size);

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
