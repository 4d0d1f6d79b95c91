// Start-to-finish time of one ONNX Runtime run, called from C++ as a deployed service would call it:
// inputs and outputs bound once in device memory (IO binding), then Run + device synchronize, timed
// many times. No Python anywhere, so what it measures is ONNX Runtime's per-run cost plus the model's.
//
//   ort_run_timer MODEL.onnx [--library LIB.so] [--cuda-graph] [--cpu] [--iters N] [--warmup N]
//
// Prints one JSON object: median, p10 and p90 microseconds, and the settings. Inputs are random
// float32 (copied to the device once through the CUDA driver API); dims that are not fixed are 1.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "onnxruntime_cxx_api.h"

namespace {

using CuMemcpyHtoD = int (*)(unsigned long long, const void*, size_t);  // cuMemcpyHtoD_v2
using CuCtxSynchronize = int (*)();

struct Driver {
  CuMemcpyHtoD memcpy_htod = nullptr;
  CuCtxSynchronize synchronize = nullptr;
  bool Open() {
    void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return false;
    memcpy_htod = reinterpret_cast<CuMemcpyHtoD>(dlsym(handle, "cuMemcpyHtoD_v2"));
    synchronize = reinterpret_cast<CuCtxSynchronize>(dlsym(handle, "cuCtxSynchronize"));
    return memcpy_htod != nullptr && synchronize != nullptr;
  }
};

struct Options {
  std::string model, library;
  bool cuda_graph = false, cpu = false;
  int iters = 2000, warmup = 200;
};

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr, "ort_run_timer: %s\nusage: ort_run_timer MODEL.onnx [--library LIB.so] "
                       "[--cuda-graph] [--cpu] [--iters N] [--warmup N]\n", why);
  std::exit(2);
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--library") o.library = next();
    else if (a == "--cuda-graph") o.cuda_graph = true;
    else if (a == "--cpu") o.cpu = true;
    else if (a == "--iters") o.iters = std::atoi(next().c_str());
    else if (a == "--warmup") o.warmup = std::atoi(next().c_str());
    else if (!a.empty() && a[0] == '-') Usage(("unknown option " + a).c_str());
    else o.model = a;
  }
  if (o.model.empty()) Usage("no model given");
  if (o.iters <= 0 || o.warmup < 0) Usage("--iters must be positive and --warmup not negative");
  return o;
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

int Run(const Options& o) {
  Ort::Env env(ORT_LOGGING_LEVEL_ERROR, "ort_run_timer");
  Ort::SessionOptions so;
  if (!o.library.empty()) so.RegisterCustomOpsLibrary(o.library.c_str());
  Driver driver;
  if (!o.cpu) {
    if (!driver.Open()) Usage("libcuda.so.1 not found (use --cpu on a machine without a GPU)");
    const OrtApi& api = Ort::GetApi();
    OrtCUDAProviderOptionsV2* cuda = nullptr;
    Ort::ThrowOnError(api.CreateCUDAProviderOptions(&cuda));
    const char* keys[] = {"device_id", "enable_cuda_graph"};
    const char* values[] = {"0", o.cuda_graph ? "1" : "0"};
    Ort::ThrowOnError(api.UpdateCUDAProviderOptions(cuda, keys, values, 2));
    so.AppendExecutionProvider_CUDA_V2(*cuda);
    api.ReleaseCUDAProviderOptions(cuda);
  }
  Ort::Session session(env, o.model.c_str(), so);
  Ort::MemoryInfo where = o.cpu ? Ort::MemoryInfo::CreateCpu(OrtDeviceAllocator, OrtMemTypeDefault)
                                : Ort::MemoryInfo("Cuda", OrtDeviceAllocator, 0, OrtMemTypeDefault);
  Ort::Allocator allocator(session, where);
  Ort::AllocatorWithDefaultOptions host;

  std::mt19937 random(0);
  std::normal_distribution<float> normal;
  std::vector<Ort::Value> inputs, outputs;
  std::vector<std::string> input_names, output_names;
  Ort::IoBinding binding(session);
  for (size_t i = 0; i < session.GetInputCount(); ++i) {
    input_names.push_back(session.GetInputNameAllocated(i, host).get());
    Ort::TypeInfo type = session.GetInputTypeInfo(i);  // (owns what info points into)
    auto info = type.GetTensorTypeAndShapeInfo();
    if (info.GetElementType() != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) Usage("inputs must be float32");
    std::vector<int64_t> shape = info.GetShape();
    for (int64_t& d : shape) d = d > 0 ? d : 1;
    inputs.push_back(Ort::Value::CreateTensor<float>(allocator, shape.data(), shape.size()));
    const size_t count = inputs.back().GetTensorTypeAndShapeInfo().GetElementCount();
    std::vector<float> data(count);
    for (float& x : data) x = normal(random);
    float* target = inputs.back().GetTensorMutableData<float>();
    if (o.cpu) std::memcpy(target, data.data(), count * sizeof(float));
    else if (driver.memcpy_htod(reinterpret_cast<unsigned long long>(target), data.data(), count * sizeof(float)) != 0)
      Usage("cuMemcpyHtoD failed");
    binding.BindInput(input_names.back().c_str(), inputs.back());
  }
  for (size_t i = 0; i < session.GetOutputCount(); ++i) {
    output_names.push_back(session.GetOutputNameAllocated(i, host).get());
    Ort::TypeInfo type = session.GetOutputTypeInfo(i);
    auto info = type.GetTensorTypeAndShapeInfo();
    std::vector<int64_t> shape = info.GetShape();
    bool fixed = std::all_of(shape.begin(), shape.end(), [](int64_t d) { return d >= 0; });
    if (!fixed || info.GetElementType() != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
      if (o.cuda_graph) Usage("CUDA graphs need float32 outputs of fixed shape");
      binding.BindOutput(output_names.back().c_str(), where);
      continue;
    }
    outputs.push_back(Ort::Value::CreateTensor<float>(allocator, shape.data(), shape.size()));
    binding.BindOutput(output_names.back().c_str(), outputs.back());
  }

  Ort::RunOptions run_options;
  auto once = [&] {
    session.Run(run_options, binding);
    if (!o.cpu) driver.synchronize();
  };
  for (int i = 0; i < o.warmup; ++i) once();
  std::vector<double> samples;
  samples.reserve(o.iters);
  for (int i = 0; i < o.iters; ++i) {
    auto start = std::chrono::steady_clock::now();
    once();
    samples.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::printf("{\"model\": \"%s\", \"library\": %s, \"cuda_graph\": %s, \"device\": \"%s\", \"iters\": %d, "
              "\"median_us\": %.2f, \"p10_us\": %.2f, \"p90_us\": %.2f}\n",
              o.model.c_str(), o.library.empty() ? "false" : "true", o.cuda_graph ? "true" : "false",
              o.cpu ? "cpu" : "cuda", o.iters, Percentile(samples, 0.5), Percentile(samples, 0.1),
              Percentile(samples, 0.9));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = Parse(argc, argv);
  try {
    return Run(options);
  } catch (const Ort::Exception& e) {
    std::fprintf(stderr, "ort_run_timer: %s\n", e.what());
    return 1;
  }
}
