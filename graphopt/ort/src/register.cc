// The library's entry point: ONNX Runtime calls RegisterCustomOps when a session registers the
// library (SessionOptions.register_custom_ops_library).
#include <mutex>
#include <string>
#include <vector>

#include "fused_op.h"
#include "fused_ops.h"
#include "ort_api.h"

namespace graphopt {
namespace {


// Every fused op (the generated list, from the specs), for each provider and storage type. The ops live as long as the
// library: ORT keeps pointers to them in every session that registered them.
const std::vector<const OrtCustomOp*>& AllOps() {
  static const std::vector<const OrtCustomOp*> ops = [] {
    std::vector<const OrtCustomOp*> out;
    std::vector<Ep> eps = {Ep::kCpu};
#ifdef GRAPHOPT_WITH_CUDA
    eps.push_back(Ep::kCuda);  // registering is free without a GPU: libcuda loads on first launch
#endif
    for (Ep ep : eps) {
      for (DType dtype : kDTypes) {
#define GRAPHOPT_REGISTER(Spec) out.push_back(new FusedOp<Spec>(ep, dtype));
        GRAPHOPT_FUSED_SPECS(GRAPHOPT_REGISTER)
#undef GRAPHOPT_REGISTER
      }
    }
    return out;
  }();
  return ops;
}

void Register(OrtSessionOptions* options) {
  // A fresh domain per call: ORT does not copy it, so each one must outlive the sessions that
  // use it. Released never, on purpose: releasing at unload would call into an ORT that may
  // already be gone at process exit. They are a few bytes per registration.
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  Ort::CustomOpDomain domain(kDomain);
  for (const OrtCustomOp* op : AllOps()) domain.Add(op);
  Ort::UnownedSessionOptions(options).Add(domain);
  domain.release();
}

}  // namespace
}  // namespace graphopt

// ORT_EXPORT is empty on Linux; exports.map makes this the library's one exported symbol.
extern "C" __attribute__((visibility("default"))) OrtStatus* ORT_API_CALL
RegisterCustomOps(OrtSessionOptions* options, const OrtApiBase* api_base) {
  // The headers are API version 21 (ORT 1.21); a newer ORT serves older API versions.
  const OrtApi* api = api_base->GetApi(ORT_API_VERSION);
  if (api == nullptr) {
    // Too old an ORT: report with the oldest API table, which every ORT serves.
    const OrtApi* oldest = api_base->GetApi(1);
    const std::string message = std::string("graphopt_ort needs ONNX Runtime with C API version >= ") +
                                std::to_string(ORT_API_VERSION) + " (ORT 1.21); this is ORT " +
                                api_base->GetVersionString();
    return oldest != nullptr ? oldest->CreateStatus(ORT_FAIL, message.c_str()) : nullptr;
  }
  Ort::InitApi(api);
  return graphopt::StatusFrom([&] { graphopt::Register(options); });
}
