// The attributes of the fused ops (graphopt/fused/table.py), read from a node and validated.
#pragma once

#include <cstdint>
#include <string>

#include "fused_params.h"
#include "ort_api.h"

namespace graphopt {

struct NormActAttributes {
  Norm norm = Norm::kLayer;
  Activation activation = Activation::kIdentity;
  float epsilon = 1e-5f;
  int64_t axis = -1;
};

struct NormActLinearAttributes {
  Norm norm = Norm::kLayer;
  Activation activation = Activation::kIdentity;
  float epsilon = 1e-5f;
  Activation out_activation = Activation::kIdentity;
};

struct GroupNormActAttributes {
  int64_t groups = 32;
  Activation activation = Activation::kIdentity;
  float epsilon = 1e-5f;
};

// Each throws graphopt::Error naming the node, the attribute, the value found and the values
// expected. Absent attributes take the table's defaults.
NormActAttributes ReadNormActAttributes(const OrtKernelInfo* info);
NormActLinearAttributes ReadNormActLinearAttributes(const OrtKernelInfo* info);
GroupNormActAttributes ReadGroupNormActAttributes(const OrtKernelInfo* info);

// "graphopt::NormAct node 'name'": how every error message names its node.
std::string DescribeNode(const char* op_name, const OrtKernelInfo* info);

}  // namespace graphopt
