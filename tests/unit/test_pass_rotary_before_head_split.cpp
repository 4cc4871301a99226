// rotaryBeforeHeadSplit: a RotaryEmbedding of a head split ([B, S, H*D] -> Reshape -> Transpose)
// becomes the RotaryEmbedding of the 3-D tensor (num_heads) split after it; the rewritten network
// computes what the original does (reference kernels, CPU), and with LLaMA-style GQA attention
// after it the attention fusion then takes the 3-D form (no head transposes left).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "builder/passes/passes.h"
#include "builder/passes/symbolic_dims.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::randomTensor;

namespace {

constexpr int64_t B = 2, S = 5, D = 8, Hq = 4, Hkv = 2, kMaxPos = 16;

//! [B, S, h*D] -> [B, h, S, D]
Tensor* heads(Network& n, Tensor* t, int64_t h) {
  return kiln::test::addPermute(n, kiln::test::addReshape(n, t, {B, S, h, D})->outputs[0], {0, 2, 1, 3})->outputs[0];
}

//! RotaryEmbedding of x ([B, h, S, D]) with caches [kMaxPos, D/2] and positions pos [B, S] (a
//! network input: not all 0..S-1, so a wrong batch or sequence index shows).
Tensor* rotate(Network& n, Tensor* x, Tensor* pos, uint32_t seed, bool interleaved) {
  Attributes a;
  if (interleaved) a.set("interleaved", int64_t(1));
  Tensor* cosC = n.addConstant("", randomTensor({kMaxPos, D / 2}, seed));
  Tensor* sinC = n.addConstant("", randomTensor({kMaxPos, D / 2}, seed + 1));
  return n.addLayer("RotaryEmbedding", {x, cosC, sinC, pos}, 1, a)->outputs[0];
}

HostTensor positions() {
  HostTensor p(DataType::kINT64, {B, S});
  for (int64_t i = 0; i < B * S; ++i) p.as<int64_t>()[i] = (3 * i + 1) % kMaxPos;
  return p;
}

int count(const Network& n, const std::string& op) {
  int c = 0;
  for (const auto& l : n.layers()) c += l->op == op;
  return c;
}

//! K or V heads repeated as transformers' repeat_kv writes it:
//! [B, Hkv, S, D] -> [B, Hkv, 1, S, D] -> Expand -> [B, Hq, S, D].
Tensor* repeatKv(Network& n, Tensor* t) {
  Tensor* u = kiln::test::addReshape(n, t, {B, Hkv, 1, S, D})->outputs[0];
  HostTensor shape(DataType::kINT64, {5});
  const int64_t to[5] = {B, Hkv, Hq / Hkv, S, D};
  for (int i = 0; i < 5; ++i) shape.as<int64_t>()[i] = to[i];
  Tensor* e = n.addLayer("Expand", {u, n.addConstant("", shape)}, 1)->outputs[0];
  return kiln::test::addReshape(n, e, {B, Hq, S, D})->outputs[0];
}

//! Softmax(Q K^T / sqrt D) V of Q [B, Hq, S, D] and K, V [B, Hkv, S, D] (repeated), merged back to
//! [B, S, Hq * D].
Tensor* attendGqa(Network& n, Tensor* q, Tensor* k, Tensor* v) {
  Tensor* kt = kiln::test::addPermute(n, repeatKv(n, k), {0, 1, 3, 2})->outputs[0];
  Tensor* s = n.addMatMul(q, kt)->outputs[0];
  HostTensor scale(DataType::kFLOAT, {});
  *scale.as<float>() = 1.f / std::sqrt(static_cast<float>(D));
  s = n.addElementWise(s, n.addConstant("", scale), "Mul")->outputs[0];
  Tensor* o = n.addMatMul(n.addSoftmax(s, -1)->outputs[0], repeatKv(n, v))->outputs[0];
  return kiln::test::addReshape(n, kiln::test::addPermute(n, o, {0, 2, 1, 3})->outputs[0], {B, S, Hq * D})->outputs[0];
}

//! LLaMA / Qwen2 attention: rotated Q (Hq heads) and K (Hkv heads), V (Hkv), attendGqa.
Tensor* gqaAttention(Network& n, Tensor* q3, Tensor* k3, Tensor* v3, Tensor* pos) {
  return attendGqa(n, rotate(n, heads(n, q3, Hq), pos, 10, false), rotate(n, heads(n, k3, Hkv), pos, 10, false), heads(n, v3, Hkv));
}

//! The rotary move, then the attention fusion: the 3-D GQA form, no Transpose left.
void expectFlatGqaAfterRotaryMove(Network& net) {
  ASSERT_TRUE(rotaryBeforeHeadSplit(net));
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(fuseAttention(net));
  net.topoSort();
  net.inferShapes();
  const Layer* att = kiln::test::firstOp(net, "Attention");
  ASSERT_NE(att, nullptr);
  EXPECT_EQ(att->attrs.getInt("q_num_heads", 0), Hq);
  EXPECT_EQ(att->attrs.getInt("kv_num_heads", 0), Hkv);
  EXPECT_EQ(count(net, "Transpose"), 0);
}

//! A dynamic network (x [B, S, Hq*D], optionally pos [B, S]) rewritten in `net` agrees with a fresh
//! build of `make` at run shapes that were not samples.
void expectSameAtRunShapes(Network& net, const std::function<void(Network&)>& make, bool withPos, uint32_t seed) {
  for (auto [b, s] : {std::pair<int64_t, int64_t>{1, 4}, {3, 6}}) {
    std::map<std::string, HostTensor> in{{"x", randomTensor({b, s, Hq * D}, seed)}};
    if (withPos) {
      HostTensor pos(DataType::kINT64, {b, s});
      for (int64_t i = 0; i < b * s; ++i) pos.as<int64_t>()[i] = (5 * i + 2) % kMaxPos;
      in["pos"] = pos;
    }
    Network ref;
    make(ref);
    kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), kiln::test::evaluateReference(ref, in), 1e-5);
  }
}

}  // namespace

