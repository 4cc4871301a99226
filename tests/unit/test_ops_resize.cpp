// Resize family: shape inference, errors, reference kernels against values computed with the
// ONNX reference evaluator (onnx 1.23) / NumPy, and the optimized CPU tactic against the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backends/backend.h"
#include "core/thread_pool.h"
#include "kiln/network.h"
#include "ops/op_registry.h"
#include "ops/resize_plan.h"
#include "poison.h"

using namespace kiln;

namespace {

HostTensor floats(const Dims& d, const std::vector<float>& v) {
  HostTensor t(DataType::kFLOAT, d);
  EXPECT_EQ(static_cast<size_t>(t.count()), v.size());
  if (t.bytes()) std::memcpy(t.data(), v.data(), t.bytes());  // an empty vector's data() may be null
  return t;
}

HostTensor ints(const std::vector<int64_t>& v) {
  HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
  if (t.bytes()) std::memcpy(t.data(), v.data(), t.bytes());  // an empty vector's data() may be null
  return t;
}

HostTensor iota(const Dims& d, float start = 1.f) {
  HostTensor t(DataType::kFLOAT, d);
  for (int64_t i = 0; i < t.count(); ++i) t.as<float>()[i] = start + static_cast<float>(i);
  return t;
}

HostTensor randomFloats(const Dims& d, uint32_t seed) {
  HostTensor t(DataType::kFLOAT, d);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  for (int64_t i = 0; i < t.count(); ++i) t.as<float>()[i] = u(rng);
  return t;
}

//! A layer under test: owns its attributes; inputs are known values or omitted (invalid tensor).
struct TestLayer {
  Attributes attrs;
  LayerDesc desc;
  TestLayer(const std::string& op, const std::vector<HostTensor>& inputs, Attributes a) : attrs(std::move(a)) {
    desc.name = "t";
    desc.op = op;
    desc.attrs = &attrs;
    for (const HostTensor& t : inputs) {
      TensorDesc td;
      desc.inputPresent.push_back(t.valid());
      if (t.valid()) {
        td.type = t.type();
        td.dims = t.dims();
        td.value = t;
      }
      desc.inputs.push_back(td);
    }
  }
  //! Shape inference, then evaluation with the reference kernel.
  HostTensor evaluate() {
    inferLayer(desc);
    evaluateOnHost(desc);
    return desc.outputs[0].value;
  }
};

Attributes attrs(std::initializer_list<std::pair<std::string, AttrValue>> kv) {
  Attributes a;
  for (auto& [k, v] : kv) a.set(k, v);
  return a;
}

void expectNear(const HostTensor& got, const Dims& dims, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(got.dims(), dims);
  ASSERT_EQ(static_cast<size_t>(got.count()), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got.as<float>()[i], want[i], tol * std::max(1.f, std::fabs(want[i]))) << "element " << i;
}

const HostTensor kNone;  // an omitted optional input

//! Runs `layer` (inputs known) with the named CPU tactic on 4 threads; the kernel is created
//! from `built` (the build-time view, where values may be unknown) when given.
HostTensor runTactic(TestLayer& layer, const std::string& tacticName, const LayerDesc* built = nullptr) {
  inferLayer(layer.desc);
  if (!built) built = &layer.desc;
  auto backend = getBackend(DeviceType::kCPU, 4);
  std::unique_ptr<Kernel> kernel;
  for (const Tactic& t : backend->tactics(*built))
    if (t.name == tacticName) kernel = t.create(*built);
  if (!kernel) throw Error("tactic " + tacticName + " not offered");
  std::unique_ptr<KernelState> state;
  size_t ws = kernel->reshape(layer.desc, state);
  std::vector<uint8_t> workspace(ws);
  HostTensor out = kiln::test::poisoned(layer.desc.outputs[0].type, layer.desc.outputs[0].dims);
  KernelIO io;
  io.pool = backend->pool();
  io.workspace = workspace.data();
  io.workspaceSize = ws;
  for (size_t i = 0; i < layer.desc.inputs.size(); ++i) {
    const HostTensor& v = layer.desc.inputs[i].value;
    TensorView tv;
    if (layer.desc.present(i)) tv = TensorView{const_cast<void*>(v.data()), v.type(), v.dims(), v.count()};
    io.in.push_back(tv);
  }
  io.out.push_back(TensorView{out.data(), out.type(), out.dims(), out.count()});
  kernel->execute(io, state.get());
  return out;
}

bool offersTactic(TestLayer& layer, const std::string& name) {
  inferLayer(layer.desc);
  for (const Tactic& t : getBackend(DeviceType::kCPU, 1)->tactics(layer.desc))
    if (t.name == name) return true;
  return false;
}

}  // namespace

