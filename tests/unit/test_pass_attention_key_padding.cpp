// The attention fusion's key-padding analysis (fuse_attention_key_padding.cpp) on transformers'
// mask construction written out by hand: causal (or all-true) constant And bool key flags, Expand
// to [B, 1, S, S], Where(m, 0, finfo.min), added to the scores. Proven masks become is_causal + the
// flags as a bool [B, 1, 1, S] mask + kiln_mask_fill, and the fused network computes what the
// unfused one does (reference kernels, rows with every key masked included); masks the proof does
// not cover keep the dense mask. The end-to-end check on real exports is
// tests/models/attention_masks_vs_ort.py.
#include <gtest/gtest.h>

#include <cmath>

#include "builder/passes/passes.h"
#include "ops/attention_config.h"
#include "reference_eval.h"

using namespace kiln;

namespace {

constexpr int64_t B = 3, H = 2, S = 10, D = 8;
constexpr float kMin = -3.4028235e38f;

HostTensor scalarOf(float v) {
  HostTensor t(DataType::kFLOAT, {});
  *t.as<float>() = v;
  return t;
}

HostTensor ints(std::vector<int64_t> v) {
  HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

//! [1, 1, S, S] bool: keep(i, j).
template <typename F>
HostTensor pattern(F keep) {
  HostTensor c(DataType::kBOOL, {1, 1, S, S});
  for (int64_t i = 0; i < S; ++i)
    for (int64_t j = 0; j < S; ++j) c.as<uint8_t>()[i * S + j] = keep(i, j);
  return c;
}

//! Q K^T / sqrt(D) + Where(Expand(And(pattern, Cast(flags [B, S] -> bool) viewed [B, 1, 1, S])), 0, fill); softmax; V.
//! constFlags: the flags are that constant (an all-ones attention_mask folded at build), not an input.
void build(Network& n, const HostTensor& keepPattern, float fill, const HostTensor* constFlags = nullptr) {
  Tensor* q = n.addInput("q", DataType::kFLOAT, {B, H, S, D});
  Tensor* k = n.addInput("k", DataType::kFLOAT, {B, H, S, D});
  Tensor* v = n.addInput("v", DataType::kFLOAT, {B, H, S, D});
  Tensor* flags = constFlags ? n.addConstant("mask_const", *constFlags) : n.addInput("mask", DataType::kINT64, {B, S});
  Attributes toBool;
  toBool.set("to", int64_t(9));  // ONNX BOOL
  Tensor* kb = flags->type == DataType::kBOOL ? flags : n.addLayer("Cast", {flags}, 1, toBool)->outputs[0];  // folded: already bool
  Tensor* k4 = n.addLayer("Reshape", {kb, n.addConstant("", ints({B, 1, 1, S}))}, 1)->outputs[0];
  Tensor* both = n.addLayer("And", {n.addConstant("", keepPattern), k4}, 1)->outputs[0];
  Tensor* dense = n.addLayer("Expand", {both, n.addConstant("", ints({B, 1, S, S}))}, 1)->outputs[0];
  Tensor* m = n.addLayer("Where", {dense, n.addConstant("", scalarOf(0.f)), n.addConstant("", scalarOf(fill))}, 1)->outputs[0];
  Attributes perm;
  perm.set("perm", std::vector<int64_t>{0, 1, 3, 2});
  Tensor* s = n.addMatMul(q, n.addLayer("Transpose", {k}, 1, perm)->outputs[0])->outputs[0];
  s = n.addElementWise(s, n.addConstant("", scalarOf(1.f / std::sqrt(static_cast<float>(D)))), "Mul")->outputs[0];
  s = n.addElementWise(s, m, "Add")->outputs[0];
  Tensor* y = n.addMatMul(n.addSoftmax(s, -1)->outputs[0], v)->outputs[0];
  n.renameTensor(y, "y");
  n.markOutput(y);
}

//! Flags with right padding, left padding (rows with no key) and an all-zero sequence.
HostTensor flagsInput() {
  HostTensor f(DataType::kINT64, {B, S});
  for (int64_t j = 0; j < S; ++j) {
    f.as<int64_t>()[j] = j < 6;           // right padding
    f.as<int64_t>()[S + j] = j >= 4 ? 7 : 0;  // left padding, a non-1 "true" value
    f.as<int64_t>()[2 * S + j] = 0;       // all padding
  }
  return f;
}

const Layer* fusedAttention(Network& n) {
  n.topoSort();
  n.inferShapes();
  EXPECT_TRUE(fuseAttention(n));
  for (auto& l : n.layers())
    if (l->op == "Attention") return l.get();
  return nullptr;
}

void expectSameOutputs(const HostTensor& keep, float fill, Network& fused, const HostTensor* constFlags = nullptr) {
  Network ref;
  build(ref, keep, fill, constFlags);
  const std::map<std::string, HostTensor> in{{"q", test::randomTensor({B, H, S, D}, 1, -2.f, 2.f)},
                                             {"k", test::randomTensor({B, H, S, D}, 2, -2.f, 2.f)},
                                             {"v", test::randomTensor({B, H, S, D}, 3)},
                                             {"mask", flagsInput()}};
  const HostTensor want = test::evaluateReference(ref, in).at("y"), got = test::evaluateReference(fused, in).at("y");
  ASSERT_EQ(got.dims(), want.dims());
  for (int64_t i = 0; i < want.count(); ++i) {
    const double w = want.getDouble(i);
    if (std::isnan(w)) ASSERT_EQ(got.getDouble(i), 0.0) << i;  // -inf everywhere: NaN unfused, 0 fused (the NaN guard's value)
    else ASSERT_NEAR(got.getDouble(i), w, 2e-5 * (1 + std::fabs(w))) << i;
  }
}

}  // namespace

TEST(PassAttentionKeyPadding, CausalAndPaddingBecomeKeyFlags) {
  const HostTensor causal = pattern([](int64_t i, int64_t j) { return j <= i; });
  Network n;
  build(n, causal, kMin);
  const Layer* a = fusedAttention(n);
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->inputs.size(), 4u);
  EXPECT_EQ(a->inputs[3]->type, DataType::kBOOL);
  EXPECT_EQ(a->inputs[3]->dims, (Dims{B, 1, 1, S}));
  EXPECT_EQ(a->attrs.getInt("is_causal", 0), 1);
  EXPECT_FLOAT_EQ(a->attrs.getFloat(kAttentionMaskFillAttr, 0.f), kMin);
  expectSameOutputs(causal, kMin, n);
}

