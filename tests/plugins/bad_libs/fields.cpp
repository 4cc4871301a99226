// Test plugin library: "FieldSum" (domain test.fields) takes a field of every kind and scales its
// input by a number computed from all of them, so that a test can check from the output that
// every field kind survived ONNX import and the plan: y = x * (i + f + len(s) + sum(ints) +
// sum(floats) + len(strings) + sum(t)). Field "fail" (INT) makes enqueue return that status.
#include <cmath>

#include "kiln/plugin.h"

namespace {

using namespace kiln;

class FieldSum : public IPlugin {
 public:
  FieldSum(Attributes f, float scale, int64_t fail) : f_(std::move(f)), scale_(scale), fail_(fail) {}
  std::string name() const override { return "FieldSum"; }
  std::string version() const override { return "2"; }
  std::string pluginNamespace() const override { return "test.fields"; }
  Attributes fields() const override { return f_; }
  int32_t nbOutputs() const override { return 1; }
  std::vector<Dims> outputDims(const std::vector<PluginTensorDesc>& in) const override { return {in.at(0).dims}; }
  int32_t enqueue(DeviceType, const std::vector<PluginTensor>& in, const std::vector<PluginTensor>& out, void*,
                  void*) override {
    if (fail_) return static_cast<int32_t>(fail_);
    int64_t n = 1;
    for (int64_t d : in[0].dims) n *= d;
    for (int64_t i = 0; i < n; ++i) static_cast<float*>(out[0].data)[i] = static_cast<const float*>(in[0].data)[i] * scale_;
    return 0;
  }
  std::unique_ptr<IPlugin> clone() const override { return std::make_unique<FieldSum>(f_, scale_, fail_); }

 private:
  Attributes f_;
  float scale_;
  int64_t fail_;
};

class FieldSumCreator : public IPluginCreator {
 public:
  std::string name() const override { return "FieldSum"; }
  std::string version() const override { return "2"; }
  std::string pluginNamespace() const override { return "test.fields"; }
  std::vector<PluginFieldSpec> fieldSpecs() const override {
    return {{"i", PluginFieldType::kINT, true},         {"f", PluginFieldType::kFLOAT, true},
            {"s", PluginFieldType::kSTRING, true},      {"ints", PluginFieldType::kINTS, true},
            {"floats", PluginFieldType::kFLOATS, true}, {"strings", PluginFieldType::kSTRINGS, true},
            {"t", PluginFieldType::kTENSOR, true},      {"fail", PluginFieldType::kINT, false}};
  }
  std::unique_ptr<IPlugin> create(const std::string&, const Attributes& a) const override {
    double scale = double(a.getInt("i", 0)) + a.getFloat("f", 0) + a.getString("s", "").size() + a.getStrings("strings").size();
    for (int64_t v : a.getInts("ints")) scale += double(v);
    for (float v : a.getFloats("floats")) scale += v;
    const HostTensor* t = a.getTensor("t");
    if (!t || t->type() != DataType::kFLOAT) throw Error("field t must be a float32 tensor");
    for (int64_t k = 0; k < t->count(); ++k) scale += t->as<float>()[k];
    return std::make_unique<FieldSum>(a, static_cast<float>(scale), a.getInt("fail", 0));
  }
};

// "Relu" in the default namespace, computing y = -x: with --enablePluginOverride it replaces the
// built-in Relu (a test can tell which one ran).
class NegateAsRelu : public IPlugin {
 public:
  std::string name() const override { return "Relu"; }
  std::string version() const override { return "1"; }
  std::string pluginNamespace() const override { return ""; }
  Attributes fields() const override { return {}; }
  int32_t nbOutputs() const override { return 1; }
  std::vector<Dims> outputDims(const std::vector<PluginTensorDesc>& in) const override { return {in.at(0).dims}; }
  int32_t enqueue(DeviceType, const std::vector<PluginTensor>& in, const std::vector<PluginTensor>& out, void*,
                  void*) override {
    int64_t n = 1;
    for (int64_t d : in[0].dims) n *= d;
    for (int64_t i = 0; i < n; ++i) static_cast<float*>(out[0].data)[i] = -static_cast<const float*>(in[0].data)[i];
    return 0;
  }
  std::unique_ptr<IPlugin> clone() const override { return std::make_unique<NegateAsRelu>(); }
};

class NegateAsReluCreator : public IPluginCreator {
 public:
  std::string name() const override { return "Relu"; }
  std::string version() const override { return "1"; }
  std::string pluginNamespace() const override { return ""; }
  std::vector<PluginFieldSpec> fieldSpecs() const override { return {}; }
  std::unique_ptr<IPlugin> create(const std::string&, const Attributes&) const override {
    return std::make_unique<NegateAsRelu>();
  }
};

void registerFieldSum(IPluginRegistry& r) {
  r.registerCreator(std::make_shared<FieldSumCreator>());
  r.registerCreator(std::make_shared<NegateAsReluCreator>());
}

}  // namespace

KILN_PLUGIN_LIBRARY(registerFieldSum)