// ---- Shape inference and errors ----------------------------------------------------------------

TEST(ResizeShape, ScalesFloorAndSizes) {
  TestLayer a("Resize", {iota({1, 3, 5, 7}), kNone, floats({4}, {1.f, 1.f, 0.6f, 2.5f})}, attrs({}));
  inferLayer(a.desc);
  EXPECT_EQ(a.desc.outputs[0].dims, (Dims{1, 3, 3, 17}));
  EXPECT_EQ(a.desc.outputs[0].type, DataType::kFLOAT);

  TestLayer b("Resize", {iota({1, 3, 5, 7}), kNone, kNone, ints({9, 4})}, attrs({{"axes", std::vector<int64_t>{3, 1}}}));
  inferLayer(b.desc);
  EXPECT_EQ(b.desc.outputs[0].dims, (Dims{1, 4, 5, 9}));
}

TEST(ResizeShape, KeepAspectRatioPolicies) {
  // 2x2 to sizes (7, 8): not_larger scales by 3.5 -> round(7) x round(7); not_smaller by 4 -> 8 x 8.
  TestLayer a("Resize", {iota({1, 1, 2, 4}), kNone, kNone, ints({7, 8})},
              attrs({{"axes", std::vector<int64_t>{2, 3}}, {"keep_aspect_ratio_policy", std::string("not_larger")}}));
  inferLayer(a.desc);
  EXPECT_EQ(a.desc.outputs[0].dims, (Dims{1, 1, 4, 8}));
  TestLayer b("Resize", {iota({1, 1, 2, 4}), kNone, kNone, ints({7, 8})},
              attrs({{"axes", std::vector<int64_t>{2, 3}}, {"keep_aspect_ratio_policy", std::string("not_smaller")}}));
  inferLayer(b.desc);
  EXPECT_EQ(b.desc.outputs[0].dims, (Dims{1, 1, 7, 14}));
}

TEST(ResizeShape, UnknownScalesKeepRankAndUnresizedDims) {
  TestLayer a("Resize", {iota({2, 3, 4, 4}), kNone, floats({2}, {2.f, 2.f})}, attrs({{"axes", std::vector<int64_t>{2, 3}}}));
  a.desc.inputs[2].value = HostTensor();  // value computed at run time
  inferLayer(a.desc);
  EXPECT_EQ(a.desc.outputs[0].dims, (Dims{2, 3, -1, -1}));

  // An empty scales tensor (Resize-11 style) next to sizes selects sizes; unknown X dims stay -1.
  TestLayer b("Resize", {iota({1, 1, 2, 2}), kNone, HostTensor(DataType::kFLOAT, {0}), ints({1, 1, 3, 3})}, attrs({}));
  b.desc.inputs[0].dims = {-1, 1, -1, 2};
  inferLayer(b.desc);
  EXPECT_EQ(b.desc.outputs[0].dims, (Dims{1, 1, 3, 3}));
}

TEST(ResizeShape, InvalidInputsThrow) {
  auto check = [](std::vector<HostTensor> in, Attributes a) {
    TestLayer l("Resize", in, std::move(a));
    EXPECT_THROW(inferLayer(l.desc), Error);
  };
  HostTensor x = iota({1, 1, 2, 2});
  check({x, kNone, floats({4}, {1, 1, 2, 2}), ints({1, 1, 4, 4})}, {});              // both scales and sizes
  check({x, kNone}, {});                                                               // neither
  check({x, kNone, floats({3}, {1, 2, 2})}, {});                                       // wrong length
  check({x, kNone, floats({4}, {1, 1, -2, 2})}, {});                                   // negative scale
  check({x, kNone, floats({4}, {1, 1, 0, 2})}, {});                                    // zero scale
  check({x, kNone, kNone, ints({1, 1, -3, 2})}, {});                                   // negative size
  check({x, kNone, floats({4}, {1, 1, 1e30f, 1e30f})}, {});                            // absurd output
  check({x, kNone, floats({4}, {1, 1, 2, 2})}, attrs({{"mode", std::string("bicubic")}}));
  check({x, kNone, floats({4}, {1, 1, 2, 2})}, attrs({{"coordinate_transformation_mode", std::string("corners")}}));
  check({x, kNone, floats({4}, {1, 1, 2, 2})}, attrs({{"nearest_mode", std::string("round")}}));
  check({x, kNone, floats({4}, {1, 1, 2, 2})}, attrs({{"keep_aspect_ratio_policy", std::string("fit")}}));
  check({x, kNone, floats({2}, {2, 2})}, attrs({{"axes", std::vector<int64_t>{2, 2}}}));  // duplicate axes
  check({x, kNone, floats({2}, {2, 2})}, attrs({{"axes", std::vector<int64_t>{2, 4}}}));  // axis out of range
  check({x, kNone, floats({4}, {1, 1, 2, 2})},
        attrs({{"coordinate_transformation_mode", std::string("tf_crop_and_resize")}}));  // roi missing
  check({x, floats({2}, {0, 1}), floats({4}, {1, 1, 2, 2})},
        attrs({{"coordinate_transformation_mode", std::string("tf_crop_and_resize")}}));  // roi too short
  check({HostTensor(DataType::kFLOAT, {}), kNone, floats({0}, {})}, {});             // rank 0
  HostTensor b(DataType::kBOOL, {1, 1, 2, 2});
  check({b, kNone, floats({4}, {1, 1, 2, 2})}, attrs({{"mode", std::string("linear")}}));
}

