// Reading a fused op's attributes through the C API, validated: the generated readers
// (fused_ops.cc, from the specs) call these.
#pragma once

#include <cstdint>
#include <string>

#include "ort_api.h"

namespace graphopt {

// "graphopt::NormAct node 'name'": how every error message names its node.
std::string DescribeNode(const char* op_name, const OrtKernelInfo* info);

// Each method throws graphopt::Error naming the node, the attribute, the value found and the values
// expected. An absent attribute leaves the value untouched (its default) and returns false.
class AttributeReader {
 public:
  AttributeReader(const char* op_name, const OrtKernelInfo* info);

  [[noreturn]] void Fail(const char* name, const std::string& problem) const;

  bool String(const char* name, std::string* value) const;
  bool Float(const char* name, float* value) const;
  bool Int(const char* name, int64_t* value) const;
  // A float that must be finite and >= minimum.
  void FiniteAtLeast(const char* name, float minimum, float* value) const;

  // A string attribute naming one of `table`'s entries ({spelling, value} pairs).
  template <class Table, class Value>
  void Choice(const char* name, const Table& table, Value* value) const {
    std::string text;
    if (!String(name, &text)) return;
    for (const auto& [spelling, entry] : table) {
      if (text == spelling) {
        *value = entry;
        return;
      }
    }
    std::string valid;
    for (const auto& [spelling, entry] : table) valid += (valid.empty() ? "" : ", ") + std::string(spelling);
    Fail(name, "is '" + text + "'; expected one of: " + valid);
  }

  // Optional output `output` is only given with optional input `input` (ResidualSum needs Residual).
  // Checked when the session is created, so the session, not the first run, fails.
  void CheckNeeds(size_t output, const char* output_name, size_t input, const char* input_name) const;

 private:
  void CheckAbsent(const char* name, const char* expected) const;

  const OrtKernelInfo* info_;
  std::string node_;
};

}  // namespace graphopt
