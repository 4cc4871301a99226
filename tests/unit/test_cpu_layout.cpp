// CPU blocked layouts (nChw8c / nChw16c): the LayoutConvert op against the layout's index formula,
// the conv/pool tactics that honour kiln_layout_in / kiln_layout_out against the reference kernels
// on plain data, and the layout pass end to end against the unoptimized network.
#include <gtest/gtest.h>

#include <cstring>

#include "builder/passes/passes.h"
#include "core/thread_pool.h"
#include "op_test_util.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::expectClose;
using kiln::test::OpCase;
using kiln::test::randomTensor;

namespace {

const char* layoutOf(int64_t block) { return block == 1 ? "nchw" : block == 8 ? "nChw8c" : "nChw16c"; }

//! The blocked copy of a plain NCHW tensor, element by element from the layout's definition:
//! element (n, c, h, w) lives at [n][c / b][h][w][c % b].
HostTensor toBlocked(const HostTensor& x, int64_t b) {
  if (b == 1) return x.clone();
  const Dims& d = x.dims();
  const int64_t N = d[0], C = d[1], HW = d[2] * d[3];
  HostTensor y(DataType::kFLOAT, d);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < HW; ++s)
        y.as<float>()[((n * (C / b) + c / b) * HW + s) * b + c % b] = x.as<float>()[(n * C + c) * HW + s];
  return y;
}

HostTensor toPlain(const HostTensor& y, int64_t b) {
  if (b == 1) return y.clone();
  const Dims& d = y.dims();
  const int64_t N = d[0], C = d[1], HW = d[2] * d[3];
  HostTensor x(DataType::kFLOAT, d);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t s = 0; s < HW; ++s)
        x.as<float>()[(n * C + c) * HW + s] = y.as<float>()[((n * (C / b) + c / b) * HW + s) * b + c % b];
  return x;
}

Backend& cpuBackend() {
  static auto b = getBackend(DeviceType::kCPU, 2);
  return *b;
}

bool offered(const OpCase& c, const std::string& tactic) {
  for (auto& n : kiln::test::tacticNames(cpuBackend(), c))
    if (n == tactic) return true;
  return false;
}

//! Runs `c` (plain NCHW inputs) with `tactic` exchanging X (and R) / Y in blocks `in` / `out`, and
//! compares with the reference kernel on the plain tensors.
void checkBlockedTactic(OpCase c, const std::string& tactic, int64_t in, int64_t out, double tol) {
  auto ref = kiln::test::runReference(c);
  c.attrs.set(attr::kLayoutIn, std::string(layoutOf(in)));
  c.attrs.set(attr::kLayoutOut, std::string(layoutOf(out)));
  ASSERT_TRUE(offered(c, tactic)) << tactic << " " << layoutOf(in) << " -> " << layoutOf(out);
  c.inputs[0] = toBlocked(c.inputs[0], in);
  if (c.inputs.size() > 3 && c.inputs[3].valid()) c.inputs[3] = toBlocked(c.inputs[3], out);
  auto got = kiln::test::runTactic(cpuBackend(), tactic, c);
  expectClose(toPlain(got[0], out), ref[0], tol, tol, c.op + " " + tactic + " " + layoutOf(in) + " -> " + layoutOf(out));
}

OpCase convCase(int64_t C, int64_t M, int64_t group, int64_t k, int64_t stride, bool residual, uint32_t seed) {
  OpCase c;
  c.op = "Conv";
  c.attrs.set("group", group);
  c.attrs.set("strides", std::vector<int64_t>{stride, stride});
  c.attrs.set("pads", std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2});
  c.attrs.set("kiln_activation", std::string("Relu"));
  const int64_t H = 13, OH = (H + 2 * (k / 2) - k) / stride + 1;
  c.inputs = {randomTensor({2, C, H, H}, seed), randomTensor({M, C / group, k, k}, seed + 1),
              randomTensor({M}, seed + 2)};
  c.constant = {false, true, true};
  if (residual) {
    c.inputs.push_back(randomTensor({2, M, OH, OH}, seed + 3));
    c.constant.push_back(false);
  }
  return c;
}

}  // namespace

