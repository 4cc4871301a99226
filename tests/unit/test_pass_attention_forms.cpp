// Attention forms the 4-D matcher did not take, rewritten by liftAttentionForms (or matched as
// they are) so that the attention fusion takes them: EfficientViT's product with transposed
// probabilities (v @ attn^T), rank-3 scores (one head per row), and one K / V head broadcast over
// the query heads (MobileNetV4's MQA). The fused network computes what the original does
// (reference kernels).
#include <gtest/gtest.h>

#include <functional>
#include <limits>

#include "builder/passes/passes.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::countOps;
using kiln::test::randomTensor;

namespace {

constexpr int64_t N = 4, S = 9, D = 8, Dv = 6;

HostTensor scalar(float v) {
  HostTensor t(DataType::kFLOAT, {});
  *t.as<float>() = v;
  return t;
}

Tensor* transpose(Network& n, Tensor* x, std::vector<int64_t> perm) { return kiln::test::addPermute(n, x, perm)->outputs[0]; }
Tensor* op(Network& n, const char* name, Tensor* a, Tensor* b) { return n.addElementWise(a, b, name)->outputs[0]; }

void finish(Network& n, Tensor* y) {
  n.renameTensor(y, "y");
  n.markOutput(y);
}

//! Lifts, fuses and compares with the unfused network; `lifts`: whether liftAttentionForms changes it.
void checkLiftAndFuse(const std::function<void(Network&)>& make, const std::map<std::string, HostTensor>& inputs, bool lifts,
                      bool fuses, int transposesLeft = -1) {
  Network net;
  const auto want = kiln::test::referenceAndCopy(make, inputs, net);
  EXPECT_EQ(liftAttentionForms(net), lifts);
  net.topoSort();
  net.inferShapes();
  EXPECT_EQ(fuseAttention(net), fuses);
  EXPECT_EQ(countOps(net, "Attention"), fuses ? 1 : 0);
  EXPECT_EQ(countOps(net, "Softmax"), fuses ? 0 : 1);
  net.removeDeadLayers();
  if (transposesLeft >= 0) EXPECT_EQ(countOps(net, "Transpose"), transposesLeft);
  kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, inputs), want, 2e-5);
}

HostTensor bias(int64_t seed) { return randomTensor({S, S}, static_cast<uint32_t>(seed), -2.f, 2.f); }

}  // namespace

// timm's EfficientViT (cascaded group attention): q, k, v channel-first [N, D, S]; scores
// q^T k + bias, feat = v @ attn^T ([N, Dv, S]).
TEST(PassAttentionForms, TransposedProbabilityProductFuses) {
  auto make = [](Network& n) {
    Tensor* q = n.addInput("q", DataType::kFLOAT, {N, D, S});
    Tensor* k = n.addInput("k", DataType::kFLOAT, {N, D, S});
    Tensor* v = n.addInput("v", DataType::kFLOAT, {N, Dv, S});
    Tensor* s = n.addMatMul(transpose(n, op(n, "Mul", q, n.addConstant("", scalar(0.35f))), {0, 2, 1}), k)->outputs[0];
    s = op(n, "Add", s, n.addConstant("bias", bias(3)));
    Tensor* p = n.addSoftmax(s, -1)->outputs[0];
    finish(n, n.addMatMul(v, transpose(n, p, {0, 2, 1}))->outputs[0]);
  };
  checkLiftAndFuse(make, {{"q", randomTensor({N, D, S}, 1)}, {"k", randomTensor({N, D, S}, 2)}, {"v", randomTensor({N, Dv, S}, 3)}},
                   true, true);
}