TEST(ResizeShape, ErrorsNameTheLayer) {
  TestLayer l("Resize", {iota({1, 1, 2, 2}), kNone, floats({4}, {1, 1, -2, 2})}, attrs({}));
  try {
    inferLayer(l.desc);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 't'"), std::string::npos) << e.what();
  }
}

// ---- Reference kernel vs the ONNX reference evaluator ------------------------------------------

TEST(ResizeRef, LinearHalfPixelUpsample) {
  TestLayer l("Resize", {floats({1, 1, 2, 2}, {1, 2, 3, 4}), kNone, floats({4}, {1, 1, 2, 2})},
              attrs({{"mode", std::string("linear")}}));
  expectNear(l.evaluate(), {1, 1, 4, 4},
             {1.0f, 1.25f, 1.75f, 2.0f, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f, 3.0f, 3.25f, 3.75f, 4.0f});
}

TEST(ResizeRef, CubicAlignCorners) {
  TestLayer l("Resize", {iota({1, 1, 4, 4}), kNone, floats({4}, {1, 1, 1.5f, 2})},
              attrs({{"mode", std::string("cubic")}, {"coordinate_transformation_mode", std::string("align_corners")}}));
  expectNear(l.evaluate(), {1, 1, 6, 8},
             {1.0f, 1.341107726097107f, 1.8002915382385254f, 2.3294479846954346f, 2.67055344581604f, 3.1997087001800537f,
              3.6588921546936035f, 4.0f, 3.0159995555877686f, 3.357107162475586f, 3.816290855407715f, 4.345447540283203f,
              4.686553001403809f, 5.215707778930664f, 5.674890995025635f, 6.015998840332031f, 5.992003917694092f,
              6.333111763000488f, 6.792295932769775f, 7.321454048156738f, 7.662559509277344f, 8.1917142868042f,
              8.650897026062012f, 8.992005348205566f, 8.008001327514648f, 8.349108695983887f, 8.808293342590332f,
              9.337451934814453f, 9.678557395935059f, 10.207711219787598f, 10.66689395904541f, 11.008002281188965f,
              10.983996391296387f, 11.325103759765625f, 11.78428840637207f, 12.313446998596191f, 12.654552459716797f,
              13.18370532989502f, 13.642888069152832f, 13.98399543762207f, 13.0f, 13.341107368469238f,
              13.800292015075684f, 14.329451560974121f, 14.670557022094727f, 15.19970989227295f, 15.658892631530762f,
              16.0f});
}

TEST(ResizeRef, NearestRoundPreferCeilAsymmetricSizes) {
  TestLayer l("Resize", {floats({1, 1, 2, 2}, {1, 2, 3, 4}), kNone, kNone, ints({1, 1, 3, 5})},
              attrs({{"coordinate_transformation_mode", std::string("asymmetric")},
                     {"nearest_mode", std::string("round_prefer_ceil")}}));
  expectNear(l.evaluate(), {1, 1, 3, 5}, {1, 1, 2, 2, 2, 3, 3, 4, 4, 4, 3, 3, 4, 4, 4});
}

