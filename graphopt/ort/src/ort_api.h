// The one way this library includes the ONNX Runtime C++ API.
//
// The library is loaded into a process that already holds ONNX Runtime, and is not linked
// against libonnxruntime: ORT_API_MANUAL_INIT keeps the C++ wrappers from calling
// OrtGetApiBase() at static-initialization time; RegisterCustomOps installs the OrtApi that ORT
// hands us (Ort::InitApi) before any wrapper is used. CMake defines the macro for every source
// file, so the inline API global is the same in all translation units.
#pragma once

#ifndef ORT_API_MANUAL_INIT
#error "graphopt_ort must be compiled with ORT_API_MANUAL_INIT (set by CMakeLists.txt)"
#endif

#include <onnxruntime_cxx_api.h>

#include <stdexcept>
#include <string>

namespace graphopt {

// An error meant for the model's author: the message names the node and the offending
// attribute, input or shape. The code becomes the OrtStatus code.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, OrtErrorCode code = ORT_INVALID_ARGUMENT)
      : std::runtime_error(message), code_(code) {}
  OrtErrorCode code() const { return code_; }

 private:
  OrtErrorCode code_;
};

// Runs `body` and turns any exception into an OrtStatus: exceptions must not cross the C ABI
// back into ONNX Runtime.
template <class Body>
OrtStatusPtr StatusFrom(Body&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (const Error& e) {
    return Ort::GetApi().CreateStatus(e.code(), e.what());
  } catch (const Ort::Exception& e) {
    return Ort::GetApi().CreateStatus(e.GetOrtErrorCode(), e.what());
  } catch (const std::exception& e) {
    return Ort::GetApi().CreateStatus(ORT_FAIL, e.what());
  } catch (...) {
    return Ort::GetApi().CreateStatus(ORT_FAIL, "graphopt: unknown exception");
  }
}

}  // namespace graphopt