TEST(CpuLayout, LayoutConvertFollowsTheLayoutDefinition) {
  for (int64_t b : {8, 16}) {
    HostTensor x = randomTensor({2, 32, 5, 3}, 7);
    OpCase to;
    to.op = "LayoutConvert";
    to.attrs.set(attr::kLayoutIn, std::string("nchw"));
    to.attrs.set(attr::kLayoutOut, std::string(layoutOf(b)));
    to.inputs = {x};
    HostTensor blocked = kiln::test::runReference(to)[0];
    expectClose(blocked, toBlocked(x, b), 0, 0, "nchw -> blocked");
    OpCase back = to;
    back.attrs.set(attr::kLayoutIn, std::string(layoutOf(b)));
    back.attrs.set(attr::kLayoutOut, std::string("nchw"));
    back.inputs = {blocked};
    expectClose(kiln::test::runReference(back)[0], x, 0, 0, "blocked -> nchw");
  }
  // Between the two blocked layouts.
  HostTensor x = randomTensor({1, 32, 4, 4}, 8);
  OpCase c;
  c.op = "LayoutConvert";
  c.attrs.set(attr::kLayoutIn, std::string("nChw8c"));
  c.attrs.set(attr::kLayoutOut, std::string("nChw16c"));
  c.inputs = {toBlocked(x, 8)};
  expectClose(kiln::test::runReference(c)[0], toBlocked(x, 16), 0, 0, "nChw8c -> nChw16c");
}

TEST(CpuLayout, NhwcConversionIsATransposeOfAnyElementType) {
  const Dims d{2, 3, 4, 5};
  for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kINT64}) {
    HostTensor x(t, d);
    for (int64_t i = 0; i < x.count() * static_cast<int64_t>(elementSize(t)); ++i) static_cast<uint8_t*>(x.data())[i] = static_cast<uint8_t>(i * 7 + 3);
    auto convert = [&](const HostTensor& in, const char* from, const char* to) {
      Attributes a;
      a.set(attr::kLayoutIn, std::string(from));
      a.set(attr::kLayoutOut, std::string(to));
      LayerDesc l;
      l.name = "lc";
      l.op = "LayoutConvert";
      l.attrs = &a;
      l.inputs = {TensorDesc{t, d, in}};
      l.inputPresent = {true};
      inferLayer(l);
      evaluateOnHost(l);
      return l.outputs[0].value;
    };
    HostTensor nhwc = convert(x, "nchw", "nhwc");
    const size_t e = elementSize(t);
    for (int64_t n = 0; n < d[0]; ++n)
      for (int64_t c = 0; c < d[1]; ++c)
        for (int64_t s = 0; s < d[2] * d[3]; ++s)
          ASSERT_EQ(std::memcmp(static_cast<const uint8_t*>(nhwc.data()) + ((n * d[2] * d[3] + s) * d[1] + c) * e,
                                static_cast<const uint8_t*>(x.data()) + ((n * d[1] + c) * d[2] * d[3] + s) * e, e), 0);
    HostTensor back = convert(nhwc, "nhwc", "nchw");
    EXPECT_EQ(std::memcmp(back.data(), x.data(), x.bytes()), 0);
  }
}

TEST(CpuLayout, LayoutConvertRejectsBadInput) {
  auto infer = [](const Dims& d, const std::string& from, const std::string& to, DataType t = DataType::kFLOAT) {
    Attributes a;
    a.set(attr::kLayoutIn, from);
    a.set(attr::kLayoutOut, to);
    LayerDesc l;
    l.name = "lc";
    l.op = "LayoutConvert";
    l.attrs = &a;
    l.inputs = {TensorDesc{t, d, {}}};
    l.inputPresent = {true};
    inferLayer(l);
    return l.outputs.at(0).dims;
  };
  EXPECT_EQ(infer({1, 16, -1, 4}, "nchw", "nChw16c"), (Dims{1, 16, -1, 4}));
  EXPECT_THROW(infer({1, 12, 4, 4}, "nchw", "nChw8c"), Error);     // channels not a multiple of 8
  EXPECT_THROW(infer({1, 16, 4}, "nchw", "nChw8c"), Error);        // not 4-D
  EXPECT_THROW(infer({1, 16, 4, 4}, "nchw", "nChw4c"), Error);     // unknown layout
  EXPECT_EQ(infer({1, 12, 4, 4}, "nhwc", "nchw", DataType::kHALF), (Dims{1, 12, 4, 4}));  // any C, any type
  EXPECT_THROW(infer({1, 16, 4, 4}, "nhwc", "nChw8c"), Error);    // nhwc converts with nchw only
  EXPECT_THROW(infer({1, 16, 4}, "nchw", "nhwc"), Error);         // not 4-D
  EXPECT_THROW(infer({1, 16, 4, 4}, "nchw", "nhcw"), Error);      // unknown layout
  EXPECT_THROW(infer({1, 16, 4, 4}, "nchw", "nChw8c", DataType::kINT32), UnsupportedError);
  Attributes none;
  LayerDesc l;
  l.name = "lc";
  l.op = "LayoutConvert";
  l.attrs = &none;
  l.inputs = {TensorDesc{DataType::kFLOAT, {1, 8, 2, 2}, {}}};
  l.inputPresent = {true};
  EXPECT_THROW(inferLayer(l), Error);  // no layout attributes
}

