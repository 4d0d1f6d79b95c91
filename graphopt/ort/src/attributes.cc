// Reading attributes through the C API. ORT's getters only say "failed" for both an absent
// attribute and one of another type, so a failed read probes the other attribute types to tell
// "absent" (take the default) from "wrong type" (an error naming what was found).
#include "attributes.h"

#include <cmath>
#include <utility>
#include <vector>

namespace graphopt {
namespace {

constexpr std::pair<const char*, Norm> kNorms[] = {{"layer", Norm::kLayer}, {"rms", Norm::kRms}};
constexpr std::pair<const char*, Activation> kActivations[] = {
    {"identity", Activation::kIdentity}, {"relu", Activation::kRelu},          {"tanh", Activation::kTanh},
    {"gelu", Activation::kGelu},         {"gelu_tanh", Activation::kGeluTanh}, {"silu", Activation::kSilu},
    {"sigmoid", Activation::kSigmoid}};

template <class Table>
std::string Spellings(const Table& table) {
  std::string out;
  for (const auto& [name, value] : table) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

template <class Table, class Value>
bool Lookup(const Table& table, const std::string& text, Value* out) {
  for (const auto& [name, value] : table) {
    if (text == name) {
      *out = value;
      return true;
    }
  }
  return false;
}

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

class AttributeReader {
 public:
  AttributeReader(const char* op_name, const OrtKernelInfo* info) : info_(info), node_(DescribeNode(op_name, info)) {}

  [[noreturn]] void Fail(const char* name, const std::string& problem) const {
    throw Error(node_ + ": attribute '" + name + "' " + problem);
  }

  // Returns false (value untouched) when the attribute is absent.
  bool String(const char* name, std::string* value) const {
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

  bool Float(const char* name, float* value) const {
    if (Succeeded(Ort::GetApi().KernelInfoGetAttribute_float(info_, name, value))) return true;
    CheckAbsent(name, "float");
    return false;
  }

  bool Int(const char* name, int64_t* value) const {
    if (Succeeded(Ort::GetApi().KernelInfoGetAttribute_int64(info_, name, value))) return true;
    CheckAbsent(name, "int");
    return false;
  }

  template <class Table, class Value>
  void Choice(const char* name, const Table& table, Value* value) const {
    std::string text;
    if (String(name, &text) && !Lookup(table, text, value))
      Fail(name, "is '" + text + "'; expected one of: " + Spellings(table));
  }

 private:
  void CheckAbsent(const char* name, const char* expected) const {
    if (const char* found = FoundType(info_, name))
      Fail(name, std::string("must be a ") + expected + ", found " + found);
  }

  const OrtKernelInfo* info_;
  std::string node_;
};

template <class Attributes>
void ReadNormAttributes(const AttributeReader& reader, Attributes* out) {
  reader.Choice("norm", kNorms, &out->norm);
  reader.Choice("activation", kActivations, &out->activation);
  if (reader.Float("epsilon", &out->epsilon) && !(std::isfinite(out->epsilon) && out->epsilon >= 0.0f))
    reader.Fail("epsilon", "is " + std::to_string(out->epsilon) + "; expected a finite value >= 0");
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

NormActAttributes ReadNormActAttributes(const OrtKernelInfo* info) {
  const AttributeReader reader("NormAct", info);
  NormActAttributes out;
  ReadNormAttributes(reader, &out);
  reader.Int("axis", &out.axis);  // range checked against X's rank when the node runs
  return out;
}

NormActLinearAttributes ReadNormActLinearAttributes(const OrtKernelInfo* info) {
  const AttributeReader reader("NormActLinear", info);
  NormActLinearAttributes out;
  ReadNormAttributes(reader, &out);
  reader.Choice("out_activation", kActivations, &out.out_activation);
  return out;
}

GroupNormActAttributes ReadGroupNormActAttributes(const OrtKernelInfo* info) {
  const AttributeReader reader("GroupNormAct", info);
  GroupNormActAttributes out;
  reader.Choice("activation", kActivations, &out.activation);
  if (reader.Float("epsilon", &out.epsilon) && !(std::isfinite(out.epsilon) && out.epsilon >= 0.0f))
    reader.Fail("epsilon", "is " + std::to_string(out.epsilon) + "; expected a finite value >= 0");
  if (reader.Int("groups", &out.groups) && out.groups < 1)
    reader.Fail("groups", "is " + std::to_string(out.groups) + "; expected a positive number");
  return out;
}

}  // namespace graphopt