// Both rotations move (half-split and interleaved pairs), the outputs are unchanged, and the
// rotaries read the 3-D tensors.
TEST(PassRotaryBeforeHeadSplit, RotationsMoveAndValuesStay) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {B, S, Hq * D});
    Tensor* pos = n.addInput("pos", DataType::kINT64, {B, S});
    // Each rotation read by a layer (a rotation that is itself a network output stays).
    Tensor* a = rotate(n, heads(n, x, Hq), pos, 1, false);
    a = n.addElementWise(a, a, "Mul")->outputs[0];
    Tensor* b = rotate(n, heads(n, n.addElementWise(x, x, "Add")->outputs[0], Hq), pos, 3, true);
    b = n.addElementWise(b, b, "Add")->outputs[0];
    n.renameTensor(a, "a");
    n.markOutput(a);
    n.renameTensor(b, "b");
    n.markOutput(b);
  };
  const std::map<std::string, HostTensor> inputs{{"x", randomTensor({B, S, Hq * D}, 5)}, {"pos", positions()}};
  Network net;
  const auto want = kiln::test::referenceAndCopy(make, inputs, net);
  ASSERT_TRUE(rotaryBeforeHeadSplit(net));
  net.topoSort();
  net.inferShapes();
  int rotaries = 0;
  for (const auto& l : net.layers()) {
    if (l->op != "RotaryEmbedding") continue;
    ++rotaries;
    EXPECT_EQ(l->inputs[0]->dims, (Dims{B, S, Hq * D})) << l->name;
    EXPECT_EQ(l->attrs.getInt("num_heads", 0), Hq) << l->name;
  }
  EXPECT_EQ(rotaries, 2);
  EXPECT_EQ(count(net, "Transpose"), 2);  // the splits, now after the rotations
  kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, inputs), want, 1e-5);
}