TEST(ResizeRef, AntialiasDownsampling) {
  TestLayer lin("Resize", {iota({1, 1, 4, 4}), kNone, floats({4}, {1, 1, 0.6f, 0.6f})},
                attrs({{"mode", std::string("linear")}, {"antialias", int64_t(1)}}));
  expectNear(lin.evaluate(), {1, 1, 2, 2}, {2.875f, 4.5f, 9.375f, 11.0f});
  TestLayer cub("Resize", {iota({1, 1, 4, 4}), kNone, kNone, ints({1, 1, 3, 2})},
                attrs({{"mode", std::string("cubic")}, {"antialias", int64_t(1)}}));
  expectNear(cub.evaluate(), {1, 1, 3, 2},
             {2.110241651535034f, 4.129773139953613f, 7.490234851837158f, 9.509766578674316f, 12.870226860046387f,
              14.889758110046387f});
}

TEST(ResizeRef, CubicExcludeOutsideAndCoeff) {
  TestLayer l("Resize", {iota({1, 1, 4, 4}), kNone, floats({4}, {1, 1, 0.8f, 0.8f})},
              attrs({{"mode", std::string("cubic")}, {"cubic_coeff_a", -0.5f}, {"exclude_outside", int64_t(1)}}));
  expectNear(l.evaluate(), {1, 1, 3, 3},
             {1.3681267499923706f, 2.669501304626465f, 4.013336658477783f, 6.573625564575195f, 7.875f, 9.21883487701416f,
              11.948966026306152f, 13.250341415405273f, 14.594176292419434f});
}

TEST(ResizeRef, CubicOneDimensional) {
  TestLayer l("Resize", {floats({5}, {1, 3, 2, 8, -1}), kNone, floats({1}, {1.7f})}, attrs({{"mode", std::string("cubic")}}));
  expectNear(l.evaluate(), {8},
             {0.8052485585212708f, 1.8046448230743408f, 2.975390911102295f, 1.977100133895874f, 2.7938122749328613f,
              7.476541042327881f, 5.928264617919922f, -0.3230079412460327f});
}