// Rank-3 attention with a run-time rank-3 bias (viewed as [N, 1, S, S]) or a constant [S, S] one
// (broadcasts as it is); a softmax over the other axis is no attention and stays.
TEST(PassAttentionForms, RankThreeScoresFuseWithOneHead) {
  for (int form : {0, 1, 2}) {
    SCOPED_TRACE(form == 0 ? "run-time [N, S, S] bias" : form == 1 ? "constant [S, S] bias" : "softmax over the queries");
    auto make = [form](Network& n) {
      Tensor* q = n.addInput("q", DataType::kFLOAT, {N, S, D});
      Tensor* k = n.addInput("k", DataType::kFLOAT, {N, S, D});
      Tensor* v = n.addInput("v", DataType::kFLOAT, {N, S, Dv});
      Tensor* s = op(n, "Mul", n.addMatMul(q, transpose(n, k, {0, 2, 1}))->outputs[0], n.addConstant("", scalar(0.3f)));
      s = op(n, "Add", s, form == 0 ? n.addInput("bias", DataType::kFLOAT, {N, S, S}) : n.addConstant("bias", bias(4)));
      finish(n, n.addActivation(n.addMatMul(n.addSoftmax(s, form == 2 ? 1 : -1)->outputs[0], v)->outputs[0], "Relu")->outputs[0]);
    };
    std::map<std::string, HostTensor> in{{"q", randomTensor({N, S, D}, 5)}, {"k", randomTensor({N, S, D}, 6)}, {"v", randomTensor({N, S, Dv}, 7)}};
    if (form == 0) in["bias"] = randomTensor({N, S, S}, 8, -2.f, 2.f);
    checkLiftAndFuse(make, in, form != 2, form != 2);
  }
}

// MobileNetV4's MQA: Q [B, H, S, D] against one K / V head [B, 1, ..] that the MatMuls broadcast;
// K given transposed ([B, 1, D, S], from a conv) and Q and K scaled apart. Fuses with one KV head.
TEST(PassAttentionForms, BroadcastSingleKvHeadIsMultiQueryAttention) {
  constexpr int64_t B = 2, H = 4;
  auto make = [](Network& n) {
    Tensor* q = op(n, "Mul", n.addInput("q", DataType::kFLOAT, {B, H, S, D}), n.addConstant("", scalar(0.6f)));
    Tensor* kt = op(n, "Mul", n.addInput("kt", DataType::kFLOAT, {B, 1, D, S}), n.addConstant("", scalar(0.5f)));
    Tensor* p = n.addSoftmax(n.addMatMul(q, kt)->outputs[0], -1)->outputs[0];
    finish(n, n.addMatMul(p, n.addInput("v", DataType::kFLOAT, {B, 1, S, Dv}))->outputs[0]);
  };
  checkLiftAndFuse(make, {{"q", randomTensor({B, H, S, D}, 9)}, {"kt", randomTensor({B, 1, D, S}, 10)}, {"v", randomTensor({B, 1, S, Dv}, 11)}},
                   false, true);
}

// timm's NesT: scores [B, H, T, S, S] (T blocks). The chain runs as [B, H*T, S, S] (K^T's
// Transpose redone in 4-D, so K is read in place: no Transpose left). A mask [T, S, S] (MaxViT's
// per-head bias over its [B, G, H, S, S] grid) makes it [B*H, T, S, S] instead; one of
// [1, H, 1, S, S] broadcasts differently however the dims are grouped and keeps the chain.
TEST(PassAttentionForms, RankFiveScoresFuseWithMergedHeads) {
  constexpr int64_t B = 2, H = 3, T = 4;
  for (const Dims& maskDims : {Dims{1, 1, 1, S, S}, Dims{T, S, S}, Dims{1, H, 1, S, S}}) {
    const bool fuses = maskDims[1] != H;
    SCOPED_TRACE("mask " + toString(maskDims));
    auto make = [&maskDims](Network& n) {
      Tensor* q = n.addInput("q", DataType::kFLOAT, {B, H, T, S, D});
      Tensor* k = n.addInput("k", DataType::kFLOAT, {B, H, T, S, D});
      Tensor* v = n.addInput("v", DataType::kFLOAT, {B, H, T, S, Dv});
      Tensor* s = n.addMatMul(q, transpose(n, k, {0, 1, 2, 4, 3}))->outputs[0];
      s = op(n, "Add", s, n.addConstant("mask", randomTensor(maskDims, 12, -2.f, 2.f)));
      Tensor* y = n.addMatMul(n.addSoftmax(s, -1)->outputs[0], v)->outputs[0];
      finish(n, n.addActivation(y, "Relu")->outputs[0]);
    };
    checkLiftAndFuse(make,
                     {{"q", randomTensor({B, H, T, S, D}, 13)}, {"k", randomTensor({B, H, T, S, D}, 14)},
                      {"v", randomTensor({B, H, T, S, Dv}, 15)}},
                     fuses, fuses, fuses ? 0 : -1);
  }
}