TEST(PassAttentionKeyPadding, PaddingOnlyAndMinusInfinity) {
  const HostTensor all = pattern([](int64_t, int64_t) { return true; });
  Network n;
  build(n, all, -INFINITY);
  const Layer* a = fusedAttention(n);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->inputs[3]->type, DataType::kBOOL);
  EXPECT_EQ(a->attrs.getInt("is_causal", 0), 0);
  EXPECT_FALSE(a->attrs.has(kAttentionMaskFillAttr));  // -inf: ONNX's own bool-mask semantics
  expectSameOutputs(all, -INFINITY, n);
}

TEST(PassAttentionKeyPadding, UnprovenMasksStayDense) {
  // A sliding window (not causal), and a fill that does not absorb the scores: the dense mask stays.
  const HostTensor window = pattern([](int64_t i, int64_t j) { return j <= i && i - j < 3; });
  for (auto [keep, fill] : {std::pair{window, kMin}, std::pair{pattern([](int64_t i, int64_t j) { return j <= i; }), -10000.f}}) {
    Network n;
    build(n, keep, fill);
    const Layer* a = fusedAttention(n);
    ASSERT_NE(a, nullptr);
    ASSERT_EQ(a->inputs.size(), 4u);
    EXPECT_EQ(a->inputs[3]->type, DataType::kFLOAT);
    EXPECT_EQ(a->inputs[3]->dims, (Dims{B, 1, S, S}));
    EXPECT_FALSE(a->attrs.has(kAttentionMaskFillAttr));
    expectSameOutputs(keep, fill, n);
  }
}

