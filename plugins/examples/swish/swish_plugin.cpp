// Example plugin: Swish with a learnable beta, y = x * sigmoid(beta * x), for the ONNX op
// "Swish" in the custom domain "com.kiln.examples" (kiln has no such op). Runs on the CPU
// (float32) and, when built with CUDA, on the GPU (float32 and float16).
#include <cmath>

#include "kiln/plugin.h"

#ifdef SWISH_WITH_CUDA
// swish_kernel.cu
int32_t launchSwish(const void* x, void* y, int64_t n, float beta, bool half, void* stream);
#endif

namespace {

using namespace kiln;

class SwishPlugin : public IPlugin {
 public:
  explicit SwishPlugin(float beta) : beta_(beta) {}
  // Core
  std::string name() const override { return "Swish"; }
  std::string version() const override { return "1"; }
  std::string pluginNamespace() const override { return "com.kiln.examples"; }
  Attributes fields() const override {
    Attributes a;
    a.set("beta", beta_);
    return a;
  }
  // Build
  int32_t nbOutputs() const override { return 1; }
  std::vector<Dims> outputDims(const std::vector<PluginTensorDesc>& in) const override {
    if (in.size() != 1) throw Error("Swish takes one input");
    return {in[0].dims};
  }
  bool supports(DeviceType device, const std::vector<DataType>& in, const std::vector<DataType>& out) const override {
    if (in.size() != 1 || out.size() != 1 || in[0] != out[0]) return false;
    if (device == DeviceType::kCPU) return in[0] == DataType::kFLOAT;
#ifdef SWISH_WITH_CUDA
    return in[0] == DataType::kFLOAT || in[0] == DataType::kHALF;
#else
    return false;
#endif
  }
  // Runtime
  int32_t enqueue(DeviceType device, const std::vector<PluginTensor>& in, const std::vector<PluginTensor>& out,
                  void*, void* stream) override {
    int64_t n = 1;
    for (int64_t d : in[0].dims) n *= d;
    if (device == DeviceType::kGPU) {
#ifdef SWISH_WITH_CUDA
      return launchSwish(in[0].data, out[0].data, n, beta_, in[0].type == DataType::kHALF, stream);
#else
      (void)stream;
      return 1;  // built without CUDA: supports() never offers the GPU
#endif
    }
    const float* x = static_cast<const float*>(in[0].data);
    float* y = static_cast<float*>(out[0].data);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.f + std::exp(-beta_ * x[i]));
    return 0;
  }
  std::unique_ptr<IPlugin> clone() const override { return std::make_unique<SwishPlugin>(beta_); }

 private:
  float beta_;
};

class SwishCreator : public IPluginCreator {
 public:
  std::string name() const override { return "Swish"; }
  std::string version() const override { return "1"; }
  std::string pluginNamespace() const override { return "com.kiln.examples"; }
  std::vector<PluginFieldSpec> fieldSpecs() const override { return {{"beta", PluginFieldType::kFLOAT, false}}; }
  std::unique_ptr<IPlugin> create(const std::string&, const Attributes& fields) const override {
    float beta = fields.getFloat("beta", 1.f);
    if (!std::isfinite(beta)) throw Error("beta must be finite");
    return std::make_unique<SwishPlugin>(beta);
  }
};

void registerSwish(IPluginRegistry& r) { r.registerCreator(std::make_shared<SwishCreator>()); }

}  // namespace

KILN_PLUGIN_LIBRARY(registerSwish)
