// packQkvProjections: an attention's Q / K / V projections of one input become one MatMul whose
// packed output the Attention reads through strided views; the packed network computes what the
// unfused one does (reference kernels, CPU).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "builder/passes/passes.h"
#include "ops/fused_attrs.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::randomTensor;

namespace {

constexpr int64_t B = 2, H = 3, D = 8, E = H * D;

//! x @ W (+ bias): a projection with constant weights [E, E] (and bias [E]).
Tensor* project(Network& n, Tensor* x, uint32_t seed, bool bias) {
  Tensor* y = n.addMatMul(x, n.addConstant("", randomTensor({E, E}, seed)))->outputs[0];
  if (bias) y = n.addElementWise(y, n.addConstant("", randomTensor({E}, seed + 1)), "Add")->outputs[0];
  return y;
}

//! [B, S, E] -> [B, H, S, D]
Tensor* heads(Network& n, Tensor* t, int64_t s) {
  return kiln::test::addPermute(n, kiln::test::addReshape(n, t, {B, s, H, D})->outputs[0], {0, 2, 1, 3})->outputs[0];
}

//! Softmax(Q K^T / sqrt(D)) V over heads, merged back to [B, Sq, E].
Tensor* attention(Network& n, Tensor* q, Tensor* k, Tensor* v, int64_t sq, int64_t skv) {
  Tensor* kt = kiln::test::addPermute(n, heads(n, k, skv), {0, 1, 3, 2})->outputs[0];
  Tensor* s = n.addMatMul(heads(n, q, sq), kt)->outputs[0];
  HostTensor scale(DataType::kFLOAT, {});
  *scale.as<float>() = 1.f / std::sqrt(static_cast<float>(D));
  s = n.addElementWise(s, n.addConstant("", scale), "Mul")->outputs[0];
  Tensor* o = n.addMatMul(n.addSoftmax(s, -1)->outputs[0], heads(n, v, skv))->outputs[0];
  return kiln::test::addReshape(n, kiln::test::addPermute(n, o, {0, 2, 1, 3})->outputs[0], {B, sq, E})->outputs[0];
}

int constantMatMuls(const Network& n) {
  int c = 0;
  for (const auto& l : n.layers()) c += l->op == "MatMul" && l->inputs[1]->isConstant();
  return c;
}

//! Runs the attention and bias fusions and then the packing on one copy of the network; its outputs
//! must match the unchanged copy's. `inspect` sees the packed network.
void checkPacked(const std::function<void(Network&)>& make, const std::map<std::string, HostTensor>& inputs, bool expectPacked,
                 const std::function<void(const Network&)>& inspect) {
  Network net;
  const auto want = kiln::test::referenceAndCopy(make, inputs, net);
  ASSERT_TRUE(fuseAttention(net));
  fuseMatMulBias(net);
  net.topoSort();
  net.inferShapes();
  const int before = constantMatMuls(net);
  ASSERT_EQ(packQkvProjections(net), expectPacked);
  net.inferShapes();
  inspect(net);
  if (!expectPacked) EXPECT_EQ(constantMatMuls(net), before);
  auto got = kiln::test::evaluateReference(net, inputs);
  kiln::test::expectOutputsNear(got, want, 2e-5);
}

}  // namespace

// Self-attention (BERT): Q, K and V of one input, with biases: one MatMul of N = 3E, the Attention
// reads three views of it.
TEST(PassPackQkv, SelfAttentionProjectionsBecomeOneMatMul) {
  constexpr int64_t S = 7;
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {B, S, E});
    Tensor* y = attention(n, project(n, x, 10, true), project(n, x, 20, true), project(n, x, 30, true), S, S);
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  checkPacked(make, {{"x", randomTensor({B, S, E}, 1)}}, true, [](const Network& n) {
    EXPECT_EQ(constantMatMuls(n), 1);
    const Layer* a = kiln::test::firstOp(n, "Attention");
    ASSERT_NE(a, nullptr);
    EXPECT_TRUE(hasQkvViews(a->attrs));
    EXPECT_EQ(a->inputs[0], a->inputs[1]);
    EXPECT_EQ(a->inputs[1], a->inputs[2]);
    EXPECT_EQ(a->inputs[0]->dims, (Dims{B, S, 3 * E}));
    EXPECT_EQ(a->inputs[0]->producer->inputs.size(), 3u);  // the packed bias
  });
}

