// Plugin API: registry semantics, a hand-built network with a plugin layer (build, run, plan
// round trip, one clone per context), and misuse: wrong field types, unknown/missing fields,
// impossible output shapes, a failing enqueue, libraries that are missing, lack the entry
// points or were built for another API version.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <cstdlib>
#include <thread>

#include "kiln/kiln.h"

using namespace kiln;

namespace {

// y = x * scale + bias; `status` makes enqueue fail; `badShape` makes it report an impossible
// output shape. Counts clones to check the one-clone-per-context contract.
std::atomic<int> gClones{0};
std::atomic<int> gShapeChanges{0};

class AffinePlugin : public IPlugin {
 public:
  AffinePlugin(float scale, float bias, int64_t status, int64_t badShape)
      : scale_(scale), bias_(bias), status_(status), badShape_(badShape) {}
  std::string name() const override { return "TestAffine"; }
  std::string version() const override { return "1"; }
  std::string pluginNamespace() const override { return "test"; }
  Attributes fields() const override {
    Attributes a;
    a.set("scale", scale_);
    a.set("bias", bias_);
    if (status_) a.set("status", status_);
    if (badShape_) a.set("bad_shape", badShape_);
    if (badShape_ == 4) a.set("scale", int64_t(1));  // reports a field of the wrong type
    return a;
  }
  int32_t nbOutputs() const override { return 1; }
  std::vector<Dims> outputDims(const std::vector<PluginTensorDesc>& in) const override {
    if (badShape_ == 1) return {Dims{-7, 3}};
    if (badShape_ == 2) return {in[0].dims, in[0].dims};  // wrong count
    if (badShape_ == 3) return {Dims{int64_t(1) << 39, int64_t(1) << 39}};  // overflows
    return {in[0].dims};
  }
  int32_t enqueue(DeviceType, const std::vector<PluginTensor>& in, const std::vector<PluginTensor>& out, void*,
                  void*) override {
    if (status_ == -1) throw std::runtime_error("plugin-side failure");
    if (status_) return static_cast<int32_t>(status_);
    int64_t n = 1;
    for (int64_t d : in[0].dims) n *= d;
    for (int64_t i = 0; i < n; ++i)
      static_cast<float*>(out[0].data)[i] = static_cast<const float*>(in[0].data)[i] * scale_ + bias_;
    return 0;
  }
  std::unique_ptr<IPlugin> clone() const override {
    ++gClones;
    return std::make_unique<AffinePlugin>(scale_, bias_, status_, badShape_);
  }
  int32_t onShapeChange(const std::vector<PluginTensorDesc>&, const std::vector<PluginTensorDesc>&) override {
    ++gShapeChanges;
    return 0;
  }

 private:
  float scale_, bias_;
  int64_t status_, badShape_;
};

class AffineCreator : public IPluginCreator {
 public:
  std::string name() const override { return "TestAffine"; }
  std::string version() const override { return "1"; }
  std::string pluginNamespace() const override { return "test"; }
  std::vector<PluginFieldSpec> fieldSpecs() const override {
    return {{"scale", PluginFieldType::kFLOAT, true},
            {"bias", PluginFieldType::kFLOAT, false},
            {"status", PluginFieldType::kINT, false},
            {"bad_shape", PluginFieldType::kINT, false}};
  }
  std::unique_ptr<IPlugin> create(const std::string&, const Attributes& f) const override {
    return std::make_unique<AffinePlugin>(f.getFloat("scale", 1.f), f.getFloat("bias", 0.f), f.getInt("status", 0),
                                          f.getInt("bad_shape", 0));
  }
};

struct RegisterAffine {
  RegisterAffine() { getPluginRegistry().registerCreator(std::make_shared<AffineCreator>(), /*allowOverride=*/true); }
};

Attributes affineFields(float scale, float bias) {
  Attributes a;
  a.set("scale", scale);
  a.set("bias", bias);
  return a;
}

std::unique_ptr<Engine> buildAffine(const Attributes& fields, const Dims& dims = {2, 3}) {
  static RegisterAffine reg;
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, dims);
  Layer* relu = net.addActivation(x, "Relu");
  Layer* p = addPluginLayer(net, {relu->outputs[0]}, "TestAffine", "1", "test", fields, "affine");
  net.renameTensor(p->outputs[0], "y");
  net.markOutput(p->outputs[0]);
  BuilderConfig cfg;
  cfg.setDevice(DeviceType::kCPU);
  cfg.setThreads(1);
  return Builder().build(net, cfg);
}