TEST(CpuLayout, ConvTacticsHonourOrRefuseBlockedLayouts) {
  const int64_t block = getBackend(DeviceType::kCPU, 1)->preferredChannelBlock();
  if (block == 0) GTEST_SKIP() << "built without oneDNN: no tactic exchanges blocked layouts";
  for (int64_t b : {int64_t(8), int64_t(16)}) {
    // Dense 3x3 with a residual, 1x1 expansion, strided depthwise 3x3: every combination of
    // plain and blocked X / Y.
    for (auto [in, out] : {std::pair<int64_t, int64_t>{b, b}, {1, b}, {b, 1}}) {
      checkBlockedTactic(convCase(32, 48, 1, 3, 1, true, 11), "conv_f32_onednn_blocked", in, out, 1e-4);
      checkBlockedTactic(convCase(16, 96, 1, 1, 1, false, 21), "conv_f32_onednn_blocked", in, out, 1e-4);
      checkBlockedTactic(convCase(48, 48, 48, 3, 2, false, 31), "conv_f32_onednn_blocked", in, out, 1e-4);
    }
  }
  // The NCHW-only tactics refuse blocked layouts (the reference kernel would misread them).
  OpCase dw = convCase(16, 16, 16, 3, 1, false, 41);
  EXPECT_TRUE(offered(dw, "conv_f32_depthwise_avx2"));
  EXPECT_TRUE(offered(dw, "conv_f32_im2col_gemm"));
  EXPECT_TRUE(offered(dw, "conv_f32_onednn"));
  dw.attrs.set(attr::kLayoutIn, std::string("nChw8c"));
  dw.attrs.set(attr::kLayoutOut, std::string("nChw8c"));
  auto names = kiln::test::tacticNames(cpuBackend(), dw);
  EXPECT_EQ(names, (std::vector<std::string>{"conv_f32_grouped_blocked_avx2", "conv_f32_onednn_blocked"}));
  // 12 channels are not a multiple of 8: no tactic takes the blocked layout.
  OpCase odd = convCase(12, 16, 1, 1, 1, false, 51);
  odd.attrs.set(attr::kLayoutIn, std::string("nChw8c"));
  EXPECT_FALSE(offered(odd, "conv_f32_onednn_blocked"));
  odd.attrs.set(attr::kLayoutIn, std::string("bogus"));
  EXPECT_FALSE(offered(odd, "conv_f32_onednn_blocked"));
}

