// Reading attributes through the C API. ORT's getters only say "failed" for both an absent
// attribute and one of another type, so a failed read probes the other attribute types to tell
// "absent" (take the default) from "wrong type" (an error naming what was found).
#include "attributes.h"

#include <cmath>
#include <utility>

namespace graphopt {
namespace {

// True when the API call succeeded; the status is released either way.
bool Succeeded(OrtStatus* status) {
  if (status == nullptr) return true;
  Ort::GetApi().ReleaseStatus(status);
  return false;
}

// Names the type an attribute actually has, or returns nullptr when the node has no such attribute.
const char* FoundType(const OrtKernelInfo* info, const char* name) {
  const OrtApi& api = Ort::GetApi();
  float f;
  int64_t i;
  size_t size = 0;
  if (Succeeded(api.KernelInfoGetAttribute_float(info, name, &f))) return "float";
  if (Succeeded(api.KernelInfoGetAttribute_int64(info, name, &i))) return "int";
  if (Succeeded(api.KernelInfoGetAttribute_string(info, name, nullptr, &size))) return "string";
  if (Succeeded(api.KernelInfoGetAttributeArray_float(info, name, nullptr, &size))) return "a list of floats";
  if (Succeeded(api.KernelInfoGetAttributeArray_int64(info, name, nullptr, &size))) return "a list of ints";
  return nullptr;
}

}  // namespace

std::string DescribeNode(const char* op_name, const OrtKernelInfo* info) {
  std::string name;
  try {
    name = Ort::ConstKernelInfo(info).GetNodeName();
  } catch (const Ort::Exception&) {
    // The name only decorates messages; an unnamed node is still described by its op.
  }
  return std::string("graphopt::") + op_name + " node '" + name + "'";
}

AttributeReader::AttributeReader(const char* op_name, const OrtKernelInfo* info)
    : info_(info), node_(DescribeNode(op_name, info)) {}

void AttributeReader::Fail(const char* name, const std::string& problem) const {
  throw Error(node_ + ": attribute '" + name + "' " + problem);
}

bool AttributeReader::String(const char* name, std::string* value) const {
  size_t size = 0;
  if (!Succeeded(Ort::GetApi().KernelInfoGetAttribute_string(info_, name, nullptr, &size))) {
    CheckAbsent(name, "string");
    return false;
  }
  std::string buffer(size, '\0');
  Ort::ThrowOnError(Ort::GetApi().KernelInfoGetAttribute_string(info_, name, buffer.data(), &size));
  buffer.resize(size > 0 ? size - 1 : 0);  // drop the terminating NUL
  *value = std::move(buffer);
  return true;
}

bool AttributeReader::Float(const char* name, float* value) const {
  if (Succeeded(Ort::GetApi().KernelInfoGetAttribute_float(info_, name, value))) return true;
  CheckAbsent(name, "float");
  return false;
}

bool AttributeReader::Int(const char* name, int64_t* value) const {
  if (Succeeded(Ort::GetApi().KernelInfoGetAttribute_int64(info_, name, value))) return true;
  CheckAbsent(name, "int");
  return false;
}

void AttributeReader::FiniteAtLeast(const char* name, float minimum, float* value) const {
  if (Float(name, value) && !(std::isfinite(*value) && *value >= minimum))
    Fail(name, "is " + std::to_string(*value) + "; expected a finite value >= " + std::to_string(minimum));
}

void AttributeReader::CheckNeeds(size_t output, const char* output_name, size_t input, const char* input_name) const {
  const Ort::ConstKernelInfo node(info_);
  const bool wants = node.GetOutputCount() > output && !node.GetOutputName(output).empty();
  const bool has = node.GetInputCount() > input && !node.GetInputName(input).empty();
  if (wants && !has)
    throw Error(node_ + ": output " + output_name + " is requested but input " + input_name + " is absent");
}

void AttributeReader::CheckAbsent(const char* name, const char* expected) const {
  if (const char* found = FoundType(info_, name)) Fail(name, std::string("must be a ") + expected + ", found " + found);
}

}  // namespace graphopt