std::vector<float> runAffine(const Engine& e, const std::vector<float>& x) {
  auto ctx = e.createExecutionContext();
  std::vector<float> y(x.size(), -1.f);
  ctx->setTensorAddress("x", const_cast<float*>(x.data()));
  ctx->setTensorAddress("y", y.data());
  ctx->enqueue();
  return y;
}

void expectAffine(const std::vector<float>& x, const std::vector<float>& y, float scale, float bias) {
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(y[i], std::max(x[i], 0.f) * scale + bias) << i;
}

// Where the test libraries are: $KILN_TEST_LIBDIR (a bundle run elsewhere) or the build's lib dir.
std::string libPath(const std::string& file) {
  const char* env = std::getenv("KILN_TEST_LIBDIR");
  return std::string(env && *env ? env : KILN_TEST_LIBDIR) + "/" + file;
}

template <typename F>
std::string errorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

class Dummy : public AffineCreator {
 public:
  explicit Dummy(std::string v) : v_(std::move(v)) {}
  std::string name() const override { return "TestDummy"; }
  std::string version() const override { return v_; }
  std::string v_;
};

}  // namespace

TEST(Plugins, RegistryRegisterFindListDeregister) {
  auto& r = getPluginRegistry();
  r.registerCreator(std::make_shared<Dummy>("7"));
  EXPECT_NE(r.findCreator("TestDummy", "7", "test"), nullptr);
  EXPECT_EQ(r.findCreator("TestDummy", "8", "test"), nullptr);
  EXPECT_EQ(r.findCreator("TestDummy", "7", "other"), nullptr);
  bool listed = false;
  for (const auto& p : r.list()) listed = listed || (p.name == "TestDummy" && p.version == "7" && p.pluginNamespace == "test");
  EXPECT_TRUE(listed);
  std::string e = errorOf([&] { r.registerCreator(std::make_shared<Dummy>("7")); });
  EXPECT_NE(e.find("already registered"), std::string::npos) << e;
  EXPECT_NO_THROW(r.registerCreator(std::make_shared<Dummy>("7"), /*allowOverride=*/true));
  EXPECT_TRUE(r.deregisterCreator("TestDummy", "7", "test"));
  EXPECT_FALSE(r.deregisterCreator("TestDummy", "7", "test"));
  EXPECT_EQ(r.findCreator("TestDummy", "7", "test"), nullptr);
}

TEST(Plugins, RegistryIsThreadSafe) {
  auto& r = getPluginRegistry();
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&r, t] {
      for (int i = 0; i < 200; ++i) {
        std::string v = std::to_string(t * 1000 + i);
        r.registerCreator(std::make_shared<Dummy>(v));
        EXPECT_NE(r.findCreator("TestDummy", v, "test"), nullptr);
        (void)r.list();
        EXPECT_TRUE(r.deregisterCreator("TestDummy", v, "test"));
      }
    });
  for (auto& t : ts) t.join();
}