// GPTBigCode's MQA: one fused projection [B, S, E + 2D] unsqueezed to [B, 1, S, ..] and split into
// Q (head-split after) and one K / V head. splitBeforeHeadReshape splits the 3-D projection instead,
// and the attention takes the 3-D form with one KV head: no Transpose left; values unchanged.
TEST(PassAttentionForms, UnsqueezedFusedProjectionSplitIsMultiQueryAttention) {
  constexpr int64_t B = 2, H = 4, E = H * D;
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {B, S, E});
    Tensor* p = n.addMatMul(x, n.addConstant("w", randomTensor({E, E + 2 * D}, 16)))->outputs[0];
    HostTensor one(DataType::kINT64, {1}), sizes(DataType::kINT64, {3});
    *one.as<int64_t>() = 1;
    sizes.as<int64_t>()[0] = E, sizes.as<int64_t>()[1] = D, sizes.as<int64_t>()[2] = D;
    Tensor* u = n.addLayer("Unsqueeze", {p, n.addConstant("", one)}, 1)->outputs[0];  // [B, 1, S, E + 2D]
    Attributes a;
    a.set("axis", int64_t(3));
    Layer* split = n.addLayer("Split", {u, n.addConstant("", sizes)}, 3, a);
    Tensor* q = transpose(n, kiln::test::addReshape(n, split->outputs[0], {B, S, H, D})->outputs[0], {0, 2, 1, 3});
    Tensor* s = op(n, "Mul", n.addMatMul(q, transpose(n, split->outputs[1], {0, 1, 3, 2}))->outputs[0], n.addConstant("", scalar(0.35f)));
    Tensor* y = n.addMatMul(n.addSoftmax(s, -1)->outputs[0], split->outputs[2])->outputs[0];
    finish(n, kiln::test::addReshape(n, transpose(n, y, {0, 2, 1, 3}), {B, S, E})->outputs[0]);
  };
  const std::map<std::string, HostTensor> in{{"x", randomTensor({B, S, E}, 17)}};
  Network net;
  const auto want = kiln::test::referenceAndCopy(make, in, net);
  ASSERT_TRUE(splitBeforeHeadReshape(net));
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(fuseAttention(net));
  net.removeDeadLayers();
  const Layer* att = kiln::test::firstOp(net, "Attention");
  ASSERT_NE(att, nullptr);
  EXPECT_EQ(att->attrs.getInt("q_num_heads", 0), H);
  EXPECT_EQ(att->attrs.getInt("kv_num_heads", 0), 1);
  EXPECT_EQ(countOps(net, "Transpose"), 0);
  kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), want, 2e-5);
}