// Cross-attention (T5 / Whisper decoders): K and V of the encoder states pack, Q (of the decoder
// states, another length) stays; K without a bias (Whisper's k_proj) packs with V's bias.
TEST(PassPackQkv, CrossAttentionPacksKeyAndValue) {
  constexpr int64_t Sq = 5, Skv = 11;
  auto make = [](Network& n) {
    Tensor* dec = n.addInput("dec", DataType::kFLOAT, {B, Sq, E});
    Tensor* enc = n.addInput("enc", DataType::kFLOAT, {B, Skv, E});
    Tensor* y = attention(n, project(n, dec, 40, true), project(n, enc, 50, false), project(n, enc, 60, true), Sq, Skv);
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  checkPacked(make, {{"dec", randomTensor({B, Sq, E}, 2)}, {"enc", randomTensor({B, Skv, E}, 3)}}, true, [](const Network& n) {
    EXPECT_EQ(constantMatMuls(n), 2);
    const Layer* a = kiln::test::firstOp(n, "Attention");
    ASSERT_NE(a, nullptr);
    EXPECT_TRUE(hasQkvViews(a->attrs));
    EXPECT_NE(a->inputs[0], a->inputs[1]);
    EXPECT_EQ(a->inputs[1], a->inputs[2]);
    EXPECT_EQ(a->inputs[1]->dims, (Dims{B, Skv, 2 * E}));
  });
}

// A projection output read elsewhere too (here K is also a network output) stays unpacked: Q and V
// alone do not share the Attention's K.
TEST(PassPackQkv, SharedProjectionOutputStays) {
  constexpr int64_t S = 6;
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {B, S, E});
    Tensor* k = project(n, x, 80, true);
    Tensor* y = attention(n, project(n, x, 70, true), k, project(n, x, 90, true), S, S);
    n.renameTensor(y, "y");
    n.markOutput(y);
    n.renameTensor(k, "k");
    n.markOutput(k);
  };
  checkPacked(make, {{"x", randomTensor({B, S, E}, 4)}}, false, [](const Network& n) {
    EXPECT_EQ(constantMatMuls(n), 3);
  });
}

// A dynamic batch and sequence (BERT built for a profile): the projections pack as in a static
// network, the Attention's views become expressions of the packed buffer's dims (fitted at the
// profile's sample shapes), and the packed network computes what the unfused one does at shapes
// that are not samples.
TEST(PassPackQkv, DynamicBatchAndSequencePack) {
  auto heads = [](Network& n, Tensor* t) {  // [B, S, E] -> [B, H, S, D], the exporters' 0 / -1 form
    return kiln::test::addPermute(n, kiln::test::addReshape(n, t, {0, -1, H, D})->outputs[0], {0, 2, 1, 3})->outputs[0];
  };
  auto make = [&](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {-1, -1, E});
    Tensor *q = project(n, x, 11, true), *k = project(n, x, 21, true), *v = project(n, x, 31, true);
    Tensor* kt = kiln::test::addPermute(n, heads(n, k), {0, 1, 3, 2})->outputs[0];
    Tensor* s = n.addMatMul(heads(n, q), kt)->outputs[0];
    s = n.addElementWise(s, n.addConstant("", kiln::test::floatScalar(1.f / std::sqrt(static_cast<float>(D)))), "Mul")->outputs[0];
    Tensor* o = n.addMatMul(n.addSoftmax(s, -1)->outputs[0], heads(n, v))->outputs[0];
    Tensor* y = kiln::test::addReshape(n, kiln::test::addPermute(n, o, {0, 2, 1, 3})->outputs[0], {0, -1, E})->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  const InputSamples samples = {{{"x", {2, 5, E}}}, {{"x", {3, 5, E}}}, {{"x", {2, 9, E}}}};
  Network net;
  make(net);
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(fuseAttention(net, {}, samples));
  fuseMatMulBias(net);
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(packQkvProjections(net, {}, samples));
  net.inferShapes();
  EXPECT_EQ(constantMatMuls(net), 1);
  const Layer* a = kiln::test::firstOp(net, "Attention");
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(hasQkvViews(a->attrs));
  EXPECT_TRUE(a->attrs.has("kiln_view_exprs"));
  EXPECT_EQ(a->inputs[0], a->inputs[1]);
  EXPECT_EQ(a->inputs[0]->dims, (Dims{-1, -1, 3 * E}));
  for (const Dims& d : {Dims{4, 3, E}, Dims{1, 11, E}, Dims{2, 5, E}}) {
    const std::map<std::string, HostTensor> in = {{"x", randomTensor(d, 7)}};
    Network ref;
    make(ref);
    kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), kiln::test::evaluateReference(ref, in), 2e-5);
  }
  // Without samples (a dynamic network that has none) nothing packs.
  Network bare;
  make(bare);
  bare.topoSort();
  bare.inferShapes();
  fuseAttention(bare, {}, samples);
  fuseMatMulBias(bare);
  bare.topoSort();
  bare.inferShapes();
  EXPECT_FALSE(packQkvProjections(bare));
}
