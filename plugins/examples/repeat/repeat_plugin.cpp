// Example plugin with a dynamic output shape: RepeatInterleave repeats every element `repeats`
// times along `axis`, so the output's dim on that axis is the input's times `repeats` (dynamic
// when the input's is). ONNX op "RepeatInterleave" in domain "com.kiln.examples"; any element
// type (the kernel copies bytes); CPU.
#include <cstring>

#include "kiln/plugin.h"

namespace {

using namespace kiln;

class RepeatPlugin : public IPlugin {
 public:
  RepeatPlugin(int64_t repeats, int64_t axis) : repeats_(repeats), axis_(axis) {}
  std::string name() const override { return "RepeatInterleave"; }
  std::string version() const override { return "1"; }
  std::string pluginNamespace() const override { return "com.kiln.examples"; }
  Attributes fields() const override {
    Attributes a;
    a.set("repeats", repeats_);
    a.set("axis", axis_);
    return a;
  }
  int32_t nbOutputs() const override { return 1; }
  std::vector<Dims> outputDims(const std::vector<PluginTensorDesc>& in) const override {
    if (in.size() != 1) throw Error("RepeatInterleave takes one input");
    Dims d = in[0].dims;
    int64_t a = axisOf(d);
    if (d[a] >= 0) d[a] *= repeats_;  // -1 (dynamic) stays dynamic
    return {d};
  }
  bool supports(DeviceType device, const std::vector<DataType>& in, const std::vector<DataType>& out) const override {
    return device == DeviceType::kCPU && in.size() == 1 && out.size() == 1 && in[0] == out[0];
  }
  int32_t enqueue(DeviceType, const std::vector<PluginTensor>& in, const std::vector<PluginTensor>& out, void*,
                  void*) override {
    const Dims& d = in[0].dims;
    int64_t a = axisOf(d), outer = 1, inner = static_cast<int64_t>(elementSize(in[0].type));
    for (int64_t i = 0; i < a; ++i) outer *= d[i];
    for (size_t i = static_cast<size_t>(a) + 1; i < d.size(); ++i) inner *= d[i];
    auto* x = static_cast<const uint8_t*>(in[0].data);
    auto* y = static_cast<uint8_t*>(out[0].data);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < d[a]; ++j)
        for (int64_t r = 0; r < repeats_; ++r, y += inner) std::memcpy(y, x + (o * d[a] + j) * inner, inner);
    return 0;
  }
  std::unique_ptr<IPlugin> clone() const override { return std::make_unique<RepeatPlugin>(repeats_, axis_); }

 private:
  int64_t axisOf(const Dims& d) const {
    int64_t r = static_cast<int64_t>(d.size());
    int64_t a = axis_ < 0 ? axis_ + r : axis_;
    if (a < 0 || a >= r) throw Error("axis " + std::to_string(axis_) + " is out of range for rank " + std::to_string(r));
    return a;
  }
  int64_t repeats_, axis_;
};

class RepeatCreator : public IPluginCreator {
 public:
  std::string name() const override { return "RepeatInterleave"; }
  std::string version() const override { return "1"; }
  std::string pluginNamespace() const override { return "com.kiln.examples"; }
  std::vector<PluginFieldSpec> fieldSpecs() const override {
    return {{"repeats", PluginFieldType::kINT, true}, {"axis", PluginFieldType::kINT, false}};
  }
  std::unique_ptr<IPlugin> create(const std::string&, const Attributes& f) const override {
    int64_t repeats = f.getInt("repeats", 1);
    if (repeats < 1 || repeats > 4096) throw Error("repeats must be in [1, 4096], got " + std::to_string(repeats));
    return std::make_unique<RepeatPlugin>(repeats, f.getInt("axis", 0));
  }
};

void registerRepeat(IPluginRegistry& r) { r.registerCreator(std::make_shared<RepeatCreator>()); }

}  // namespace

KILN_PLUGIN_LIBRARY(registerRepeat)
