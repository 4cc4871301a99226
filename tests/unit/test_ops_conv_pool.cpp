// Tests of the conv_pool op family: shape inference (every padding mode, errors), the reference
// kernels against the ONNX reference evaluator / onnxruntime, and every optimized CPU tactic
// against the reference kernel on random data (groups, depthwise, strides, dilations, padding,
// fused activations, residual input).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/thread_pool.h"
#include "kiln/network.h"
#include "ops/conv_geometry.h"
#include "ops/op_registry.h"
#include "poison.h"
#include "tactic_names.h"

using namespace kiln;

namespace {

// ---- Expected values ----
// Generated from the inputs pattern(shape, a, b, m) below by one-node ONNX models with the same
// attributes as each test, run by the ONNX reference evaluator (onnx 1.23) — except
// ConvTranspose (onnxruntime 1.x: the evaluator mishandles groups and output_shape), LRN and
// GlobalLpPool (NumPy from the spec: the evaluator's LRN sums over the wrong axis and it has no
// GlobalLpPool).
const std::vector<float> kConv2dExpected = {1.25f, 1.375f, 0.375f, -0.5f, -0.375f, -3.f, 0.75f, -1.375f, -2.875f, -1.f, -0.75f, 0.25f, 0.875f, 2.75f, 0.875f, -3.625f, 4.375f, 0.25f, -4.875f, 1.625f, 0.875f, -2.375f, 1.f, -0.25f, -2.75f, 0.875f, -0.125f, 1.375f, -0.25f, 3.75f, 1.125f, -3.f, 1.375f, 2.625f, -3.125f, -0.5f, -0.75f, 1.875f, 0.25f, 2.875f, 2.375f, 0.125f, 3.375f, -0.375f, 0.625f, -1.125f, 0.875f, 1.25f, -1.125f, -2.875f, 0.75f, 2.5f, -3.875f, 0.625f, 2.125f, -1.25f, 0.5f, 0.5f, -2.875f, 0.75f, 0.25f, 0.25f, 0.375f, 1.25f, 0.375f, -4.125f, 0.875f, 1.375f, -3.125f, -1.375f, 1.25f, -1.5f};  // shape [1, 6, 3, 4]
const std::vector<float> kConv1dExpected = {0.125f, 4.125f, 1.375f, -3.25f, 3.125f, 1.375f, -4.5f, 0.f, 3.125f, -1.375f, -1.375f, -0.875f, 0.125f, -3.25f, -0.875f, 2.125f};  // shape [2, 2, 4]
const std::vector<float> kConv3dExpected = {2.f, 2.125f, -2.5f, 2.5f, 1.5f, -0.875f, -2.625f, 2.375f, -3.625f, -4.5f, 2.875f, -0.75f, -1.125f, 6.75f, 1.75f, -2.125f, 7.625f, -8.375f, -2.375f, 1.75f, 1.875f, -6.875f, 8.75f, 3.75f, -4.375f, -0.875f, 8.25f, -6.625f, -2.25f, 6.f, -2.625f, 8.75f, 3.75f, -6.75f, 6.125f, 1.375f, -1.625f, -5.25f, 7.625f, -4.125f, -3.25f, 1.25f, 1.5f, -5.125f, 5.5f, 4.375f, -2.5f, 2.125f, 4.f, 1.f, -3.375f, 2.25f, -2.75f, -3.625f, -1.625f, 2.5f, -2.5f, 2.125f, 2.625f, 0.f, -1.125f, 4.875f, -9.875f, 4.25f, 3.5f, -1.625f, -6.f, 10.875f, -5.25f, -4.125f, -0.625f, 5.375f, -5.75f, 1.f, 2.625f, -1.75f, 10.875f, -5.25f, -4.875f, 6.f, 6.f, -6.875f, -1.f, 4.875f, -4.375f, -3.75f, 4.75f, -0.875f, -2.375f, 2.375f};  // shape [1, 2, 3, 3, 5]
const std::vector<float> kConvTransposeExpected = {-0.125f, -1.375f, -1.f, 0.25f, 2.375f, -2.25f, -0.5f, -1.5f, 4.25f, -2.5f, -1.375f, 4.875f, -1.5f, -2.f, -2.25f, 2.125f, 0.875f, -0.375f, -1.25f, -0.125f, -0.625f, -2.5f, -0.25f, 0.375f, -1.75f, 2.25f, 2.25f, -0.875f, -1.625f, 1.5f, 1.375f, -1.f, -0.75f, -0.75f, -0.75f, -1.f, -1.375f, 1.625f, -1.375f, -1.125f, 2.75f, -0.75f, -0.25f, -0.25f, -0.25f, -0.25f, -0.25f, -0.25f, -0.25f, -0.5f, 0.f, 3.375f, 0.125f, -1.25f, 1.625f, -1.f, -1.f, -2.25f, 3.25f, 0.75f, -1.875f, -0.375f, 2.625f, 0.75f, -1.f, -0.875f, 0.5f, -1.375f, -0.75f, 3.125f, 1.5f, -1.5f, 0.25f, 1.5f, -0.75f, -1.f, -1.5f, 0.625f, -0.625f, -1.f, 0.875f, -1.5f, -0.375f, 3.125f, 1.25f, 0.f, -1.625f, 0.5f, 0.75f, -0.375f, -0.375f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, 0.125f, -0.875f, -0.125f, 0.125f, -0.625f, 0.5f, 0.25f, -0.5f, -2.f, 0.f, 4.125f, -1.f, -1.25f, 0.75f, -0.25f, -1.5f, -0.25f, -0.125f, -0.75f, 0.25f, 0.125f, -0.125f, -2.375f, -0.25f, 7.25f, -1.25f, -3.625f, 0.5f, 0.5f, -2.125f, -0.375f, 3.75f, 0.5f, -1.375f, 0.f, 0.25f, -1.25f, -1.25f, -0.625f, 1.375f, -1.5f, -0.125f, 0.125f, -0.125f, -0.125f, -0.125f, -0.125f, -0.125f, -0.125f, -0.125f, 1.f, -0.875f, -0.625f, 3.25f, -0.625f, -0.875f, 1.f, 2.375f, 0.f, -1.f, -1.375f, -1.f, 0.f, 1.625f, 1.375f, -0.875f, -0.625f, 3.25f, -0.625f, -0.875f, 0.625f, 3.125f, 0.f, -3.75f, 2.75f, 0.375f, 0.f, 0.875f, 1.75f, -0.875f, -2.f, -0.875f, 2.125f, -0.875f, 0.25f, 0.875f, 2.625f, -2.f, -1.75f, 2.875f, 0.75f, 0.125f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f, 0.25f};  // shape [1, 4, 7, 7]
const std::vector<float> kConvTransposeOutShapeExpected = {0.f, -2.875f, 0.f, 1.875f, 0.f, -3.75f, 0.f, 3.25f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 2.f, 0.f, -4.5f, 0.f, 2.5f, 0.f, 1.5f, 0.f, 0.f, 1.875f, 0.f, -4.125f, 0.f, 2.625f, 0.f, 1.5f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, -3.125f, 0.f, 2.875f, 0.f, 3.f, 0.f, -3.25f, 0.f, 0.f, -3.f, 0.f, 2.25f, 0.f, 2.125f, 0.f, -4.375f, 0.f};  // shape [1, 1, 7, 9]
const std::vector<float> kMaxPoolExpected = {0.625f, 0.875f, 0.75f, 1.f, 0.75f, 0.875f, 0.875f, 1.f, 0.75f, 1.f, 0.875f, 0.875f, 0.875f, 0.875f, 1.f, 1.f, 1.f, 1.f, 0.875f, 0.625f, 1.f, 1.f, 1.f, 0.625f};  // shape [1, 2, 3, 4]
const std::vector<int64_t> kMaxPoolIndicesExpected = {6, 13, 30, 37, 9, 13, 33, 37, 9, 16, 33, 33, 48, 48, 72, 72, 51, 51, 68, 81, 51, 51, 71, 81};  // shape [1, 2, 3, 4]
const std::vector<float> kAvgPoolIncludePadExpected = {-0.208333328f, 0.145833328f, -0.166666672f, 0.229166672f, -0.104166664f, 0.104166664f, -0.1875f, 0.229166672f, -0.0625f, 0.1875f, -0.104166664f, -0.0416666679f, 0.15625f, -0.0625f, -0.03125f, 0.f, -0.125f, -0.0416666679f, 0.f, 0.0416666679f, 0.020833334f, 0.f, 0.0625f, -0.229166672f, 0.0625f, 0.0833333358f, 0.145833328f, -0.145833328f, 0.21875f, 0.0625f, 0.09375f, 0.125f};  // shape [1, 2, 4, 4]
const std::vector<float> kAvgPoolDilatedExpected = {-0.75f, -0.1875f, -0.125f, -0.625f, 0.3125f, -0.1875f, -0.125f, 0.4375f, 0.f, 0.03125f, 0.09375f, 0.125f, -0.3125f, -0.28125f, -0.21875f, -0.1875f, 0.4375f, -0.0625f, 0.f, 0.5625f, -0.625f, -0.0625f, 0.f, -0.5f, -0.5f, 0.0625f, 0.125f, -0.375f, 0.5625f, 0.0625f, 0.125f, 0.6875f, 0.25f, 0.28125f, -0.1875f, -0.6875f, -0.0625f, -0.03125f, 0.03125f, 0.0625f, 0.6875f, 0.1875f, -0.28125f, -0.25f, -0.375f, 0.1875f, 0.25f, -0.25f};  // shape [1, 2, 6, 4]
const std::vector<float> kLpPoolExpected = {1.1891712f, 1.13012064f, 1.13012064f, 1.1891712f, 1.06759381f, 1.1642524f, 1.33016551f, 0.91947031f, 0.78954494f, 1.27930748f, 1.10723114f, 1.04958415f, 1.06759381f, 1.27930748f, 1.15602922f, 1.22708237f, 1.1891712f, 1.1642524f, 1.31415141f, 1.09106481f, 0.91947031f, 1.13012064f, 1.22143555f, 0.825481832f};  // shape [1, 2, 3, 4]
const std::vector<float> kLrnExpected = {-0.733275592f, 0.4758012f, 0.0944131464f, -0.277572513f, -0.647669196f, 0.566478848f, 0.179177329f, -0.179177329f, -0.557788551f, 0.647669196f, 0.27345255f, -0.0889519677f, -0.46438098f, 0.732593238f, 0.369049877f, 0.f, -0.369049877f, -0.732593238f, 0.46438098f, 0.0889519677f, -0.27345255f, -0.647669196f, 0.557788551f, 0.179177329f, -0.190320477f, -0.566478848f, 0.647669196f, 0.277572513f, -0.0944131464f, -0.4758012f};  // shape [1, 5, 2, 3]
const std::vector<float> kGlobalLpPoolExpected = {1.69558251f, 1.26861143f, 1.70018387f, 1.39194107f, 1.39194107f};  // shape [1, 5, 1, 1]

//! The generator's deterministic inputs: ((i * a) % m - m / 2) / b, exact in float.
HostTensor pattern(const Dims& d, int64_t a, float b, int64_t m) {
  HostTensor t(DataType::kFLOAT, d);
  for (int64_t i = 0; i < t.count(); ++i) t.as<float>()[i] = static_cast<float>((i * a) % m - m / 2) / b;
  return t;
}

HostTensor randomTensor(const Dims& d, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  HostTensor t(DataType::kFLOAT, d);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.count(); ++i) t.as<float>()[i] = u(rng);
  return t;
}