TEST(CpuLayout, GroupedBlockedTacticMatchesTheReference) {
  const int64_t block = getBackend(DeviceType::kCPU, 1)->preferredChannelBlock();
  if (block == 0) GTEST_SKIP() << "built without oneDNN: no tactic exchanges blocked layouts";
  const std::string tactic = "conv_f32_grouped_blocked_avx2";
  uint32_t seed = 100;
  // Groups of 1, 2, 4 and 8 channels; windows 1x1 to 7x7, strides 1 and 2 (13 -> 13, 7 outputs:
  // a full 8-pixel tile plus a tail, and a tail alone); with and without a residual.
  for (int64_t b : {int64_t(8), int64_t(16)})
    for (int64_t k : {1, 2, 4, 8})
      for (auto [window, stride] : {std::pair<int64_t, int64_t>{3, 1}, {3, 2}, {5, 1}, {7, 2}, {1, 1}})
        for (bool residual : {false, true}) {
          SCOPED_TRACE("block " + std::to_string(b) + ", group width " + std::to_string(k) + ", " + std::to_string(window) +
                       "x" + std::to_string(window) + " stride " + std::to_string(stride));
          checkBlockedTactic(convCase(32, 32, 32 / k, window, stride, residual, seed += 4), tactic, b, b, 1e-4);
        }
  // An activation applied after the store (Silu), dilation 2 and uneven padding, a non-square input.
  OpCase c = convCase(16, 16, 4, 3, 1, true, 900);
  c.attrs.set("kiln_activation", std::string("Silu"));
  c.attrs.set("dilations", std::vector<int64_t>{2, 2});
  c.attrs.set("pads", std::vector<int64_t>{0, 2, 1, 3});
  c.inputs[0] = randomTensor({2, 16, 9, 21}, 901);
  c.inputs[3] = randomTensor({2, 16, 6, 22}, 902);  // (9 + 1 - 5) + 1 = 6, (21 + 5 - 5) + 1 = 22
  checkBlockedTactic(c, tactic, 8, 8, 1e-4);
  // Refused: plain layouts, groups of 3 or 16, C != M, different blocks in and out.
  EXPECT_FALSE(offered(convCase(32, 32, 8, 3, 1, false, 910), tactic));
  auto blocked = [](OpCase o, const char* in, const char* out) {
    o.attrs.set(attr::kLayoutIn, std::string(in));
    o.attrs.set(attr::kLayoutOut, std::string(out));
    return o;
  };
  EXPECT_TRUE(offered(blocked(convCase(32, 32, 8, 3, 1, false, 911), "nChw8c", "nChw8c"), tactic));
  EXPECT_FALSE(offered(blocked(convCase(48, 48, 16, 3, 1, false, 912), "nChw8c", "nChw8c"), tactic));
  EXPECT_FALSE(offered(blocked(convCase(64, 64, 4, 3, 1, false, 913), "nChw8c", "nChw8c"), tactic));
  EXPECT_FALSE(offered(blocked(convCase(32, 64, 8, 3, 1, false, 914), "nChw8c", "nChw8c"), tactic));
  EXPECT_FALSE(offered(blocked(convCase(32, 32, 8, 3, 1, false, 915), "nChw8c", "nChw16c"), tactic));
}

TEST(CpuLayout, PoolTacticsHonourBlockedLayouts) {
  auto pool = [](const std::string& op, bool includePad) {
    OpCase c;
    c.op = op;
    if (op == "MaxPool" || op == "AveragePool") {
      c.attrs.set("kernel_shape", std::vector<int64_t>{3, 3});
      c.attrs.set("strides", std::vector<int64_t>{2, 2});
      c.attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
      if (includePad) c.attrs.set("count_include_pad", int64_t(1));
    }
    c.inputs = {randomTensor({2, 32, 11, 9}, 61)};
    return c;
  };
  for (int64_t b : {8, 16}) {
    checkBlockedTactic(pool("MaxPool", false), "max_pool_f32_direct", b, b, 1e-6);
    checkBlockedTactic(pool("AveragePool", false), "average_pool_f32_direct", b, b, 1e-5);
    checkBlockedTactic(pool("AveragePool", true), "average_pool_f32_direct", b, b, 1e-5);
    checkBlockedTactic(pool("GlobalAveragePool", false), "global_average_pool_f32_avx2", b, 1, 1e-5);
    checkBlockedTactic(pool("GlobalMaxPool", false), "global_max_pool_f32_avx2", b, 1, 1e-6);
  }
  // Window pools keep X's layout; global pools write plain.
  OpCase c = pool("MaxPool", false);
  c.attrs.set(attr::kLayoutIn, std::string("nChw8c"));
  c.attrs.set(attr::kLayoutOut, std::string("nchw"));
  EXPECT_FALSE(offered(c, "max_pool_f32_direct"));
  OpCase g = pool("GlobalAveragePool", false);
  g.attrs.set(attr::kLayoutIn, std::string("nChw8c"));
  g.attrs.set(attr::kLayoutOut, std::string("nChw8c"));
  EXPECT_FALSE(offered(g, "global_average_pool_f32_avx2"));
}