TEST(ResizeRef, TfCropAndResizeExtrapolationWithAxes) {
  // axes (3, 2): roi = [start_w, start_h, end_w, end_h].
  TestLayer l("Resize", {iota({1, 1, 4, 4}), floats({4}, {0.4f, 0.6f, 1.2f, 1.7f}), kNone, ints({3, 3})},
              attrs({{"mode", std::string("linear")},
                     {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                     {"extrapolation_value", 10.f},
                     {"axes", std::vector<int64_t>{3, 2}}}));
  expectNear(l.evaluate(), {1, 1, 3, 3}, {9.4f, 10.6f, 10, 10, 10, 10, 10, 10, 10});
}

TEST(ResizeRef, HalfPixelSymmetricAndPytorchHalfPixel) {
  TestLayer a("Resize", {iota({1, 1, 4, 4}), kNone, floats({2}, {0.68f, 0.68f})},
              attrs({{"mode", std::string("linear")},
                     {"coordinate_transformation_mode", std::string("half_pixel_symmetric")},
                     {"axes", std::vector<int64_t>{2, 3}}}));
  expectNear(a.evaluate(), {1, 1, 2, 2}, {4.823529243469238f, 6.294117450714111f, 10.70588207244873f, 12.176470756530762f});
  TestLayer b("Resize", {iota({1, 1, 4, 4}), kNone, kNone, ints({1, 1, 3, 1})},
              attrs({{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string("pytorch_half_pixel")}}));
  expectNear(b.evaluate(), {1, 1, 3, 1}, {1.6666666269302368f, 7.0f, 12.333333015441895f});
}

TEST(ResizeRef, KeepAspectRatioNearest) {
  TestLayer l("Resize", {floats({1, 1, 2, 2}, {1, 2, 3, 4}), kNone, kNone, ints({7, 8})},
              attrs({{"axes", std::vector<int64_t>{2, 3}}, {"keep_aspect_ratio_policy", std::string("not_larger")}}));
  std::vector<float> want;
  for (int y = 0; y < 7; ++y)
    for (int x = 0; x < 7; ++x) want.push_back(static_cast<float>((y < 4 ? 1 : 3) + (x < 4 ? 0 : 1)));
  expectNear(l.evaluate(), {1, 1, 7, 7}, want);
}

TEST(ResizeRef, Int8LinearRoundsAndSaturates) {
  HostTensor x(DataType::kINT8, {1, 1, 2, 2});
  const int8_t xv[] = {-128, 127, 5, -7};
  std::memcpy(x.data(), xv, 4);
  TestLayer l("Resize", {x, kNone, floats({4}, {1, 1, 1.5f, 1.5f})}, attrs({{"mode", std::string("linear")}}));
  HostTensor y = l.evaluate();
  ASSERT_EQ(y.type(), DataType::kINT8);
  ASSERT_EQ(y.dims(), (Dims{1, 1, 3, 3}));
  const int8_t want[] = {-128, 0, 127, -62, -1, 60, 5, -1, -7};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(y.as<int8_t>()[i], want[i]) << i;
}

TEST(ResizeRef, NearestCopiesInt64Exactly) {
  HostTensor x(DataType::kINT64, {1, 2});
  x.as<int64_t>()[0] = (int64_t(1) << 62) + 1;
  x.as<int64_t>()[1] = -3;
  TestLayer l("Resize", {x, kNone, floats({2}, {1, 2})}, attrs({}));
  HostTensor y = l.evaluate();
  ASSERT_EQ(y.dims(), (Dims{1, 4}));
  EXPECT_EQ(y.as<int64_t>()[0], (int64_t(1) << 62) + 1);
  EXPECT_EQ(y.as<int64_t>()[1], (int64_t(1) << 62) + 1);
  EXPECT_EQ(y.as<int64_t>()[3], -3);
}

TEST(ResizeRef, UpsampleNearestMatchesOnnxExample) {
  TestLayer l("Upsample", {floats({1, 1, 2, 2}, {1, 2, 3, 4}), floats({4}, {1, 1, 2, 3})}, attrs({}));
  expectNear(l.evaluate(), {1, 1, 4, 6},
             {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  // Linear Upsample samples at x / scale (asymmetric): [1, 1.5, 2, 2] along a row.
  TestLayer lin("Upsample", {floats({1, 2}, {1, 2}), floats({2}, {1, 2})}, attrs({{"mode", std::string("linear")}}));
  expectNear(lin.evaluate(), {1, 4}, {1, 1.5f, 2, 2});
}

// ---- ONNX normalization -----------------------------------------------------------------------

TEST(ResizeNormalize, Resize10BecomesAsymmetricFloor) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {1, 1, 2, 2});
  Tensor* s = net.addConstant("s", floats({4}, {1, 1, 2, 2}));
  Layer* l = net.addLayer("Resize", {x, s}, 1, attrs({{"mode", std::string("nearest")}}));
  OpRegistry::instance().find("Resize")->normalize(net, *l, 10);
  ASSERT_EQ(l->inputs.size(), 3u);
  EXPECT_EQ(l->inputs[0], x);
  EXPECT_EQ(l->inputs[1], nullptr);
  EXPECT_EQ(l->inputs[2], s);
  EXPECT_EQ(l->attrs.getString("coordinate_transformation_mode", ""), "asymmetric");
  EXPECT_EQ(l->attrs.getString("nearest_mode", ""), "floor");
  net.inferShapes();
  EXPECT_EQ(l->outputs[0]->dims, (Dims{1, 1, 4, 4}));
}

TEST(ResizeNormalize, Upsample7ScalesAttributeBecomesInput) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {1, 1, 2, 2});
  Layer* l = net.addLayer("Upsample", {x}, 1, attrs({{"scales", std::vector<float>{1, 1, 2, 3}}}));
  OpRegistry::instance().find("Upsample")->normalize(net, *l, 7);
  ASSERT_EQ(l->inputs.size(), 2u);
  ASSERT_TRUE(l->inputs[1]->isConstant());
  EXPECT_FALSE(l->attrs.has("scales"));
  net.inferShapes();
  EXPECT_EQ(l->outputs[0]->dims, (Dims{1, 1, 4, 6}));
}

// ---- Optimized tactic vs the reference kernel -------------------------------------------------

//! Counts calls of an op's reference kernel while alive. The resize_f32_nchw_avx2 kernel runs shapes it cannot
//! run fast through the reference (from the same Kernel object), so a fast-path test that matches
//! the reference must also see no reference call, or it proves nothing about the fast path.
class ReferenceSpy {
 public:
  explicit ReferenceSpy(const std::string& op) : def_(const_cast<OpDef*>(OpRegistry::instance().find(op))) {
    real_ = def_->ref;
    calls_ = 0;
    def_->ref = [](const LayerDesc& l, const KernelIO& io) {
      ++calls_;
      real_(l, io);
    };
  }
  ~ReferenceSpy() { def_->ref = real_; }
  static int calls() { return calls_; }

 private:
  OpDef* def_;
  static inline RefFn real_ = nullptr;
  static inline int calls_ = 0;
};

