// Test-only: exercises graphopt/ort/src/storage.h so test_storage.py can
// compare the library's float16/bfloat16 conversions with numpy's and
// ml_dtypes' (round to nearest even).
//   storage_check IN OUT
// IN: float32 values. OUT: ToFloat of all 65536 half patterns, of all 65536
// bfloat16 patterns (float32 each), then FromFloat<Half> and
// FromFloat<BFloat16> of every IN value (uint16 each).
#include <cstdint>
#include <cstdio>
#include <vector>

#include "storage.h"

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s IN OUT\n", argv[0]);
    return 2;
  }
  std::FILE *in = std::fopen(argv[1], "rb");
  std::FILE *out = std::fopen(argv[2], "wb");
  if (in == nullptr || out == nullptr) {
    std::perror("storage_check");
    return 2;
  }
  std::vector<float> values;
  float v;
  while (std::fread(&v, sizeof v, 1, in) == 1)
    values.push_back(v);

  std::vector<float> widened;
  for (uint32_t bits = 0; bits < 65536; ++bits)
    widened.push_back(graphopt::ToFloat(graphopt::Half{uint16_t(bits)}));
  for (uint32_t bits = 0; bits < 65536; ++bits)
    widened.push_back(graphopt::ToFloat(graphopt::BFloat16{uint16_t(bits)}));
  std::vector<uint16_t> narrowed;
  for (float f : values)
    narrowed.push_back(graphopt::FromFloat<graphopt::Half>(f).bits);
  for (float f : values)
    narrowed.push_back(graphopt::FromFloat<graphopt::BFloat16>(f).bits);

  const bool ok = std::fwrite(widened.data(), sizeof(float), widened.size(),
                              out) == widened.size() &&
                  std::fwrite(narrowed.data(), sizeof(uint16_t),
                              narrowed.size(), out) == narrowed.size();
  return std::fclose(out) == 0 && ok ? 0 : 1;
}