// A head split read by something else too, or already rotated in 3-D, is left as it is.
TEST(PassRotaryBeforeHeadSplit, SharedSplitStays) {
  Network n;
  Tensor* x = n.addInput("x", DataType::kFLOAT, {B, S, Hq * D});
  Tensor* pos = n.addInput("pos", DataType::kINT64, {B, S});
  Tensor* split = heads(n, x, Hq);
  Tensor* r = rotate(n, split, pos, 1, false);
  n.markOutput(r);
  n.markOutput(split);  // the split is an output too
  n.topoSort();
  n.inferShapes();
  EXPECT_FALSE(rotaryBeforeHeadSplit(n));
}

// With GQA attention after the rotations, the attention fusion takes the 3-D form: no Transpose
// is left, and the network still computes the original outputs.
TEST(PassRotaryBeforeHeadSplit, GqaAttentionTakesTheFlatForm) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {B, S, Hq * D});
    Tensor* pos = n.addInput("pos", DataType::kINT64, {B, S});
    auto project = [&](int64_t out, uint32_t seed) {
      return n.addMatMul(x, n.addConstant("", randomTensor({Hq * D, out}, seed)))->outputs[0];
    };
    Tensor* y = gqaAttention(n, project(Hq * D, 20), project(Hkv * D, 21), project(Hkv * D, 22), pos);
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  const std::map<std::string, HostTensor> inputs{{"x", randomTensor({B, S, Hq * D}, 6)}, {"pos", positions()}};
  Network net;
  const auto want = kiln::test::referenceAndCopy(make, inputs, net);
  expectFlatGqaAfterRotaryMove(net);
  kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, inputs), want, 2e-5);
}

// Qwen3: Q and K normalized per head (RMSNormalization over D of the [B, S, H, D] view) before the
// head transpose. The rotations still move (the norm's output viewed as [B, S, H*D]) and the
// attention takes the 3-D form: no Transpose left; values unchanged.
TEST(PassRotaryBeforeHeadSplit, HeadwiseNormBeforeTheSplitMovesToo) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {B, S, Hq * D});
    Tensor* pos = n.addInput("pos", DataType::kINT64, {B, S});
    auto project = [&](int64_t h, uint32_t seed) {
      return n.addMatMul(x, n.addConstant("", randomTensor({Hq * D, h * D}, seed)))->outputs[0];
    };
    auto normedHeads = [&](Tensor* p, int64_t h, uint32_t seed) {
      Attributes a;
      a.set("axis", int64_t(-1));
      Tensor* x4 = kiln::test::addReshape(n, p, {B, S, h, D})->outputs[0];
      Tensor* normed = n.addLayer("RMSNormalization", {x4, n.addConstant("", randomTensor({D}, seed, 0.5f, 1.5f))}, 1, a)->outputs[0];
      return kiln::test::addPermute(n, normed, {0, 2, 1, 3})->outputs[0];
    };
    Tensor* q = rotate(n, normedHeads(project(Hq, 30), Hq, 33), pos, 10, false);
    Tensor* k = rotate(n, normedHeads(project(Hkv, 31), Hkv, 34), pos, 10, false);
    Tensor* y = attendGqa(n, q, k, heads(n, project(Hkv, 32), Hkv));
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  const std::map<std::string, HostTensor> inputs{{"x", randomTensor({B, S, Hq * D}, 7)}, {"pos", positions()}};
  Network net;
  const auto want = kiln::test::referenceAndCopy(make, inputs, net);
  expectFlatGqaAfterRotaryMove(net);
  EXPECT_EQ(count(net, "RMSNormalization"), 2);
  kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, inputs), want, 2e-5);
}