//! Runs the layer's nchw_avx2 tactic (resize_f32_nchw_avx2, upsample_f32_nchw_avx2) and checks that
//! its fast path ran (no call of the reference kernel).
HostTensor runFastPath(TestLayer& layer) {
  ReferenceSpy spy(layer.desc.op);
  const std::string tactic = layer.desc.op == "Upsample" ? "upsample_f32_nchw_avx2" : "resize_f32_nchw_avx2";
  HostTensor got = runTactic(layer, tactic);
  EXPECT_EQ(ReferenceSpy::calls(), 0) << tactic << " fell back to the reference kernel";
  return got;
}

struct TacticCase {
  std::string mode, coord, nearestMode;
  Dims in;
  std::vector<float> scales;  // empty: use sizes
  std::vector<int64_t> sizes;
};

TEST(ResizeTactic, NchwMatchesReferenceOnRandomData) {
  const std::vector<TacticCase> cases = {
      {"linear", "half_pixel", "", {2, 3, 17, 23}, {1, 1, 2.f, 2.f}, {}},
      {"linear", "align_corners", "", {1, 5, 9, 31}, {}, {1, 5, 20, 13}},
      {"linear", "asymmetric", "", {1, 2, 16, 16}, {1, 1, 0.5f, 0.75f}, {}},
      {"linear", "pytorch_half_pixel", "", {1, 4, 7, 40}, {}, {1, 4, 1, 19}},
      {"linear", "half_pixel_symmetric", "", {1, 3, 10, 12}, {1, 1, 1.7f, 0.6f}, {}},
      {"nearest", "half_pixel", "round_prefer_floor", {2, 2, 5, 9}, {1, 1, 3.f, 2.f}, {}},
      {"nearest", "asymmetric", "floor", {1, 3, 33, 17}, {1, 1, 0.5f, 1.5f}, {}},
      {"nearest", "align_corners", "ceil", {1, 1, 6, 70}, {}, {1, 1, 11, 9}},
      {"nearest", "half_pixel", "round_prefer_ceil", {3, 1, 8, 8}, {}, {3, 1, 8, 8}},
  };
  uint32_t seed = 1;
  for (const TacticCase& c : cases) {
    SCOPED_TRACE(c.mode + "/" + c.coord + " " + toString(c.in));
    Attributes a = attrs({{"mode", c.mode}, {"coordinate_transformation_mode", c.coord}});
    if (!c.nearestMode.empty()) a.set("nearest_mode", c.nearestMode);
    std::vector<HostTensor> in = {randomFloats(c.in, seed++), kNone};
    if (c.scales.empty()) {
      in.push_back(kNone);
      in.push_back(ints(c.sizes));
    } else {
      in.push_back(floats({4}, c.scales));
    }
    TestLayer fast("Resize", in, a);
    ASSERT_TRUE(offersTactic(fast, "resize_f32_nchw_avx2"));
    HostTensor got = runFastPath(fast);
    TestLayer ref("Resize", in, a);
    HostTensor want = ref.evaluate();
    ASSERT_EQ(got.dims(), want.dims());
    for (int64_t i = 0; i < want.count(); ++i)
      ASSERT_NEAR(got.as<float>()[i], want.as<float>()[i], 1e-5f * std::max(1.f, std::fabs(want.as<float>()[i])))
          << "element " << i;
  }
}

TEST(ResizeTactic, UpsampleUsesNchwTactic) {
  std::vector<HostTensor> in = {randomFloats({2, 3, 5, 6}, 7), floats({4}, {1, 1, 2, 3})};
  TestLayer fast("Upsample", in, attrs({{"mode", std::string("linear")}}));
  HostTensor got = runFastPath(fast);
  TestLayer ref("Upsample", in, attrs({{"mode", std::string("linear")}}));
  HostTensor want = ref.evaluate();
  ASSERT_EQ(got.dims(), want.dims());
  for (int64_t i = 0; i < want.count(); ++i) ASSERT_NEAR(got.as<float>()[i], want.as<float>()[i], 1e-5f) << i;
}

