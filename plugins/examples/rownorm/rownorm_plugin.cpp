// Example plugin with two tactics: RowNorm, y = x / sqrt(sum(x^2 over the last axis) + eps), for
// the ONNX op "RowNorm" in domain "com.kiln.examples". The two tactics are two CPU kernels
// (a plain loop accumulating in double, and an 8-lane float loop the compiler vectorizes); the
// builder times both with the profile's opt shapes and keeps the faster one in the plan.
#include <cmath>

#include "kiln/plugin.h"

namespace {

using namespace kiln;

enum class Tactic { kScalar, kLanes };

void rowsScalar(const float* x, float* y, int64_t rows, int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c) ss += double(xr[c]) * xr[c];
    float inv = static_cast<float>(1.0 / std::sqrt(ss + eps));
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = xr[c] * inv;
  }
}

void rowsLanes(const float* x, float* y, int64_t rows, int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t c = 0;
    for (; c + 8 <= cols; c += 8)
      for (int k = 0; k < 8; ++k) acc[k] += xr[c + k] * xr[c + k];
    float ss = 0;
    for (; c < cols; ++c) ss += xr[c] * xr[c];
    for (float a : acc) ss += a;
    float inv = 1.f / std::sqrt(ss + eps);
    for (c = 0; c < cols; ++c) y[r * cols + c] = xr[c] * inv;
  }
}

class RowNormPlugin : public IPlugin {
 public:
  RowNormPlugin(float eps, Tactic t) : eps_(eps), tactic_(t) {}
  std::string name() const override { return "RowNorm"; }
  std::string version() const override { return "1"; }
  std::string pluginNamespace() const override { return "com.kiln.examples"; }
  Attributes fields() const override {
    Attributes a;
    a.set("epsilon", eps_);
    return a;
  }
  int32_t nbOutputs() const override { return 1; }
  std::vector<Dims> outputDims(const std::vector<PluginTensorDesc>& in) const override {
    if (in.size() != 1 || in[0].dims.empty()) throw Error("RowNorm takes one input of rank >= 1");
    return {in[0].dims};
  }
  // Default supports(): float32 on the CPU.
  std::vector<std::string> tactics(DeviceType) const override { return {"scalar", "lanes8"}; }
  bool setTactic(const std::string& t) override {
    if (t == "scalar") tactic_ = Tactic::kScalar;
    else if (t == "lanes8") tactic_ = Tactic::kLanes;
    else return false;
    return true;
  }
  int32_t enqueue(DeviceType, const std::vector<PluginTensor>& in, const std::vector<PluginTensor>& out, void*,
                  void*) override {
    int64_t cols = in[0].dims.back(), n = 1;
    for (int64_t d : in[0].dims) n *= d;
    int64_t rows = cols ? n / cols : 0;
    auto* x = static_cast<const float*>(in[0].data);
    auto* y = static_cast<float*>(out[0].data);
    if (tactic_ == Tactic::kScalar) rowsScalar(x, y, rows, cols, eps_);
    else rowsLanes(x, y, rows, cols, eps_);
    return 0;
  }
  std::unique_ptr<IPlugin> clone() const override { return std::make_unique<RowNormPlugin>(eps_, tactic_); }

 private:
  float eps_;
  Tactic tactic_;
};

class RowNormCreator : public IPluginCreator {
 public:
  std::string name() const override { return "RowNorm"; }
  std::string version() const override { return "1"; }
  std::string pluginNamespace() const override { return "com.kiln.examples"; }
  std::vector<PluginFieldSpec> fieldSpecs() const override { return {{"epsilon", PluginFieldType::kFLOAT, false}}; }
  std::unique_ptr<IPlugin> create(const std::string&, const Attributes& f) const override {
    float eps = f.getFloat("epsilon", 1e-6f);
    if (!(eps >= 0.f)) throw Error("epsilon must be >= 0");
    return std::make_unique<RowNormPlugin>(eps, Tactic::kScalar);
  }
};

void registerRowNorm(IPluginRegistry& r) { r.registerCreator(std::make_shared<RowNormCreator>()); }

}  // namespace

KILN_PLUGIN_LIBRARY(registerRowNorm)