TEST(Plugins, HandBuiltNetworkRunsAndRoundTripsThroughAPlan) {
  auto engine = buildAffine(affineFields(2.5f, -1.f));
  std::vector<float> x = {-1.f, 0.5f, 2.f, -3.f, 4.f, 0.25f};
  expectAffine(x, runAffine(*engine, x), 2.5f, -1.f);
  std::vector<uint8_t> plan = engine->serialize();
  auto loaded = Engine::deserialize(plan.data(), plan.size());
  expectAffine(x, runAffine(*loaded, x), 2.5f, -1.f);
  EXPECT_NE(loaded->getLayerInformation().find("\"plugin\":{\"name\":\"TestAffine\""), std::string::npos);
}

TEST(Plugins, OneClonePerExecutionContextAcrossThreads) {
  auto engine = buildAffine(affineFields(3.f, 0.5f));
  int before = gClones.load();
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        auto y = runAffine(*engine, x);  // one context per call
        for (size_t k = 0; k < x.size(); ++k) bad += y[k] != x[k] * 3.f + 0.5f;
      }
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(gClones.load() - before, 80);
}

TEST(Plugins, PlanNeedingAnUnregisteredPluginNamesIt) {
  auto engine = buildAffine(affineFields(1.f, 0.f));
  std::vector<uint8_t> plan = engine->serialize();
  ASSERT_TRUE(getPluginRegistry().deregisterCreator("TestAffine", "1", "test"));
  std::string e = errorOf([&] { Engine::deserialize(plan.data(), plan.size()); });
  getPluginRegistry().registerCreator(std::make_shared<AffineCreator>());
  EXPECT_NE(e.find("test::TestAffine"), std::string::npos) << e;
  EXPECT_NE(e.find("not registered"), std::string::npos) << e;
}

TEST(Plugins, WrongFieldTypesAreClearErrors) {
  Attributes f;
  f.set("scale", int64_t(2));  // must be FLOAT
  std::string e = errorOf([&] { buildAffine(f); });
  EXPECT_NE(e.find("field 'scale' must be FLOAT but is INT"), std::string::npos) << e;
  f = affineFields(1.f, 0.f);
  f.set("colour", std::string("red"));
  e = errorOf([&] { buildAffine(f); });
  EXPECT_NE(e.find("unknown field 'colour'"), std::string::npos) << e;
  Attributes none;
  e = errorOf([&] { buildAffine(none); });
  EXPECT_NE(e.find("required field 'scale'"), std::string::npos) << e;
}

TEST(Plugins, ImpossibleOutputShapesAreClearErrors) {
  for (int64_t mode : {1, 2, 3}) {
    Attributes f = affineFields(1.f, 0.f);
    f.set("bad_shape", mode);
    std::string e = errorOf([&] { buildAffine(f); });
    EXPECT_NE(e.find("TestAffine"), std::string::npos) << mode << ": " << e;
    EXPECT_TRUE(e.find("impossible shape") != std::string::npos || e.find("output shapes for 1 outputs") != std::string::npos ||
                e.find("overflows") != std::string::npos)
        << mode << ": " << e;
  }
}

TEST(Plugins, FieldsThePluginReportsAreCheckedAtBuildTime) {
  Attributes f = affineFields(1.f, 0.f);
  f.set("bad_shape", int64_t(4));  // fields() then reports scale as an INT
  std::string e = errorOf([&] { buildAffine(f); });
  EXPECT_NE(e.find("field 'scale' must be FLOAT but is INT"), std::string::npos) << e;
  EXPECT_NE(e.find("reports for serialization"), std::string::npos) << e;
}