TEST(ResizeTactic, DeclinesWhatItCannotRunFast) {
  HostTensor x = randomFloats({1, 2, 4, 4}, 3);
  TestLayer cubic("Resize", {x, kNone, floats({4}, {1, 1, 2, 2})}, attrs({{"mode", std::string("cubic")}}));
  EXPECT_FALSE(offersTactic(cubic, "resize_f32_nchw_avx2"));
  TestLayer channels("Resize", {x, kNone, floats({4}, {1, 2, 2, 2})}, attrs({}));
  EXPECT_FALSE(offersTactic(channels, "resize_f32_nchw_avx2"));
  TestLayer rank3("Resize", {randomFloats({2, 4, 4}, 4), kNone, floats({3}, {1, 2, 2})}, attrs({}));
  EXPECT_FALSE(offersTactic(rank3, "resize_f32_nchw_avx2"));
  TestLayer crop("Resize", {x, floats({8}, {0, 0, 0, 0, 1, 1, 1, 1}), floats({4}, {1, 1, 2, 2})},
                 attrs({{"coordinate_transformation_mode", std::string("tf_crop_and_resize")}}));
  EXPECT_FALSE(offersTactic(crop, "resize_f32_nchw_avx2"));
  // The reference kernel is always available as a tactic for these.
  EXPECT_FALSE(getBackend(DeviceType::kCPU, 1)->tactics(cubic.desc).empty());
}

TEST(ResizeTactic, FallsBackWhenRuntimeScalesResizeChannels) {
  // Built with unknown scales (the tactic is offered), run with scales that resize C too.
  HostTensor x = randomFloats({1, 2, 3, 3}, 5);
  TestLayer built("Resize", {x, kNone, floats({4}, {1, 2, 2, 2})}, attrs({{"mode", std::string("linear")}}));
  built.desc.inputs[2].value = HostTensor();
  EXPECT_TRUE(offersTactic(built, "resize_f32_nchw_avx2"));
  TestLayer run("Resize", {x, kNone, floats({4}, {1, 2, 2, 2})}, attrs({{"mode", std::string("linear")}}));
  HostTensor got;
  {
    ReferenceSpy spy("Resize");  // the spy sees a fallback (so runFastPath's check can fail)
    got = runTactic(run, "resize_f32_nchw_avx2", &built.desc);
    EXPECT_EQ(ReferenceSpy::calls(), 1);
  }
  TestLayer ref("Resize", {x, kNone, floats({4}, {1, 2, 2, 2})}, attrs({{"mode", std::string("linear")}}));
  HostTensor want = ref.evaluate();
  ASSERT_EQ(got.dims(), (Dims{1, 4, 6, 6}));
  for (int64_t i = 0; i < want.count(); ++i) ASSERT_FLOAT_EQ(got.as<float>()[i], want.as<float>()[i]) << i;
}

// ---- DepthToSpace / SpaceToDepth (expected values from the NumPy formulas of the spec) -------------

TEST(ResizeDepthToSpace, DcrAndCrd) {
  TestLayer dcr("DepthToSpace", {iota({1, 8, 2, 3}, 0.f)}, attrs({{"blocksize", int64_t(2)}}));
  expectNear(dcr.evaluate(), {1, 2, 4, 6},
             {0, 12, 1, 13, 2, 14, 24, 36, 25, 37, 26, 38, 3, 15, 4, 16, 5, 17, 27, 39, 28, 40, 29, 41,
              6, 18, 7, 19, 8, 20, 30, 42, 31, 43, 32, 44, 9, 21, 10, 22, 11, 23, 33, 45, 34, 46, 35, 47});
  TestLayer crd("DepthToSpace", {iota({1, 8, 2, 3}, 0.f)}, attrs({{"blocksize", int64_t(2)}, {"mode", std::string("CRD")}}));
  expectNear(crd.evaluate(), {1, 2, 4, 6},
             {0, 6, 1, 7, 2, 8, 12, 18, 13, 19, 14, 20, 3, 9, 4, 10, 5, 11, 15, 21, 16, 22, 17, 23,
              24, 30, 25, 31, 26, 32, 36, 42, 37, 43, 38, 44, 27, 33, 28, 34, 29, 35, 39, 45, 40, 46, 41, 47});
}