// The flags folded to a constant (transformers called with attention_mask = ones_like(ids)) and
// And-ed with the causal pattern into a [B, 1, S, S] mask above the fold limit (B * S * S > 2^22:
// left as layers, as in LLaMA at batch 8, sequence 1024): all true, the attention is is_causal with
// no mask; with padding, the constant flags become the bool [B, 1, 1, S] key mask.
TEST(PassAttentionKeyPadding, ConstantFlagsAboveTheFoldLimitBecomeThePatternAlone) {
  constexpr int64_t b = 5, s = 1024, h = 1, d = 4;
  auto make = [&](Network& n, const HostTensor& flags) {
    Tensor* q = n.addInput("q", DataType::kFLOAT, {b, h, s, d});
    Tensor* k = n.addInput("k", DataType::kFLOAT, {b, h, s, d});
    Tensor* v = n.addInput("v", DataType::kFLOAT, {b, h, s, d});
    HostTensor causal(DataType::kBOOL, {1, 1, s, s});
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j) causal.as<uint8_t>()[i * s + j] = j <= i;
    Tensor* k4 = n.addConstant("flags", flags);  // folded: [B, 1, 1, S] bool
    Tensor* both = n.addLayer("And", {n.addConstant("causal", causal), k4}, 1)->outputs[0];  // 5M elements: not folded
    Tensor* m = n.addLayer("Where", {both, n.addConstant("", scalarOf(0.f)), n.addConstant("", scalarOf(kMin))}, 1)->outputs[0];
    Attributes perm;
    perm.set("perm", std::vector<int64_t>{0, 1, 3, 2});
    Tensor* sc = n.addMatMul(q, n.addLayer("Transpose", {k}, 1, perm)->outputs[0])->outputs[0];
    sc = n.addElementWise(n.addElementWise(sc, n.addConstant("", scalarOf(0.5f)), "Mul")->outputs[0], m, "Add")->outputs[0];
    Tensor* y = n.addMatMul(n.addSoftmax(sc, -1)->outputs[0], v)->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  HostTensor ones(DataType::kBOOL, {b, 1, 1, s}), padded(DataType::kBOOL, {b, 1, 1, s});
  for (int64_t i = 0; i < b * s; ++i) {
    ones.as<uint8_t>()[i] = 1;
    padded.as<uint8_t>()[i] = (i % s) < s - 100 * (i / s);  // batch r keeps its first S - 100 r keys
  }
  Network n;
  make(n, ones);
  const Layer* a = fusedAttention(n);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->inputs.size(), 3u);  // no mask
  EXPECT_EQ(a->attrs.getInt("is_causal", 0), 1);

  Network p;
  make(p, padded);
  const Layer* c = fusedAttention(p);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->inputs.size(), 4u);
  EXPECT_EQ(c->inputs[3]->type, DataType::kBOOL);
  EXPECT_EQ(c->inputs[3]->dims, (Dims{b, 1, 1, s}));
  EXPECT_EQ(c->attrs.getInt("is_causal", 0), 1);
  Network ref;
  make(ref, padded);
  const std::map<std::string, HostTensor> in{{"q", test::randomTensor({b, h, s, d}, 4, -2.f, 2.f)},
                                             {"k", test::randomTensor({b, h, s, d}, 5, -2.f, 2.f)},
                                             {"v", test::randomTensor({b, h, s, d}, 6)}};
  const HostTensor want = test::evaluateReference(ref, in).at("y"), got = test::evaluateReference(p, in).at("y");
  ASSERT_EQ(got.dims(), want.dims());
  for (int64_t i = 0; i < want.count(); ++i) ASSERT_NEAR(got.getDouble(i), want.getDouble(i), 2e-5 * (1 + std::fabs(want.getDouble(i)))) << i;
}