// A dynamic export (batch and sequence unknown, the split a Reshape to [0, 0, H, D], its dims also
// read by a Shape): the move is proved at the sample shapes (none given: it stays), and the moved
// network agrees with the original at run shapes that are not samples.
TEST(PassRotaryBeforeHeadSplit, DynamicBatchAndSequence) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {-1, -1, Hq * D});
    Tensor* pos = n.addInput("pos", DataType::kINT64, {-1, -1});
    Tensor* x4 = kiln::test::addReshape(n, x, {0, 0, Hq, D})->outputs[0];
    Tensor* split = kiln::test::addPermute(n, x4, {0, 2, 1, 3})->outputs[0];
    Tensor* r = rotate(n, split, pos, 7, false);
    r = n.addElementWise(r, r, "Mul")->outputs[0];
    n.renameTensor(r, "y");
    n.markOutput(r);
    // The split's dims read by a Shape too, as the rotary fusion's run-time positions do.
    Tensor* dims = n.addLayer("Shape", {split}, 1)->outputs[0];
    n.renameTensor(dims, "split_dims");
    n.markOutput(dims);
  };
  auto sample = [](int64_t b, int64_t s) { return std::map<std::string, Dims>{{"x", {b, s, Hq * D}}, {"pos", {b, s}}}; };
  {
    Network net;
    make(net);
    net.topoSort();
    net.inferShapes();
    EXPECT_FALSE(rotaryBeforeHeadSplit(net)) << "nothing proves B and S carried through without samples";
  }
  Network net;
  make(net);
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(rotaryBeforeHeadSplit(net, {sample(2, 5), sample(3, 7)}));
  net.topoSort();
  net.inferShapes();
  const Layer* rope = kiln::test::firstOp(net, "RotaryEmbedding");
  ASSERT_NE(rope, nullptr);
  EXPECT_EQ(rope->inputs[0]->name, "x");
  expectSameAtRunShapes(net, make, true, 8);
}

// A dynamic Qwen3-style export: RMSNorm per head on the [B, S, H, D] view before the head
// Transpose, batch and sequence unknown. The view pair copies them (shape entries 0), the move is
// proved at the samples, and the moved network agrees at run shapes that are not samples.
TEST(PassRotaryBeforeHeadSplit, DynamicHeadwiseNormMovesToo) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {-1, -1, Hq * D});
    Tensor* pos = n.addInput("pos", DataType::kINT64, {-1, -1});
    Attributes a;
    a.set("axis", int64_t(-1));
    Tensor* x4 = kiln::test::addReshape(n, x, {0, 0, Hq, D})->outputs[0];
    Tensor* normed = n.addLayer("RMSNormalization", {x4, n.addConstant("", randomTensor({D}, 35, 0.5f, 1.5f))}, 1, a)->outputs[0];
    Tensor* r = rotate(n, kiln::test::addPermute(n, normed, {0, 2, 1, 3})->outputs[0], pos, 7, false);
    r = n.addElementWise(r, r, "Mul")->outputs[0];
    n.renameTensor(r, "y");
    n.markOutput(r);
  };
  auto sample = [](int64_t b, int64_t s) { return std::map<std::string, Dims>{{"x", {b, s, Hq * D}}, {"pos", {b, s}}}; };
  Network net;
  make(net);
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(rotaryBeforeHeadSplit(net, {sample(2, 5), sample(3, 7)}));
  net.topoSort();
  net.inferShapes();
  const Layer* rope = kiln::test::firstOp(net, "RotaryEmbedding");
  ASSERT_NE(rope, nullptr);
  EXPECT_EQ(rope->attrs.getInt("num_heads", 0), Hq);
  expectSameAtRunShapes(net, make, true, 9);
}