//! An input of a test layer: its value, whether it is a build-time constant (weights), or absent.
struct Input {
  HostTensor value;
  bool constant = false;
  bool present = true;
};
Input data(HostTensor v) { return Input{std::move(v), false, true}; }
Input weights(HostTensor v) { return Input{std::move(v), true, true}; }
Input absent() { return Input{HostTensor(), false, false}; }

//! A layer description as the builder would pass it: constants carry their values.
LayerDesc describe(const std::string& op, const Attributes& attrs, const std::vector<Input>& in, size_t outputs = 1) {
  LayerDesc d;
  d.name = "test_" + op;
  d.op = op;
  d.attrs = &attrs;
  for (const Input& i : in) {
    TensorDesc t;
    if (i.present) {
      t.type = i.value.type();
      t.dims = i.value.dims();
      if (i.constant) t.value = i.value;
    }
    d.inputs.push_back(t);
    d.inputPresent.push_back(i.present);
  }
  d.outputs.resize(outputs);
  inferLayer(d);
  return d;
}

//! Shape inference only: inputs given by type and dims.
LayerDesc inferDims(const std::string& op, const Attributes& attrs, const std::vector<Dims>& dims,
                    DataType type = DataType::kFLOAT, size_t outputs = 1) {
  LayerDesc d;
  d.name = "shape_" + op;
  d.op = op;
  d.attrs = &attrs;
  for (const Dims& x : dims) {
    d.inputs.push_back(TensorDesc{type, x, HostTensor()});
    d.inputPresent.push_back(true);
  }
  d.outputs.resize(outputs);
  inferLayer(d);
  return d;
}

ThreadPool* testPool() {
  static std::shared_ptr<Backend> cpu = getBackend(DeviceType::kCPU, 2);
  return cpu->pool();
}

//! Runs one tactic through create -> reshape -> execute; returns the outputs.
std::vector<HostTensor> run(const Tactic& tactic, const LayerDesc& desc, const std::vector<Input>& in) {
  std::unique_ptr<Kernel> kernel = tactic.create(desc);
  std::unique_ptr<KernelState> state;
  size_t wsBytes = kernel->reshape(desc, state);
  HostTensor ws(DataType::kUINT8, {static_cast<int64_t>(wsBytes)});
  KernelIO io;
  for (const Input& i : in) {
    TensorView v;
    if (i.present) v = TensorView{const_cast<void*>(i.value.data()), i.value.type(), i.value.dims(), i.value.count()};
    io.in.push_back(v);
  }
  std::vector<HostTensor> outs;
  for (const TensorDesc& o : desc.outputs) {
    // Poison the outputs so a kernel that leaves elements unwritten is caught.
    HostTensor t = kiln::test::poisoned(o.type, o.dims);
    outs.push_back(t);
  }
  for (HostTensor& t : outs) io.out.push_back(TensorView{t.data(), t.type(), t.dims(), t.count()});
  io.workspace = ws.data();
  io.workspaceSize = wsBytes;
  io.pool = testPool();
  kernel->execute(io, state.get());
  return outs;
}