// XGLM: causal finfo.min mask added to the 4-D scores, clamped by Max(scores, finfo.min), softmax
// over the scores viewed as [B*H, S, S] and viewed back. With the causal mask alone (no row fully
// masked) the clamp changes nothing and it fuses; with a run-time mask that might mask a whole row
// (uniform there under the clamp, not what the fused layer gives) it stays. Values unchanged.
TEST(PassAttentionForms, ClampedScoresSoftmaxedOverMergedHeadsFuse) {
  constexpr int64_t B = 2, H = 3;
  for (bool runtimeMask : {false, true}) {
    SCOPED_TRACE(runtimeMask ? "run-time mask (stays)" : "causal mask");
    auto make = [runtimeMask](Network& n) {
      Tensor* q = n.addInput("q", DataType::kFLOAT, {B, H, S, D});
      Tensor* k = n.addInput("k", DataType::kFLOAT, {B, H, S, D});
      Tensor* v = n.addInput("v", DataType::kFLOAT, {B, H, S, D});
      const float lowest = std::numeric_limits<float>::lowest();
      HostTensor causal(DataType::kFLOAT, {1, 1, S, S});
      for (int64_t i = 0; i < S; ++i)
        for (int64_t j = 0; j < S; ++j) causal.as<float>()[i * S + j] = j <= i ? 0.f : lowest;
      Tensor* s = op(n, "Mul", n.addMatMul(q, transpose(n, k, {0, 1, 3, 2}))->outputs[0], n.addConstant("", scalar(0.35f)));
      s = op(n, "Add", s, runtimeMask ? n.addInput("mask", DataType::kFLOAT, {B, 1, S, S}) : n.addConstant("causal", causal));
      s = op(n, "Max", s, n.addConstant("", scalar(lowest)));
      Tensor* p = n.addSoftmax(kiln::test::addReshape(n, s, {B * H, S, S})->outputs[0], -1)->outputs[0];
      Tensor* y = n.addMatMul(kiln::test::addReshape(n, p, {B, H, S, S})->outputs[0], v)->outputs[0];
      finish(n, n.addActivation(y, "Relu")->outputs[0]);
    };
    std::map<std::string, HostTensor> in{{"q", randomTensor({B, H, S, D}, 18)}, {"k", randomTensor({B, H, S, D}, 19)},
                                         {"v", randomTensor({B, H, S, D}, 20)}};
    if (runtimeMask) {
      HostTensor m(DataType::kFLOAT, {B, 1, S, S});
      for (int64_t i = 0; i < m.count(); ++i) m.as<float>()[i] = (i % 5 == 0) ? std::numeric_limits<float>::lowest() : 0.f;
      in["mask"] = m;
    }
    Network net;
    const auto want = kiln::test::referenceAndCopy(make, in, net);
    ASSERT_TRUE(liftMergedHeads(net));
    net.topoSort();
    net.inferShapes();
    EXPECT_EQ(fuseAttention(net), !runtimeMask);
    EXPECT_EQ(countOps(net, "Softmax"), runtimeMask ? 1 : 0);
    kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), want, 2e-5);
  }
}

// The same lifts with a dynamic batch: the views copy it (rank 3, or the first group alone) or infer
// it (the first group merged: [B*H, T, S, S] under a [T, S, S] mask). Agrees at batches it was not
// built at.
TEST(PassAttentionForms, DynamicBatchLiftsToo) {
  constexpr int64_t H = 3, T = 4;
  for (int form : {0, 1, 2}) {
    SCOPED_TRACE(form == 0 ? "rank 3" : form == 1 ? "rank 5, [1, 1, 1, S, S] mask" : "rank 5, [T, S, S] mask");
    const Dims lead = form == 0 ? Dims{-1} : Dims{-1, H, T};
    auto dims = [&](int64_t b, int64_t x, int64_t y) {
      Dims d = lead;
      d[0] = b;
      d.push_back(x);
      d.push_back(y);
      return d;
    };
    auto make = [&](Network& n) {
      Tensor* q = n.addInput("q", DataType::kFLOAT, dims(-1, S, D));
      Tensor* k = n.addInput("k", DataType::kFLOAT, dims(-1, S, D));
      Tensor* v = n.addInput("v", DataType::kFLOAT, dims(-1, S, Dv));
      std::vector<int64_t> perm(dims(-1, S, D).size());
      for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
      std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
      Tensor* s = op(n, "Mul", n.addMatMul(q, transpose(n, k, perm))->outputs[0], n.addConstant("", scalar(0.3f)));
      if (form > 0) s = op(n, "Add", s, n.addConstant("mask", randomTensor(form == 1 ? Dims{1, 1, 1, S, S} : Dims{T, S, S}, 21, -2.f, 2.f)));
      Tensor* y = n.addMatMul(n.addSoftmax(s, -1)->outputs[0], v)->outputs[0];
      finish(n, n.addActivation(y, "Relu")->outputs[0]);
    };
    Network net;
    make(net);
    net.topoSort();
    net.inferShapes();
    ASSERT_TRUE(liftAttentionForms(net));
    net.topoSort();
    net.inferShapes();
    ASSERT_TRUE(fuseAttention(net));
    EXPECT_EQ(countOps(net, "Softmax"), 0);
    for (int64_t b : {1, 3}) {
      const std::map<std::string, HostTensor> in{{"q", randomTensor(dims(b, S, D), 22)}, {"k", randomTensor(dims(b, S, D), 23)},
                                                 {"v", randomTensor(dims(b, S, Dv), 24)}};
      Network ref;
      make(ref);
      kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), kiln::test::evaluateReference(ref, in), 2e-5);
    }
  }
}
