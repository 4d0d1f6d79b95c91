// One OrtCustomOp per (fused op, execution provider, storage type).
//
// ORT picks a kernel by the element types of a node's inputs. A custom op declares one fixed
// type per input, so each op is registered three times (float, float16, bfloat16); ORT merges
// the registrations that share a name into one schema whose inputs accept all three types.
// Index inputs (PortElement::kIndex) are declared of any type: the kernel reads int32 or int64
// indices as they come and refuses other types.
//
// A Spec (declared in the generated fused_ops.h from the op's spec; Compute and InferOutputShape
// written in the op's folder) supplies what differs between ops: its name, ports, attributes, how it
// computes, and its shape inference.
#pragma once

#include <array>
#include <string>

#include "attributes.h"
#include "fused_ops.h"
#include "ort_api.h"
#include "tensors.h"

namespace graphopt {

template <class Spec>
class FusedKernel {
 public:
  FusedKernel(const OrtKernelInfo* info, DType dtype, Ep ep)
      : attributes_(Spec::ReadAttributes(info)), node_(DescribeNode(Spec::kName, info)), dtype_(dtype), ep_(ep) {}

  OrtStatusPtr ComputeV2(OrtKernelContext* context) const {
    return StatusFrom([&] { Spec::Compute(Ort::KernelContext(context), attributes_, dtype_, ep_, node_); });
  }

 private:
  typename Spec::Attributes attributes_;
  std::string node_;  // for error messages
  DType dtype_;
  Ep ep_;
};

template <class Spec>
class FusedOp : public Ort::CustomOpBase<FusedOp<Spec>, FusedKernel<Spec>, /*WithStatus=*/true> {
 public:
  FusedOp(Ep ep, DType dtype) : ep_(ep), dtype_(dtype) {
    // Set directly rather than through CustomOpBase's static InferOutputShape hook: the C
    // callback receives the raw context, which keeps the element types of the inputs.
    OrtCustomOp::InferOutputShapeFn = [](const OrtCustomOp*, OrtShapeInferContext* context) -> OrtStatusPtr {
      return StatusFrom([&] { Spec::InferOutputShape(context); });
    };
  }

  OrtStatusPtr CreateKernelV2(const OrtApi&, const OrtKernelInfo* info, void** kernel) const {
    // Attributes are validated here, so a bad node fails when the session is created.
    return StatusFrom([&] { *kernel = new FusedKernel<Spec>(info, dtype_, ep_); });
  }

  const char* GetName() const { return Spec::kName; }
  const char* GetExecutionProviderType() const {
    return ep_ == Ep::kCpu ? "CPUExecutionProvider" : "CUDAExecutionProvider";
  }

  size_t GetInputTypeCount() const { return Spec::kInputOptional.size(); }
  size_t GetOutputTypeCount() const { return Spec::kOutputOptional.size(); }
  ONNXTensorElementDataType GetInputType(size_t i) const {
    switch (Spec::kInputElement[i]) {
      case PortElement::kIndex:
        return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;  // any: int32 or int64, checked by Compute
      case PortElement::kInt64:
        return ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
      default:
        return OnnxType(dtype_);
    }
  }
  ONNXTensorElementDataType GetOutputType(size_t) const { return OnnxType(dtype_); }

  OrtCustomOpInputOutputCharacteristic GetInputCharacteristic(size_t i) const {
    return Characteristic(Spec::kInputOptional[i]);
  }
  OrtCustomOpInputOutputCharacteristic GetOutputCharacteristic(size_t i) const {
    return Characteristic(Spec::kOutputOptional[i]);
  }

  // OrtMemTypeDefault is the provider's own memory: device memory for the CUDA provider, so ORT
  // feeds the kernel GPU tensors without inserting copies (outputs default the same way).
  OrtMemType GetInputMemoryType(size_t) const { return OrtMemTypeDefault; }

 private:
  static OrtCustomOpInputOutputCharacteristic Characteristic(bool optional) {
    return optional ? INPUT_OUTPUT_OPTIONAL : INPUT_OUTPUT_REQUIRED;
  }

  Ep ep_;
  DType dtype_;
};

}  // namespace graphopt