std::vector<HostTensor> runReference(const LayerDesc& desc, const std::vector<Input>& in) {
  return run(referenceTactic(desc.op), desc, in);
}

::testing::AssertionResult near(const HostTensor& got, const std::vector<float>& want, float tol) {
  if (got.count() != static_cast<int64_t>(want.size()))
    return ::testing::AssertionFailure() << "size " << got.count() << " != expected " << want.size();
  int bad = 0;
  std::string msg;
  for (size_t i = 0; i < want.size(); ++i) {
    float g = got.as<float>()[i], w = want[i];
    if (!(std::fabs(g - w) <= tol * (1.f + std::fabs(w)))) {
      if (++bad <= 5) msg += " [" + std::to_string(i) + "] got " + std::to_string(g) + " want " + std::to_string(w) + ";";
    }
  }
  if (bad) return ::testing::AssertionFailure() << bad << " mismatches:" << msg;
  return ::testing::AssertionSuccess();
}

std::vector<float> values(const HostTensor& t) { return std::vector<float>(t.as<float>(), t.as<float>() + t.count()); }

//! Every tactic the CPU backend offers for the layer must match the reference kernel. Returns the
//! names of the tactics that were compared.
std::vector<std::string> expectTacticsMatchReference(const std::string& op, const Attributes& attrs,
                                                     const std::vector<Input>& in, float tol = 2e-4f) {
  LayerDesc desc = describe(op, attrs, in);
  std::vector<float> want = values(runReference(desc, in)[0]);
  std::vector<std::string> names;
  for (const Tactic& t : getBackend(DeviceType::kCPU, 2)->tactics(desc)) {
    names.push_back(t.name);
    EXPECT_TRUE(near(run(t, desc, in)[0], want, tol)) << op << " tactic " << t.name;
  }
  return names;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

template <typename Fn>
void expectError(Fn&& fn, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "expected an error mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

template <typename Fn>
void expectUnsupported(Fn&& fn) {
  EXPECT_THROW(fn(), UnsupportedError);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Shape inference
// ---------------------------------------------------------------------------------------------

TEST(ConvPoolShape, ConvExplicitPadsStridesDilations) {
  Attributes a;
  a.set("strides", std::vector<int64_t>{2, 3});
  a.set("pads", std::vector<int64_t>{1, 0, 2, 1});
  a.set("dilations", std::vector<int64_t>{2, 1});
  LayerDesc d = inferDims("Conv", a, {{1, 3, 10, 11}, {8, 3, 3, 2}, {8}});
  // H: floor((10 + 1 + 2 - 5) / 2) + 1 = 5; W: floor((11 + 0 + 1 - 2) / 3) + 1 = 4
  EXPECT_EQ(d.outputs[0].dims, (Dims{1, 8, 5, 4}));
  EXPECT_EQ(d.outputs[0].type, DataType::kFLOAT);
}

TEST(ConvPoolShape, ConvAutoPadModes) {
  for (auto [mode, expectedW] : std::vector<std::pair<std::string, int64_t>>{
           {"SAME_UPPER", 4}, {"SAME_LOWER", 4}, {"VALID", 2}, {"NOTSET", 2}}) {
    Attributes a;
    a.set("auto_pad", mode);
    a.set("strides", std::vector<int64_t>{1, 2});
    LayerDesc d = inferDims("Conv", a, {{2, 4, 5, 7}, {6, 4, 1, 4}});
    int64_t expectedH = 5;  // kernel 1, stride 1: every mode keeps 5
    EXPECT_EQ(d.outputs[0].dims, (Dims{2, 6, expectedH, expectedW})) << mode;
  }
  // SAME pads: total = (out - 1) * s + k - in = 3 * 2 + 4 - 7 = 3; the odd one goes last for
  // SAME_UPPER and first for SAME_LOWER.
  for (auto [mode, begin, end] : std::vector<std::tuple<std::string, int64_t, int64_t>>{{"SAME_UPPER", 1, 2}, {"SAME_LOWER", 2, 1}}) {
    Attributes a;
    a.set("auto_pad", mode);
    a.set("strides", std::vector<int64_t>{2});
    LayerDesc d = inferDims("Conv", a, {{1, 1, 7}, {1, 1, 4}});
    Window w = convWindow(d, {1, 1, 7}, {4});
    EXPECT_EQ(w.padBegin[0], begin) << mode;
    EXPECT_EQ(w.padEnd[0], end) << mode;
    EXPECT_EQ(w.out[0], 4) << mode;
  }
}

TEST(ConvPoolShape, ConvDynamicDimsAndRanks) {
  Attributes a;
  a.set("auto_pad", std::string("SAME_UPPER"));
  a.set("strides", std::vector<int64_t>{2, 2});
  EXPECT_EQ(inferDims("Conv", a, {{-1, 3, -1, 32}, {8, 3, 3, 3}}).outputs[0].dims, (Dims{-1, 8, -1, 16}));
  Attributes b;
  b.set("group", int64_t{2});
  EXPECT_EQ(inferDims("Conv", b, {{1, 4, 9}, {6, 2, 3}}).outputs[0].dims, (Dims{1, 6, 7}));                 // 1D
  EXPECT_EQ(inferDims("Conv", b, {{1, 4, 5, 6, 7}, {6, 2, 3, 3, 3}}).outputs[0].dims, (Dims{1, 6, 3, 4, 5}));  // 3D
  // The residual (4th input) must have the output's shape.
  EXPECT_EQ(inferDims("Conv", Attributes(), {{1, 2, 4, 4}, {3, 2, 1, 1}, {3}, {1, 3, 4, 4}}).outputs[0].dims, (Dims{1, 3, 4, 4}));
}

TEST(ConvPoolShape, ConvRejectsBadInput) {
  Attributes none;
  expectError([&] { inferDims("Conv", none, {{1, 3, 8, 8}, {4, 2, 3, 3}}); }, "input channels");
  expectError([&] { inferDims("Conv", none, {{1, 3, 8, 8}, {4, 3, 3}}); }, "rank");
  expectError([&] { inferDims("Conv", none, {{3, 8}, {4, 3, 3}}); }, "rank");
  expectError([&] { inferDims("Conv", none, {{1, 3, 2, 2}, {4, 3, 3, 3}}); }, "does not fit");
  expectError([&] { inferDims("Conv", none, {{1, 3, 8, 8}, {4, 3, 3, 3}, {5}}); }, "bias");
  expectError([&] { inferDims("Conv", none, {{1, 3, 8, 8}, {4, 3, 3, 3}, {4}, {1, 4, 8, 8}}); }, "residual");
  expectError([&] { inferDims("Conv", none, {{1, 3, 8, 8}}); }, "inputs");
  Attributes g;
  g.set("group", int64_t{2});
  expectError([&] { inferDims("Conv", g, {{1, 3, 8, 8}, {4, 1, 3, 3}}); }, "group");
  Attributes g0;
  g0.set("group", int64_t{0});
  expectError([&] { inferDims("Conv", g0, {{1, 3, 8, 8}, {4, 3, 3, 3}}); }, "group");
  Attributes pad;
  pad.set("auto_pad", std::string("SAME"));
  expectError([&] { inferDims("Conv", pad, {{1, 3, 8, 8}, {4, 3, 3, 3}}); }, "auto_pad");
  Attributes stride0;
  stride0.set("strides", std::vector<int64_t>{0, 1});
  expectError([&] { inferDims("Conv", stride0, {{1, 3, 8, 8}, {4, 3, 3, 3}}); }, "strides");
  Attributes negPad;
  negPad.set("pads", std::vector<int64_t>{0, -1, 0, 0});
  expectError([&] { inferDims("Conv", negPad, {{1, 3, 8, 8}, {4, 3, 3, 3}}); }, "pads");
  Attributes shortPads;
  shortPads.set("pads", std::vector<int64_t>{1, 1});
  expectError([&] { inferDims("Conv", shortPads, {{1, 3, 8, 8}, {4, 3, 3, 3}}); }, "pads");
  Attributes hugeDilation;
  hugeDilation.set("dilations", std::vector<int64_t>{int64_t(1) << 40, 1});
  expectError([&] { inferDims("Conv", hugeDilation, {{1, 3, 8, 8}, {4, 3, 3, 3}}); }, "dilations");
  Attributes ks;
  ks.set("kernel_shape", std::vector<int64_t>{3, 2});
  expectError([&] { inferDims("Conv", ks, {{1, 3, 8, 8}, {4, 3, 3, 3}}); }, "kernel_shape");
  expectUnsupported([&] { inferDims("Conv", none, {{1, 3, 8, 8}, {4, 3, 3, 3}}, DataType::kINT32); });
  expectUnsupported([&] { inferDims("Conv", none, {{1, 1, 2, 2, 2, 2}, {1, 1, 1, 1, 1, 1}}); });
}

TEST(ConvPoolShape, ConvTransposeModes) {
  Attributes a;
  a.set("strides", std::vector<int64_t>{2, 3});
  a.set("pads", std::vector<int64_t>{1, 0, 0, 1});
  a.set("output_padding", std::vector<int64_t>{1, 2});
  a.set("group", int64_t{2});
  // out = s * (in - 1) + output_padding + k - pads: H 2*4+1+3-1 = 11, W 3*3+2+2-1 = 12
  EXPECT_EQ(inferDims("ConvTranspose", a, {{1, 4, 5, 4}, {4, 3, 3, 2}}).outputs[0].dims, (Dims{1, 6, 11, 12}));
  Attributes same;
  same.set("auto_pad", std::string("SAME_UPPER"));
  same.set("strides", std::vector<int64_t>{2, 2});
  EXPECT_EQ(inferDims("ConvTranspose", same, {{1, 2, 5, 6}, {2, 3, 3, 3}}).outputs[0].dims, (Dims{1, 3, 10, 12}));
  Attributes shape;
  shape.set("output_shape", std::vector<int64_t>{9, 13});
  shape.set("strides", std::vector<int64_t>{2, 3});
  EXPECT_EQ(inferDims("ConvTranspose", shape, {{1, 2, 4, 4}, {2, 1, 3, 3}}).outputs[0].dims, (Dims{1, 1, 9, 13}));
  Attributes badOutPad;
  badOutPad.set("output_padding", std::vector<int64_t>{1, 0});
  expectError([&] { inferDims("ConvTranspose", badOutPad, {{1, 2, 4, 4}, {2, 1, 3, 3}}); }, "output_padding");
  expectError([&] { inferDims("ConvTranspose", Attributes(), {{1, 2, 4, 4}, {3, 1, 3, 3}}); }, "input channels");
}

TEST(ConvPoolShape, PoolCeilModeAndOutputs) {
  Attributes a;
  a.set("kernel_shape", std::vector<int64_t>{2, 1});
  a.set("strides", std::vector<int64_t>{2, 2});
  a.set("pads", std::vector<int64_t>{0, 0, 0, 1});
  EXPECT_EQ(inferDims("MaxPool", a, {{1, 3, 7, 3}}).outputs[0].dims, (Dims{1, 3, 3, 2}));
  a.set("ceil_mode", int64_t{1});
  // H: ceil((7 - 2) / 2) + 1 = 4. W: ceil((3 + 1 - 1) / 2) + 1 = 3, but the last window would
  // start in the end padding ((3 - 1) * 2 >= 3 + 0), so 2.
  LayerDesc d = inferDims("MaxPool", a, {{1, 3, 7, 3}}, DataType::kFLOAT, 2);
  EXPECT_EQ(d.outputs[0].dims, (Dims{1, 3, 4, 2}));
  EXPECT_EQ(d.outputs[1].dims, (Dims{1, 3, 4, 2}));
  EXPECT_EQ(d.outputs[1].type, DataType::kINT64);
  EXPECT_EQ(inferDims("AveragePool", a, {{1, 3, 7, 3}}).outputs[0].dims, (Dims{1, 3, 4, 2}));
  Attributes same;
  same.set("kernel_shape", std::vector<int64_t>{3, 3});
  same.set("strides", std::vector<int64_t>{2, 2});
  same.set("auto_pad", std::string("SAME_LOWER"));
  EXPECT_EQ(inferDims("LpPool", same, {{2, 3, 9, 10}}).outputs[0].dims, (Dims{2, 3, 5, 5}));
  same.set("auto_pad", std::string("VALID"));
  EXPECT_EQ(inferDims("MaxPool", same, {{2, 3, 9, 10}}, DataType::kUINT8).outputs[0].dims, (Dims{2, 3, 4, 4}));
  EXPECT_EQ(inferDims("GlobalAveragePool", Attributes(), {{2, 5, 3, 4, 6}}).outputs[0].dims, (Dims{2, 5, 1, 1, 1}));
  EXPECT_EQ(inferDims("GlobalMaxPool", Attributes(), {{-1, 5, -1}}).outputs[0].dims, (Dims{-1, 5, 1}));
  Attributes lrn;
  lrn.set("size", int64_t{3});
  EXPECT_EQ(inferDims("LRN", lrn, {{1, 5, 2, 3}}).outputs[0].dims, (Dims{1, 5, 2, 3}));
}

TEST(ConvPoolShape, PoolRejectsBadInput) {
  expectError([&] { inferDims("MaxPool", Attributes(), {{1, 3, 8, 8}}); }, "kernel_shape");
  Attributes k;
  k.set("kernel_shape", std::vector<int64_t>{3});
  expectError([&] { inferDims("MaxPool", k, {{1, 3, 8, 8}}); }, "kernel");
  Attributes big;
  big.set("kernel_shape", std::vector<int64_t>{9, 9});
  expectError([&] { inferDims("AveragePool", big, {{1, 3, 8, 8}}); }, "does not fit");
  Attributes so;
  so.set("kernel_shape", std::vector<int64_t>{2, 2});
  so.set("storage_order", int64_t{2});
  expectError([&] { inferDims("MaxPool", so, {{1, 3, 8, 8}}); }, "storage_order");
  Attributes cm;
  cm.set("kernel_shape", std::vector<int64_t>{2, 2});
  cm.set("ceil_mode", int64_t{3});
  expectError([&] { inferDims("AveragePool", cm, {{1, 3, 8, 8}}); }, "ceil_mode");
  Attributes lp;
  lp.set("kernel_shape", std::vector<int64_t>{2, 2});
  lp.set("p", int64_t{0});
  expectError([&] { inferDims("LpPool", lp, {{1, 3, 8, 8}}); }, "p must be");
  expectUnsupported([&] { inferDims("AveragePool", so, {{1, 3, 8, 8}}, DataType::kINT32); });
  expectError([&] { inferDims("GlobalAveragePool", Attributes(), {{3, 8}}); }, "rank");
  expectError([&] { inferDims("LRN", Attributes(), {{1, 3, 8, 8}}); }, "size");
}

// ---------------------------------------------------------------------------------------------
// Reference kernels against the ONNX reference evaluator / onnxruntime
// ---------------------------------------------------------------------------------------------

TEST(ConvPoolReference, Conv2dGroupedStridedDilatedPadded) {
  Attributes a;
  a.set("group", int64_t{2});
  a.set("strides", std::vector<int64_t>{2, 1});
  a.set("pads", std::vector<int64_t>{1, 0, 1, 2});
  a.set("dilations", std::vector<int64_t>{1, 2});
  std::vector<Input> in{data(pattern({1, 4, 5, 6}, 7, 4, 11)), weights(pattern({6, 2, 3, 3}, 5, 2, 7)),
                        weights(pattern({6}, 3, 8, 5))};
  LayerDesc d = describe("Conv", a, in);
  EXPECT_EQ(d.outputs[0].dims, (Dims{1, 6, 3, 4}));
  EXPECT_TRUE(near(runReference(d, in)[0], kConv2dExpected, 1e-6f));
}

TEST(ConvPoolReference, ConvFusedResidualAndActivation) {
  // Y = Clip(conv + B + R, -1, 1): the expected conv result comes from the ONNX reference; the
  // residual and the clip are applied here.
  Attributes a;
  a.set("group", int64_t{2});
  a.set("strides", std::vector<int64_t>{2, 1});
  a.set("pads", std::vector<int64_t>{1, 0, 1, 2});
  a.set("dilations", std::vector<int64_t>{1, 2});
  a.set("kiln_activation", std::string("Clip"));
  a.set("kiln_act_alpha", -1.f);
  a.set("kiln_act_beta", 1.f);
  HostTensor r = pattern({1, 6, 3, 4}, 3, 4, 9);
  std::vector<Input> in{data(pattern({1, 4, 5, 6}, 7, 4, 11)), weights(pattern({6, 2, 3, 3}, 5, 2, 7)),
                        weights(pattern({6}, 3, 8, 5)), data(r)};
  std::vector<float> want(kConv2dExpected.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::min(1.f, std::max(-1.f, kConv2dExpected[i] + r.as<float>()[i]));
  EXPECT_TRUE(near(runReference(describe("Conv", a, in), in)[0], want, 1e-6f));
}

TEST(ConvPoolReference, Conv1dSameLower) {
  Attributes a;
  a.set("auto_pad", std::string("SAME_LOWER"));
  a.set("strides", std::vector<int64_t>{2});
  std::vector<Input> in{data(pattern({2, 3, 7}, 7, 4, 11)), weights(pattern({2, 3, 4}, 5, 2, 7))};
  EXPECT_TRUE(near(runReference(describe("Conv", a, in), in)[0], kConv1dExpected, 1e-6f));
}

TEST(ConvPoolReference, Conv3dPadded) {
  Attributes a;
  a.set("pads", std::vector<int64_t>{1, 0, 1, 0, 1, 1});
  std::vector<Input> in{data(pattern({1, 2, 3, 4, 4}, 7, 4, 11)), weights(pattern({2, 2, 2, 3, 2}, 5, 2, 7))};
  EXPECT_TRUE(near(runReference(describe("Conv", a, in), in)[0], kConv3dExpected, 1e-6f));
}

TEST(ConvPoolReference, ConvTransposeGroupedOutputPadding) {
  Attributes a;
  a.set("group", int64_t{2});
  a.set("strides", std::vector<int64_t>{2, 2});
  a.set("pads", std::vector<int64_t>{1, 0, 0, 1});
  a.set("output_padding", std::vector<int64_t>{1, 1});
  std::vector<Input> in{data(pattern({1, 4, 3, 3}, 7, 4, 11)), weights(pattern({4, 2, 3, 3}, 5, 2, 7)),
                        weights(pattern({4}, 3, 8, 5))};
  EXPECT_TRUE(near(runReference(describe("ConvTranspose", a, in), in)[0], kConvTransposeExpected, 1e-6f));
}

TEST(ConvPoolReference, ConvTransposeOutputShape) {
  Attributes a;
  a.set("strides", std::vector<int64_t>{3, 2});
  a.set("dilations", std::vector<int64_t>{1, 2});
  a.set("output_shape", std::vector<int64_t>{7, 9});
  std::vector<Input> in{data(pattern({1, 2, 3, 4}, 7, 4, 11)), weights(pattern({2, 1, 2, 3}, 5, 2, 7))};
  EXPECT_TRUE(near(runReference(describe("ConvTranspose", a, in), in)[0], kConvTransposeOutShapeExpected, 1e-6f));
}

TEST(ConvPoolReference, MaxPoolCeilModeIndicesColumnMajor) {
  Attributes a;
  a.set("kernel_shape", std::vector<int64_t>{3, 3});
  a.set("strides", std::vector<int64_t>{2, 2});
  a.set("pads", std::vector<int64_t>{1, 1, 0, 0});
  a.set("ceil_mode", int64_t{1});
  a.set("storage_order", int64_t{1});
  std::vector<Input> in{data(pattern({1, 2, 6, 7}, 13, 8, 17))};
  auto out = runReference(describe("MaxPool", a, in, 2), in);
  EXPECT_TRUE(near(out[0], kMaxPoolExpected, 1e-6f));
  ASSERT_EQ(out[1].count(), static_cast<int64_t>(kMaxPoolIndicesExpected.size()));
  for (size_t i = 0; i < kMaxPoolIndicesExpected.size(); ++i) EXPECT_EQ(out[1].as<int64_t>()[i], kMaxPoolIndicesExpected[i]) << i;
}

TEST(ConvPoolReference, AveragePoolIncludePadCeilMode) {
  Attributes a;
  a.set("kernel_shape", std::vector<int64_t>{3, 2});
  a.set("strides", std::vector<int64_t>{2, 2});
  a.set("pads", std::vector<int64_t>{1, 1, 1, 0});
  a.set("ceil_mode", int64_t{1});
  a.set("count_include_pad", int64_t{1});
  std::vector<Input> in{data(pattern({1, 2, 6, 7}, 13, 8, 17))};
  EXPECT_TRUE(near(runReference(describe("AveragePool", a, in), in)[0], kAvgPoolIncludePadExpected, 1e-6f));
}

TEST(ConvPoolReference, AveragePoolDilated) {
  Attributes a;
  a.set("kernel_shape", std::vector<int64_t>{2, 2});
  a.set("strides", std::vector<int64_t>{1, 2});
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  a.set("dilations", std::vector<int64_t>{2, 2});
  std::vector<Input> in{data(pattern({1, 2, 6, 7}, 13, 8, 17))};
  EXPECT_TRUE(near(runReference(describe("AveragePool", a, in), in)[0], kAvgPoolDilatedExpected, 1e-6f));
}

TEST(ConvPoolReference, LpPoolLrnGlobalLpPool) {
  Attributes lp;
  lp.set("kernel_shape", std::vector<int64_t>{2, 3});
  lp.set("strides", std::vector<int64_t>{2, 2});
  lp.set("pads", std::vector<int64_t>{0, 1, 0, 1});
  lp.set("p", int64_t{3});
  std::vector<Input> in{data(pattern({1, 2, 6, 7}, 13, 8, 17))};
  EXPECT_TRUE(near(runReference(describe("LpPool", lp, in), in)[0], kLpPoolExpected, 1e-5f));
  Attributes lrn;
  lrn.set("size", int64_t{3});
  lrn.set("alpha", 0.5f);
  lrn.set("beta", 0.6f);
  lrn.set("bias", 1.5f);
  std::vector<Input> in5{data(pattern({1, 5, 2, 3}, 13, 8, 17))};
  EXPECT_TRUE(near(runReference(describe("LRN", lrn, in5), in5)[0], kLrnExpected, 1e-5f));
  Attributes glp;
  glp.set("p", int64_t{2});
  EXPECT_TRUE(near(runReference(describe("GlobalLpPool", glp, in5), in5)[0], kGlobalLpPoolExpected, 1e-5f));
}

// ---------------------------------------------------------------------------------------------
// Optimized tactics against the reference kernel, random data
// ---------------------------------------------------------------------------------------------

namespace {

struct ConvCase {
  std::string label;
  Dims x, w;
  std::vector<int64_t> strides, pads, dilations;
  int64_t group = 1;
  std::string autoPad;
  bool bias = true, residual = false;
  std::string act;
  float alpha = 0.f, beta = 0.f;
};

std::vector<std::string> checkConv(const ConvCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  Attributes a;
  if (!c.strides.empty()) a.set("strides", c.strides);
  if (!c.pads.empty()) a.set("pads", c.pads);
  if (!c.dilations.empty()) a.set("dilations", c.dilations);
  if (c.group != 1) a.set("group", c.group);
  if (!c.autoPad.empty()) a.set("auto_pad", c.autoPad);
  if (!c.act.empty()) {
    a.set("kiln_activation", c.act);
    a.set("kiln_act_alpha", c.alpha);
    a.set("kiln_act_beta", c.beta);
  }
  std::vector<Input> in{data(randomTensor(c.x, rng)), weights(randomTensor(c.w, rng))};
  in.push_back(c.bias ? weights(randomTensor({c.w[0]}, rng)) : absent());
  if (c.residual) {
    Dims out = describe("Conv", a, in).outputs[0].dims;
    in.push_back(data(randomTensor(out, rng)));
  }
  SCOPED_TRACE(c.label);
  return expectTacticsMatchReference("Conv", a, in);
}

}  // namespace

TEST(ConvPoolTactics, ConvShapesMatchReference) {
  std::vector<ConvCase> cases = {
      {"3x3 s1 p1 relu", {1, 16, 13, 17}, {24, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 1, "", true, false, "Relu"},
      {"1x1 pointwise residual relu6", {1, 32, 9, 11}, {16, 32, 1, 1}, {}, {}, {}, 1, "", true, true, "Clip", 0.f, 6.f},
      {"3x3 s2 asymmetric pads group 4", {2, 8, 15, 12}, {12, 2, 3, 3}, {2, 2}, {0, 1, 1, 0}, {}, 4, "", true, false, ""},
      {"dilated SAME_UPPER hardsigmoid", {1, 6, 14, 10}, {5, 6, 3, 2}, {1, 1}, {}, {2, 3}, 1, "SAME_UPPER", false, false,
       "HardSigmoid", 0.2f, 0.5f},
      {"7x7 s2 p3 stem", {1, 3, 32, 30}, {8, 3, 7, 7}, {2, 2}, {3, 3, 3, 3}, {}, 1, "", true, false, "Relu"},
      {"1x1 s2 downsample residual", {1, 16, 10, 10}, {8, 16, 1, 1}, {2, 2}, {}, {}, 1, "", false, true, "Relu"},
      {"SAME_LOWER stride 3", {1, 4, 11, 13}, {4, 4, 4, 4}, {3, 3}, {}, {}, 1, "SAME_LOWER", true, false, ""},
      {"1D conv", {2, 5, 19}, {7, 5, 3}, {2}, {1, 2}, {}, 1, "", true, true, "LeakyRelu", 0.1f},
      {"3D conv", {1, 3, 5, 6, 7}, {4, 3, 3, 2, 3}, {1, 2, 1}, {1, 0, 1, 1, 1, 0}, {}, 1, "", true, false, "Tanh"},
      {"depthwise via generic path 5x5", {1, 6, 9, 9}, {6, 1, 5, 5}, {1, 1}, {2, 2, 2, 2}, {}, 6, "", true, false, ""},
      {"channel multiplier 2", {1, 4, 8, 8}, {8, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 4, "", true, false, ""},
  };
  uint32_t seed = 1;
  for (const ConvCase& c : cases) {
    std::vector<std::string> names = checkConv(c, seed++);
    EXPECT_TRUE(contains(names, "conv_f32_im2col_gemm")) << c.label;
  }
  // 1x1 convolutions (GEMM without im2col): odd column/row counts, batch 2, with/without bias.
  for (int64_t hw : {1, 5, 16, 17, 40})
    for (int64_t m : {1, 6, 7, 13}) {
      ConvCase c{"pointwise " + std::to_string(m) + "x" + std::to_string(hw), {2, 24, 1, hw}, {m, 24, 1, 1}, {}, {}, {}, 1,
                 "", hw % 2 == 1, hw % 5 == 0, m % 2 ? "Relu" : "Sigmoid"};
      EXPECT_TRUE(contains(checkConv(c, seed++), "conv_f32_im2col_gemm")) << c.label;
    }
}

TEST(ConvPoolTactics, EveryFusedActivation) {
  const std::vector<std::tuple<std::string, float, float>> acts = {
      {"Relu", 0, 0}, {"LeakyRelu", 0.2f, 0}, {"Clip", -0.5f, 0.7f}, {"Sigmoid", 0, 0}, {"Tanh", 0, 0},
      {"HardSwish", 0, 0}, {"HardSigmoid", 0.3f, 0.4f}, {"Gelu", 0, 0}, {"GeluTanh", 0, 0}, {"Elu", 0.7f, 0},
      {"Softplus", 0, 0}, {"Silu", 0, 0}, {"Mish", 0, 0}};
  uint32_t seed = 100;
  for (auto [act, alpha, beta] : acts) {
    checkConv({"generic " + act, {1, 8, 7, 9}, {6, 8, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 1, "", true, true, act, alpha, beta}, seed++);
    checkConv({"pointwise " + act, {1, 8, 7, 9}, {13, 8, 1, 1}, {}, {}, {}, 1, "", true, true, act, alpha, beta}, seed++);
    std::vector<std::string> dw = checkConv(
        {"depthwise " + act, {1, 8, 7, 9}, {8, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 8, "", true, true, act, alpha, beta}, seed++);
    EXPECT_TRUE(contains(dw, "conv_f32_depthwise_avx2")) << act;
  }
}

TEST(ConvPoolTactics, DepthwiseMatchesReference) {
  // Widths around the 8-lane vector boundary, strides 1 and 2, every padding layout.
  uint32_t seed = 200;
  for (int64_t width : {1, 2, 7, 8, 9, 16, 17, 23, 33, 112})
    for (int64_t stride : {1, 2})
      for (auto pads : std::vector<std::vector<int64_t>>{{1, 1, 1, 1}, {0, 0, 0, 0}, {0, 0, 1, 1}, {1, 0, 0, 1}}) {
        if (width + pads[1] + pads[3] < 3) continue;
        ConvCase c{"dw w" + std::to_string(width) + " s" + std::to_string(stride), {2, 5, 6, width}, {5, 1, 3, 3},
                   {stride, stride}, pads, {}, 5, "", seed % 2 == 0, seed % 3 == 0, seed % 2 ? "Clip" : "", 0.f, 6.f};
        std::vector<std::string> names = checkConv(c, seed++);
        EXPECT_TRUE(contains(names, "conv_f32_depthwise_avx2")) << c.label;
      }
  // MobileNetV2 shapes, SAME_UPPER (TF-exported models).
  for (int64_t stride : {1, 2}) {
    ConvCase c{"mobilenet dw", {1, 32, 56, 56}, {32, 1, 3, 3}, {stride, stride}, {}, {}, 32, "SAME_UPPER", true, false, "Clip", 0.f, 6.f};
    EXPECT_TRUE(contains(checkConv(c, seed++), "conv_f32_depthwise_avx2"));
  }
}

TEST(ConvPoolTactics, ResidualMayAliasOutput) {
  // Y = act(conv + B + R) computed in place (R's buffer is Y's) must equal the reference.
  std::mt19937 rng(77);
  for (Dims w : std::vector<Dims>{{8, 8, 3, 3}, {8, 1, 3, 3}, {8, 8, 1, 1}}) {
    Attributes a;
    a.set("pads", std::vector<int64_t>(4, w[2] / 2));
    a.set("group", w[1] == 1 ? int64_t{8} : int64_t{1});
    a.set("kiln_activation", std::string("Relu"));
    std::vector<Input> in{data(randomTensor({1, 8, 10, 12}, rng)), weights(randomTensor(w, rng)),
                          weights(randomTensor({8}, rng)), data(randomTensor({1, 8, 10, 12}, rng))};
    LayerDesc desc = describe("Conv", a, in);
    std::vector<float> want = values(runReference(desc, in)[0]);
    for (const Tactic& t : getBackend(DeviceType::kCPU, 2)->tactics(desc)) {
      std::unique_ptr<Kernel> kernel = t.create(desc);
      std::unique_ptr<KernelState> state;
      HostTensor ws(DataType::kUINT8, {static_cast<int64_t>(kernel->reshape(desc, state))});
      HostTensor y = in[3].value.clone();
      KernelIO io;
      for (size_t i = 0; i < 3; ++i)
        io.in.push_back(TensorView{const_cast<void*>(in[i].value.data()), DataType::kFLOAT, in[i].value.dims(), in[i].value.count()});
      io.in.push_back(TensorView{y.data(), DataType::kFLOAT, y.dims(), y.count()});
      io.out.push_back(TensorView{y.data(), DataType::kFLOAT, y.dims(), y.count()});
      io.workspace = ws.data();
      io.workspaceSize = static_cast<size_t>(ws.count());
      io.pool = testPool();
      kernel->execute(io, state.get());
      EXPECT_TRUE(near(y, want, 2e-4f)) << t.name << " W " << toString(w);
    }
  }
}

TEST(ConvPoolTactics, UnsupportedLayersFallBackToReference) {
  // float64 convolutions have no optimized tactic: the reference kernel is the only one offered.
  Attributes a;
  LayerDesc d;
  d.name = "double_conv";
  d.op = "Conv";
  d.attrs = &a;
  HostTensor w(DataType::kDOUBLE, {2, 3, 1, 1});
  d.inputs = {TensorDesc{DataType::kDOUBLE, {1, 3, 4, 4}, HostTensor()}, TensorDesc{DataType::kDOUBLE, w.dims(), w}};
  d.inputPresent = {true, true};
  d.outputs.resize(1);
  inferLayer(d);
  auto tactics = getBackend(DeviceType::kCPU, 2)->tactics(d);
  ASSERT_EQ(tactics.size(), 1u);
  EXPECT_EQ(tactics[0].name, "ref");
  // Weights that are not constants: only the reference kernel can run the layer.
  std::mt19937 rng(5);
  std::vector<Input> in{data(randomTensor({1, 3, 4, 4}, rng)), data(randomTensor({2, 3, 1, 1}, rng))};
  auto names = expectTacticsMatchReference("Conv", Attributes(), in);
  EXPECT_EQ(names, std::vector<std::string>{"ref"});
}

TEST(ConvPoolTactics, PoolingMatchesReference) {
  struct PoolCase {
    std::string op;
    Dims x;
    std::vector<int64_t> kernel, strides, pads, dilations;
    int64_t ceil = 0, includePad = 0;
    std::string autoPad;
  };
  std::vector<PoolCase> cases = {
      {"MaxPool", {1, 8, 112, 112}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0, 0, ""},  // ResNet stem
      {"MaxPool", {2, 3, 11, 13}, {3, 2}, {2, 2}, {1, 0, 1, 1}, {}, 1, 0, ""},
      {"MaxPool", {1, 3, 10, 9}, {2, 2}, {1, 2}, {}, {2, 2}, 0, 0, "SAME_UPPER"},
      {"MaxPool", {1, 4, 17}, {4}, {3}, {1, 2}, {}, 1, 0, ""},
      {"MaxPool", {1, 2, 5, 6, 7}, {2, 3, 2}, {2, 1, 2}, {0, 1, 0, 1, 1, 1}, {}, 0, 0, ""},
      {"AveragePool", {1, 8, 28, 28}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 0, 0, ""},
      {"AveragePool", {1, 8, 28, 28}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 0, 1, ""},
      {"AveragePool", {2, 3, 11, 13}, {3, 2}, {2, 2}, {1, 0, 1, 1}, {}, 1, 1, ""},
      {"AveragePool", {2, 3, 11, 13}, {3, 3}, {2, 3}, {2, 1, 0, 2}, {2, 1}, 1, 0, ""},
      {"AveragePool", {1, 2, 9, 8}, {2, 3}, {2, 2}, {}, {}, 0, 0, "SAME_LOWER"},
      {"AveragePool", {1, 2, 5, 6, 7}, {2, 3, 2}, {2, 1, 2}, {0, 1, 0, 1, 1, 1}, {}, 0, 1, ""},
  };
  std::mt19937 rng(300);
  for (const PoolCase& c : cases) {
    Attributes a;
    a.set("kernel_shape", c.kernel);
    if (!c.strides.empty()) a.set("strides", c.strides);
    if (!c.pads.empty()) a.set("pads", c.pads);
    if (!c.dilations.empty()) a.set("dilations", c.dilations);
    if (!c.autoPad.empty()) a.set("auto_pad", c.autoPad);
    a.set("ceil_mode", c.ceil);
    if (c.op == "AveragePool") a.set("count_include_pad", c.includePad);
    std::vector<Input> in{data(randomTensor(c.x, rng))};
    SCOPED_TRACE(c.op + " " + toString(c.x));
    EXPECT_TRUE(contains(expectTacticsMatchReference(c.op, a, in, 1e-5f), kiln::test::snakeCase(c.op) + "_f32_direct"));
  }
  // The row-buffered window pools (pool_window.cpp): output widths around the 8-lane vectors,
  // strides 1, 2 (even-lane loads) and 3 (one output at a time), dilation, pads beyond the kernel's
  // reach, every kind; rows too wide for the row buffer take the scalar path.
  uint32_t variant = 0;
  for (int64_t width : {1, 2, 7, 8, 9, 15, 16, 17, 31, 56, 113})
    for (int64_t stride : {1, 2, 3})
      for (const char* op : {"MaxPool", "AveragePool"}) {
        ++variant;
        Attributes a;
        const int64_t k = 1 + variant % 4, dil = variant % 5 == 0 ? 2 : 1, pad = std::min<int64_t>(k - 1, variant % 3);
        if ((width + 2 * pad) < (k - 1) * dil + 1) continue;
        a.set("kernel_shape", std::vector<int64_t>{3, k});
        a.set("strides", std::vector<int64_t>{stride, stride});
        a.set("pads", std::vector<int64_t>{1, pad, 1, pad});
        a.set("dilations", std::vector<int64_t>{1, dil});
        a.set("ceil_mode", int64_t(variant % 2));
        if (std::string(op) == "AveragePool") a.set("count_include_pad", int64_t(variant / 2 % 2));
        std::vector<Input> in{data(randomTensor({2, 3, 5, width}, rng))};
        SCOPED_TRACE(std::string(op) + " width " + std::to_string(width) + " stride " + std::to_string(stride) + " k " +
                     std::to_string(k) + " dil " + std::to_string(dil) + " pad " + std::to_string(pad));
        EXPECT_TRUE(contains(expectTacticsMatchReference(op, a, in, 1e-5f), kiln::test::snakeCase(op) + "_f32_direct"));
      }
  for (const char* op : {"MaxPool", "AveragePool"}) {
    Attributes a;
    a.set("kernel_shape", std::vector<int64_t>{2, 3});
    a.set("strides", std::vector<int64_t>{1, 2});
    a.set("pads", std::vector<int64_t>{0, 1, 0, 1});
    std::vector<Input> in{data(randomTensor({1, 1, 3, 20000}, rng))};  // wider than the row buffer
    EXPECT_TRUE(contains(expectTacticsMatchReference(op, a, in, 1e-5f), kiln::test::snakeCase(op) + "_f32_direct"));
  }
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"})
    for (Dims x : std::vector<Dims>{{1, 2048, 7, 7}, {2, 5, 3, 5}, {1, 3, 1, 1}, {1, 4, 9}, {1, 2, 3, 4, 5}}) {
      std::vector<Input> in{data(randomTensor(x, rng))};
      SCOPED_TRACE(std::string(op) + " " + toString(x));
      EXPECT_TRUE(contains(expectTacticsMatchReference(op, Attributes(), in, 1e-5f), kiln::test::f32Avx2(op)));
    }
}

TEST(ConvPoolTactics, MaxPoolPropagatesNaN) {
  // A window that holds a NaN yields NaN wherever the NaN sits among its taps (first, middle, last
  // row and column), as in the reference; the other windows are unaffected.
  std::mt19937 rng(310);
  for (int64_t at : {0, 1, 8, 9, 17, 40}) {
    HostTensor x = randomTensor({1, 2, 6, 41}, rng);
    x.as<float>()[at * 7 % 6 * 41 + at] = std::numeric_limits<float>::quiet_NaN();
    Attributes a;
    a.set("kernel_shape", std::vector<int64_t>{3, 3});
    a.set("strides", std::vector<int64_t>{at % 2 + 1, at % 2 + 1});
    a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    std::vector<Input> in{data(x)};
    LayerDesc desc = describe("MaxPool", a, in);
    HostTensor want = runReference(desc, in)[0];
    int nans = 0;
    for (const Tactic& t : getBackend(DeviceType::kCPU, 2)->tactics(desc)) {
      HostTensor got = run(t, desc, in)[0];
      for (int64_t i = 0; i < want.count(); ++i) {
        const float w = want.as<float>()[i], g = got.as<float>()[i];
        nans += std::isnan(w);
        EXPECT_TRUE(std::isnan(w) ? std::isnan(g) : g == w) << t.name << " at " << at << " [" << i << "] " << g << " vs " << w;
      }
    }
    EXPECT_GT(nans, 0);
  }
}

TEST(ConvPoolTactics, ResNetAndMobileNetLayers) {
  // Representative full-size layers of the two target models.
  uint32_t seed = 400;
  std::vector<ConvCase> cases = {
      {"resnet stem", {1, 3, 224, 224}, {64, 3, 7, 7}, {2, 2}, {3, 3, 3, 3}, {}, 1, "", true, false, "Relu"},
      {"resnet 3x3", {1, 64, 56, 56}, {64, 64, 3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 1, "", true, false, "Relu"},
      {"resnet 1x1 residual", {1, 64, 56, 56}, {256, 64, 1, 1}, {}, {}, {}, 1, "", true, true, "Relu"},
      {"resnet 3x3 s2", {1, 128, 56, 56}, {128, 128, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 1, "", true, false, "Relu"},
      {"mobilenet expand", {1, 24, 56, 56}, {144, 24, 1, 1}, {}, {}, {}, 1, "", true, false, "Clip", 0.f, 6.f},
      {"mobilenet dw s2", {1, 144, 56, 56}, {144, 1, 3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 144, "", true, false, "Clip", 0.f, 6.f},
      {"mobilenet project residual", {1, 144, 28, 28}, {32, 144, 1, 1}, {}, {}, {}, 1, "", true, true, ""},
  };
  for (const ConvCase& c : cases) checkConv(c, seed++);
}