// The runtime does shape work only for shapes it has not planned: a fixed-shape engine calls the
// plugin's shape hook once per context however often it runs; a dynamic one once per new shape
// (a context keeps the plans of its recent shapes, so returning to one costs nothing).
TEST(Plugins, ShapeWorkHappensOncePerShapeNotPerEnqueue) {
  auto fixed = buildAffine(affineFields(2.f, 1.f));
  int before = gShapeChanges.load();
  {
    auto ctx = fixed->createExecutionContext();
    std::vector<float> x(6, 1.f), y(6);
    ctx->setTensorAddress("x", x.data());
    ctx->setTensorAddress("y", y.data());
    for (int i = 0; i < 25; ++i) ctx->enqueue();
  }
  EXPECT_EQ(gShapeChanges.load() - before, 1);

  static RegisterAffine reg;
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {-1, 3});
  Layer* p = addPluginLayer(net, {x}, "TestAffine", "1", "test", affineFields(2.f, 1.f), "affine");
  net.renameTensor(p->outputs[0], "y");
  net.markOutput(p->outputs[0]);
  BuilderConfig cfg;
  cfg.setDevice(DeviceType::kCPU);
  cfg.setThreads(1);
  OptimizationProfile prof;
  prof.setDimensions("x", OptProfileSelector::kMIN, {1, 3});
  prof.setDimensions("x", OptProfileSelector::kOPT, {4, 3});
  prof.setDimensions("x", OptProfileSelector::kMAX, {8, 3});
  cfg.addOptimizationProfile(prof);
  auto dynamic = Builder().build(net, cfg);
  auto ctx = dynamic->createExecutionContext();
  std::vector<float> in(24, 1.f), out(24);
  ctx->setTensorAddress("x", in.data());
  ctx->setTensorAddress("y", out.data());
  before = gShapeChanges.load();
  const int64_t batches[] = {2, 2, 2, 5, 5, 2, 8, 8};  // 3 shapes (this engine has no arena to outgrow)
  for (int64_t b : batches) {
    ctx->setInputShape("x", {b, 3});
    ctx->enqueue();
    for (int64_t i = 0; i < b * 3; ++i) ASSERT_FLOAT_EQ(out[i], 3.f);
  }
  EXPECT_EQ(gShapeChanges.load() - before, 3);
}

TEST(Plugins, FailingEnqueueIsAClearError) {
  Attributes f = affineFields(1.f, 0.f);
  f.set("status", int64_t(42));
  auto engine = buildAffine(f);
  std::string e = errorOf([&] { runAffine(*engine, {1, 2, 3, 4, 5, 6}); });
  EXPECT_NE(e.find("enqueue failed with status 42"), std::string::npos) << e;
  f.set("status", int64_t(-1));  // the plugin throws its own exception type
  auto throwing = buildAffine(f);
  e = errorOf([&] { runAffine(*throwing, {1, 2, 3, 4, 5, 6}); });
  EXPECT_NE(e.find("enqueue threw: plugin-side failure"), std::string::npos) << e;
}

TEST(Plugins, BadLibrariesAreClearErrors) {
  std::string e = errorOf([] { loadPluginLibrary("/nonexistent/libnothing.so"); });
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
  e = errorOf([] { loadPluginLibrary(libPath("libkiln_test_noentry.so")); });
  EXPECT_NE(e.find("is not a kiln plugin library"), std::string::npos) << e;
  e = errorOf([] { loadPluginLibrary(libPath("libkiln_test_badversion.so")); });
  EXPECT_NE(e.find("plugin API version 99"), std::string::npos) << e;
  e = errorOf([] { loadPluginLibrary(libPath("libkiln_test_throws.so")); });
  EXPECT_NE(e.find("failed to register"), std::string::npos) << e;
  e = errorOf([] { loadPluginLibrary("/etc/hostname"); });
  EXPECT_NE(e.find("cannot load plugin library"), std::string::npos) << e;
}

TEST(Plugins, LibraryLoadsAndTagsItsCreators) {
  loadPluginLibrary(libPath("libkiln_swish_plugin.so"));
  loadPluginLibrary(libPath("libkiln_swish_plugin.so"));  // twice: a no-op
  bool found = false;
  for (const auto& p : getPluginRegistry().list())
    found = found || (p.name == "Swish" && p.pluginNamespace == "com.kiln.examples" && p.library == "libkiln_swish_plugin.so");
  EXPECT_TRUE(found);
}