namespace {

//! x -> Conv 3x3/2 + Relu -> depthwise 3x3 + Clip -> Conv 1x1 (+ residual: the first conv's
//! output) -> MaxPool -> Conv 1x1 -> GlobalAveragePool -> y, plus a Sigmoid reading the first
//! conv's output (a layer that needs plain NCHW) -> s, and a conv with 12 output channels
//! (not blockable) -> z.
void makeChain(Network& n) {
  Tensor* x = n.addInput("x", DataType::kFLOAT, {1, 3, 20, 20});
  auto conv = [&](Tensor* in, int64_t cin, int64_t m, int64_t k, int64_t stride, int64_t group, const char* act,
                  uint32_t seed) {
    Layer* l = n.addConvolution(in, randomTensor({m, cin / group, k, k}, seed), randomTensor({m}, seed + 1),
                                {stride, stride}, {k / 2, k / 2, k / 2, k / 2}, group);
    Tensor* out = l->outputs[0];
    if (std::string(act) == "Relu") out = n.addActivation(out, "Relu")->outputs[0];
    if (std::string(act) == "Clip") {
      out = n.addLayer("Clip", {out, n.addConstant(n.uniqueName("lo"), HostTensor(DataType::kFLOAT, {})),
                                n.addConstant(n.uniqueName("hi"), [] {
                                  HostTensor t(DataType::kFLOAT, {});
                                  *t.as<float>() = 0.5f;
                                  return t;
                                }())},
                       1)->outputs[0];
    }
    return out;
  };
  Tensor* a = conv(x, 3, 32, 3, 2, 1, "Relu", 101);       // [1,32,10,10]
  Tensor* b = conv(a, 32, 32, 3, 1, 32, "Clip", 103);     // depthwise
  Tensor* c = conv(b, 32, 32, 1, 1, 1, "", 105);
  Tensor* r = n.addElementWise(c, a, "Add")->outputs[0];  // residual
  Attributes mp;
  mp.set("kernel_shape", std::vector<int64_t>{3, 3});
  mp.set("strides", std::vector<int64_t>{2, 2});
  mp.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  Tensor* p = n.addLayer("MaxPool", {r}, 1, mp)->outputs[0];  // [1,32,5,5]
  Tensor* d = conv(p, 32, 32, 1, 1, 1, "Relu", 107);
  Tensor* y = n.addLayer("GlobalAveragePool", {d}, 1)->outputs[0];
  Tensor* s = n.addActivation(a, "Sigmoid")->outputs[0];
  Tensor* z = conv(d, 32, 12, 1, 1, 1, "", 109);
  n.renameTensor(y, "y");
  n.renameTensor(s, "s");
  n.renameTensor(z, "z");
  n.markOutput(y);
  n.markOutput(s);
  n.markOutput(z);
}

}  // namespace

TEST(CpuLayout, PassBlocksConvChainsAndKeepsResults) {
  const int64_t block = getBackend(DeviceType::kCPU, 1)->preferredChannelBlock();
  if (block == 0) GTEST_SKIP() << "built without oneDNN: the layout pass does nothing";
  const std::map<std::string, HostTensor> inputs{{"x", randomTensor({1, 3, 20, 20}, 5)}};
  Network net;
  auto [engine, ref] = kiln::test::buildWithReference(makeChain, net, inputs);
  // The pass ran on `net` (the builder optimizes the network in place).
  int converts = 0, blockedLayers = 0;
  for (auto& l : net.layers()) {
    if (l->op == "LayoutConvert") ++converts;
    if (l->op != "LayoutConvert" && (l->attrs.getString(attr::kLayoutOut, "nchw") != "nchw" ||
                                   l->attrs.getString(attr::kLayoutIn, "nchw") != "nchw"))
      ++blockedLayers;
  }
  EXPECT_EQ(converts, 1) << engine->getLayerInformation();  // the Sigmoid's input
  // 4 convs, MaxPool, GlobalAveragePool, and the 12-channel conv reading a blocked input.
  EXPECT_EQ(blockedLayers, 7) << engine->getLayerInformation();
  auto out = kiln::test::runEngine(*engine, inputs);
  for (auto& [name, r] : ref) {
    HostTensor got(DataType::kFLOAT, r.dims());
    std::copy(out.at(name).begin(), out.at(name).end(), got.as<float>());
    expectClose(got, r, 1e-4, 1e-4, name);
  }
}