TEST(ResizeSpaceToDepth, DcrAndCrdInvertDepthToSpace) {
  TestLayer dcr("SpaceToDepth", {iota({1, 2, 4, 6}, 0.f)}, attrs({{"blocksize", int64_t(2)}}));
  expectNear(dcr.evaluate(), {1, 8, 2, 3},
             {0, 2, 4, 12, 14, 16, 24, 26, 28, 36, 38, 40, 1, 3, 5, 13, 15, 17, 25, 27, 29, 37, 39, 41,
              6, 8, 10, 18, 20, 22, 30, 32, 34, 42, 44, 46, 7, 9, 11, 19, 21, 23, 31, 33, 35, 43, 45, 47});
  for (const char* mode : {"DCR", "CRD"}) {
    HostTensor x = randomFloats({2, 3, 6, 4}, 11);
    TestLayer s2d("SpaceToDepth", {x}, attrs({{"blocksize", int64_t(2)}, {"mode", std::string(mode)}}));
    HostTensor depth = s2d.evaluate();
    EXPECT_EQ(depth.dims(), (Dims{2, 12, 3, 2}));
    TestLayer d2s("DepthToSpace", {depth}, attrs({{"blocksize", int64_t(2)}, {"mode", std::string(mode)}}));
    HostTensor back = d2s.evaluate();
    ASSERT_EQ(back.dims(), x.dims());
    EXPECT_EQ(std::memcmp(back.data(), x.data(), x.bytes()), 0) << mode;
  }
}

TEST(ResizeDepthToSpace, AnyElementTypeAndErrors) {
  HostTensor x(DataType::kHALF, {1, 4, 1, 1});
  for (int i = 0; i < 4; ++i) x.as<uint16_t>()[i] = static_cast<uint16_t>(0x3c00 + i);
  TestLayer h("DepthToSpace", {x}, attrs({{"blocksize", int64_t(2)}}));
  HostTensor y = h.evaluate();
  ASSERT_EQ(y.dims(), (Dims{1, 1, 2, 2}));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.as<uint16_t>()[i], 0x3c00 + i);

  auto check = [](const std::string& op, const Dims& d, Attributes a) {
    TestLayer l(op, {HostTensor(DataType::kFLOAT, d)}, std::move(a));
    EXPECT_THROW(inferLayer(l.desc), Error) << op << " " << toString(d);
  };
  check("DepthToSpace", {1, 6, 2, 2}, attrs({{"blocksize", int64_t(2)}}));  // 6 % 4
  check("DepthToSpace", {1, 4, 2}, attrs({{"blocksize", int64_t(2)}}));     // rank 3
  check("DepthToSpace", {1, 4, 2, 2}, attrs({{"blocksize", int64_t(0)}}));
  check("DepthToSpace", {1, 4, 2, 2}, attrs({}));                           // blocksize missing
  check("DepthToSpace", {1, 4, 2, 2}, attrs({{"blocksize", int64_t(2)}, {"mode", std::string("RCD")}}));
  check("SpaceToDepth", {1, 1, 3, 4}, attrs({{"blocksize", int64_t(2)}}));  // 3 % 2
  check("SpaceToDepth", {1, 1, 4, 4}, attrs({{"blocksize", int64_t(-2)}}));
}

// The GPU's sampling plan for every element type the kernel copies or filters (float16/bfloat16
// included: the plan was once refused for them), with and without a crop reaching outside.
TEST(ResizeSamplingPlan, EveryTypeAndTheCropsOutside) {
  for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16, DataType::kINT32, DataType::kUINT8, DataType::kBOOL}) {
    for (bool crop : {false, true}) {
      HostTensor x(t, {1, 1, 4, 5});
      std::memset(x.data(), 0, x.bytes());
      Attributes a = crop ? attrs({{"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                                   {"extrapolation_value", 2.5f}})
                          : attrs({});
      HostTensor roi = crop ? floats({8}, {0, 0, -0.5f, 0.2f, 1, 1, 0.8f, 1.4f}) : HostTensor();
      TestLayer l("Resize", {x, roi, floats({4}, {1, 1, 2, 2})}, a);
      inferLayer(l.desc);
      const ResizeSamplingPlan plan = resizeSamplingPlan(l.desc);
      EXPECT_EQ(plan.outDims, (Dims{1, 1, 8, 10})) << toString(t);
      EXPECT_EQ(plan.anyOutside, crop) << toString(t);
      ASSERT_EQ(plan.outside.size(), 4u);
      if (!crop) continue;
      EXPECT_EQ(plan.extrapolation, 2.5);
      uint64_t want = 0;
      if (t == DataType::kFLOAT) { const float f = 2.5f; std::memcpy(&want, &f, 4); }
      if (t == DataType::kHALF) want = floatToHalf(2.5f);
      if (t == DataType::kBF16) want = floatToBf16(2.5f);
      if (t == DataType::kINT32) want = 2;  // round half to even, as the reference stores it
      if (t == DataType::kUINT8) want = 2;
      if (t == DataType::kBOOL) want = 1;
      EXPECT_EQ(plan.extBits, want) << toString(t);
    }
  }
}