// Falcon-style fused Q / K / V: one projection [B, S, (Hq + 2 Hkv) D] viewed as heads and split on
// the head axis. splitBeforeHeadReshape splits the 3-D projection instead (a head Reshape per
// part), after which the rotations move and the attention takes the 3-D form: no Transpose left,
// outputs unchanged. A split on another axis stays.
TEST(PassRotaryBeforeHeadSplit, FusedQkvSplitOnTheHeadAxisMovesFirst) {
  for (int64_t axis : {int64_t(2), int64_t(3)}) {
    SCOPED_TRACE("split axis " + std::to_string(axis));
    auto make = [axis](Network& n) {
      Tensor* x = n.addInput("x", DataType::kFLOAT, {B, S, Hq * D});
      Tensor* pos = n.addInput("pos", DataType::kINT64, {B, S});
      const int64_t g = Hq + 2 * Hkv;
      Tensor* qkv = n.addMatMul(x, n.addConstant("w", randomTensor({Hq * D, g * D}, 20)))->outputs[0];
      Tensor* x4 = kiln::test::addReshape(n, qkv, axis == 2 ? Dims{B, S, g, D} : Dims{B, S, Hq, g * D / Hq})->outputs[0];
      HostTensor sizes(DataType::kINT64, {3});
      const int64_t sz2[3] = {Hq, Hkv, Hkv}, sz3[3] = {D, (g * D / Hq - D) / 2, (g * D / Hq - D) / 2};
      for (int i = 0; i < 3; ++i) sizes.as<int64_t>()[i] = axis == 2 ? sz2[i] : sz3[i];
      Attributes a;
      a.set("axis", axis);
      Layer* split = n.addLayer("Split", {x4, n.addConstant("sizes", sizes)}, 3, a);
      auto head = [&](int i) { return kiln::test::addPermute(n, split->outputs[i], {0, 2, 1, 3})->outputs[0]; };
      Tensor* y = nullptr;
      if (axis == 2) {
        y = attendGqa(n, rotate(n, head(0), pos, 10, false), rotate(n, head(1), pos, 10, false), head(2));
      } else {
        y = n.addElementWise(split->outputs[1], split->outputs[2], "Add")->outputs[0];
      }
      n.renameTensor(y, "y");
      n.markOutput(y);
    };
    const std::map<std::string, HostTensor> inputs{{"x", randomTensor({B, S, Hq * D}, 6)}, {"pos", positions()}};
    Network net;
    const auto want = kiln::test::referenceAndCopy(make, inputs, net);
    ASSERT_EQ(splitBeforeHeadReshape(net), axis == 2);
    net.topoSort();
    net.inferShapes();
    if (axis == 2) expectFlatGqaAfterRotaryMove(net);
    kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, inputs), want, 2e-5);
  }
}

// The Falcon-style split of a dynamic export (batch and sequence unknown, the view a Reshape to
// [0, 0, G, D]): split before the view where the samples prove B and S carried through (none: it
// stays), the new head Reshapes copying them; the result agrees at run shapes that are not samples.
TEST(PassRotaryBeforeHeadSplit, DynamicFusedQkvSplitMovesFirst) {
  const int64_t g = Hq + 2 * Hkv;
  auto make = [g](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {-1, -1, Hq * D});
    Tensor* qkv = n.addMatMul(x, n.addConstant("w", randomTensor({Hq * D, g * D}, 21)))->outputs[0];
    Tensor* x4 = kiln::test::addReshape(n, qkv, {0, 0, g, D})->outputs[0];
    HostTensor sizes(DataType::kINT64, {3});
    sizes.as<int64_t>()[0] = Hq, sizes.as<int64_t>()[1] = Hkv, sizes.as<int64_t>()[2] = Hkv;
    Attributes a;
    a.set("axis", int64_t(2));
    Layer* split = n.addLayer("Split", {x4, n.addConstant("sizes", sizes)}, 3, a);
    Tensor* kv = n.addElementWise(split->outputs[1], split->outputs[2], "Mul")->outputs[0];  // [B, S, Hkv, D]
    Attributes heads;
    heads.set("axis", int64_t(2));
    Tensor* y = n.addLayer("Concat", {kv, split->outputs[0]}, 1, heads)->outputs[0];
    y = n.addActivation(y, "Relu")->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  {
    Network net;
    make(net);
    net.topoSort();
    net.inferShapes();
    EXPECT_FALSE(splitBeforeHeadReshape(net)) << "nothing proves B and S carried through without samples";
  }
  auto sample = [](int64_t b, int64_t s) { return std::map<std::string, Dims>{{"x", {b, s, Hq * D}}}; };
  Network net;
  make(net);
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(splitBeforeHeadReshape(net, {sample(2, 5), sample(3, 7)}));
  net.removeDeadLayers();
  net.topoSort();
  net.inferShapes();
  for (auto& l : net.layers())
    if (l->op == "Split") EXPECT_EQ(l->inputs[0]->dims.size(), 3u);
  expectSameAtRunShapes(net, make, false, 11);
}