TEST(CpuLayout, PassLeavesNetworksWithoutBlockableChainsAlone) {
  if (getBackend(DeviceType::kCPU, 1)->preferredChannelBlock() == 0) GTEST_SKIP() << "built without oneDNN";
  Network n;
  Tensor* x = n.addInput("x", DataType::kFLOAT, {1, 4, 8, 8});
  Layer* c1 = n.addConvolution(x, randomTensor({12, 4, 3, 3}, 1), randomTensor({12}, 2), {1, 1}, {1, 1, 1, 1});
  Layer* c2 = n.addConvolution(c1->outputs[0], randomTensor({12, 12, 1, 1}, 3), randomTensor({12}, 4), {1, 1}, {0, 0, 0, 0});
  n.markOutput(c2->outputs[0]);
  n.topoSort();
  n.inferShapes();
  EXPECT_FALSE(assignCpuLayouts(n));  // 12 channels: nothing can be blocked
  for (auto& l : n.layers()) EXPECT_FALSE(l->attrs.has(attr::kLayoutIn));
}

// A squeeze-excitation block with a residual (EfficientNet / MobileNetV3 / RegNetY): the gate Mul
// (x * s[N, C, 1, 1]) and the residual Add (a PointwiseChain after fusion) run on the blocked bytes, so the block needs no
// LayoutConvert, and the results equal the reference.
TEST(CpuLayout, ElementwiseLayersKeepTheBlockedRegion) {
  if (getBackend(DeviceType::kCPU, 1)->preferredChannelBlock() == 0) GTEST_SKIP() << "built without oneDNN";
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 3, 12, 12});
    auto conv = [&](Tensor* in, int64_t cin, int64_t m, int64_t k, uint32_t seed) {
      return n.addConvolution(in, randomTensor({m, cin, k, k}, seed), randomTensor({m}, seed + 1), {1, 1},
                              {k / 2, k / 2, k / 2, k / 2})->outputs[0];
    };
    Tensor* a = n.addActivation(conv(x, 3, 32, 3, 11), "Relu")->outputs[0];
    Tensor* c1 = n.addActivation(conv(a, 32, 32, 3, 13), "Relu")->outputs[0];
    Tensor* g = n.addLayer("GlobalAveragePool", {c1}, 1)->outputs[0];
    Tensor* s = n.addActivation(conv(g, 32, 32, 1, 15), "Sigmoid")->outputs[0];
    Tensor* m = n.addElementWise(c1, s, "Mul")->outputs[0];
    Tensor* r = n.addElementWise(m, a, "Add")->outputs[0];
    Tensor* d = conv(r, 32, 16, 3, 17);
    Tensor* y = n.addLayer("GlobalAveragePool", {d}, 1)->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  const std::map<std::string, HostTensor> inputs{{"x", randomTensor({2, 3, 12, 12}, 5)}};
  Network net;
  auto [engine, ref] = kiln::test::buildWithReference(make, net, inputs);
  int converts = 0, blockedElementwise = 0;
  for (auto& l : net.layers()) {
    converts += l->op == "LayoutConvert";
    if ((l->op == "Mul" || l->op == "Add" || l->op == "PointwiseChain") && l->attrs.getString(attr::kLayoutOut, "nchw") != "nchw")
      ++blockedElementwise;
  }
  EXPECT_EQ(converts, 0) << engine->getLayerInformation();
  EXPECT_GE(blockedElementwise, 1) << engine->getLayerInformation();  // Mul + Add (one PointwiseChain once fused)
  auto out = kiln::test::runEngine(*engine, inputs);
  for (auto& [name, rv] : ref) {
    HostTensor got(DataType::kFLOAT, rv.dims());
    std::copy(out.at(name).begin(), out.at(name).end(), got.as<float>());
    expectClose(got, rv, 1e-4, 1e-4, name);
  }
}

// One set of threads (issue 22): with oneDNN in the process, the CPU backend's pool hands its loops
// to the OpenMP team oneDNN's primitives run on (backends/cpu/openmp_team.h), so that kiln's own
// kernels and oneDNN's do not take turns on the cores.
TEST(CpuBackend, PoolRunsOnTheOpenMpTeamWithOneDnn) {
  if (getBackend(DeviceType::kCPU, 1)->preferredChannelBlock() == 0) GTEST_SKIP() << "built without oneDNN";
  ThreadPool* pool = cpuBackend().pool();
  EXPECT_TRUE(pool->usesTeam());
  EXPECT_EQ(pool->size(), 2);
  std::vector<int> hits(1000, 0);
  pool->parallelFor(1000, 10, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
  });
  for (int h : hits) ASSERT_EQ(h, 1);
}
