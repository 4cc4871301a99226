// The attention fusion on dynamic networks (issue 23): the strided-view form (Q, K, V read in
// place from a packed projection, the head merge done by the write) is traced at the profile's
// sample shapes and stored as expressions of the run's dims (kiln_view_exprs), so a dynamic
// export loses the same copies as a fixed one. Checked against the unfused network at shapes
// other than the samples, through the pass alone and through a built engine.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "builder/passes/passes.h"
#include "builder/passes/view_exprs.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::addPermute;
using kiln::test::addReshape;
using kiln::test::randomTensor;

namespace {

constexpr int64_t H = 3, D = 8, E = H * D, N = 5;

int count(const Network& n, const std::string& op) { return kiln::test::countOps(n, op); }
const Layer* attentionLayer(const Network& n) { return kiln::test::firstOp(n, "Attention"); }

HostTensor ints(std::vector<int64_t> v, bool scalar = false) {
  HostTensor t(DataType::kINT64, scalar ? Dims{} : Dims{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

Tensor* permute(Network& n, Tensor* x, std::vector<int64_t> perm) { return addPermute(n, x, perm)->outputs[0]; }
Tensor* reshape(Network& n, Tensor* x, std::vector<int64_t> dims) { return addReshape(n, x, dims)->outputs[0]; }

//! softmax(Q K^T / sqrt(D)) V, K given as [B, H, S, D].
Tensor* sdpa(Network& n, Tensor* q, Tensor* k, Tensor* v) {
  HostTensor s(DataType::kFLOAT, {});
  *s.as<float>() = 1.0f / std::sqrt(static_cast<float>(D));
  Tensor* scores = n.addMatMul(q, permute(n, k, {0, 1, 3, 2}))->outputs[0];
  scores = n.addElementWise(scores, n.addConstant("", s), "Mul")->outputs[0];
  return n.addMatMul(n.addSoftmax(scores, -1)->outputs[0], v)->outputs[0];
}

void finish(Network& n, Tensor* y) {
  n.renameTensor(y, "y");
  n.markOutput(y);
}

//! timm's ViT attention with a dynamic batch, as exported once the shape arithmetic is folded
//! (Reshape targets with 0 / -1): x [-1, N, E] -> packed projection -> [B, N, 3, H, D] ->
//! permute(2, 0, 3, 1, 4) -> Gather 0/1/2 -> attention -> transpose(1, 2) -> [B, N, E].
void makeVitBlock(Network& n) {
  Tensor* x = n.addInput("x", DataType::kFLOAT, {-1, N, E});
  Tensor* p = n.addMatMul(x, n.addConstant("w", randomTensor({E, 3 * E}, 3, -0.3f, 0.3f)))->outputs[0];
  p = n.addElementWise(p, n.addConstant("b", randomTensor({3 * E}, 4)), "Add")->outputs[0];
  Tensor* u = permute(n, reshape(n, p, {0, N, 3, H, D}), {2, 0, 3, 1, 4});
  Tensor* qkv[3];
  for (int i = 0; i < 3; ++i) {
    Attributes g;
    g.set("axis", int64_t(0));
    qkv[i] = n.addLayer("Gather", {u, n.addConstant("", ints({i}, true))}, 1, g)->outputs[0];
  }
  Tensor* y = sdpa(n, qkv[0], qkv[1], qkv[2]);
  finish(n, reshape(n, permute(n, y, {0, 2, 1, 3}), {-1, N, E}));
}

//! GPT-2's attention with dynamic batch and sequence: p [-1, -1, 3E] Split in three, heads split
//! by Reshape [0, 0, H, D] and Transpose, merged back to [0, 0, E].
void makeGpt2Block(Network& n) {
  Tensor* p = n.addInput("p", DataType::kFLOAT, {-1, -1, 3 * E});
  Attributes sa;
  sa.set("axis", int64_t(2));
  Layer* split = n.addLayer("Split", {p, n.addConstant("", ints({E, E, E}))}, 3, sa);
  Tensor* heads[3];
  for (int i = 0; i < 3; ++i) heads[i] = permute(n, reshape(n, split->outputs[i], {0, 0, H, D}), {0, 2, 1, 3});
  Tensor* y = sdpa(n, heads[0], heads[1], heads[2]);
  finish(n, reshape(n, permute(n, y, {0, 2, 1, 3}), {0, 0, E}));
}

//! Fuses a copy of `make`'s network with the sample shapes; the fused network must agree with the
//! unfused one at every shape in `runs`.
void checkDynamicFusion(const std::function<void(Network&)>& make, const std::string& input, const InputSamples& samples,
                        const std::vector<Dims>& runs, const std::function<void(const Network&)>& inspect) {
  Network net;
  make(net);
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(fuseAttention(net, {}, samples));
  inspect(net);
  uint32_t seed = 40;
  for (const Dims& d : runs) {
    Network ref;
    make(ref);
    const std::map<std::string, HostTensor> in{{input, randomTensor(d, seed++)}};
    const auto want = kiln::test::evaluateReference(ref, in).at("y");
    const auto got = kiln::test::evaluateReference(net, in).at("y");
    ASSERT_EQ(got.dims(), want.dims()) << toString(d);
    for (int64_t i = 0; i < want.count(); ++i)
      ASSERT_NEAR(got.getDouble(i), want.getDouble(i), 2e-5 * (1 + std::fabs(want.getDouble(i)))) << toString(d) << " [" << i << "]";
  }
}

//! BERT's padding mask with dynamic batch and sequence, the Expand target computed from the
//! flags' shape: Where(Expand(Unsqueeze(Cast(flags [B, S] -> bool)), [B, 1, S, S]), 0, finfo.min)
//! added to Q K^T / sqrt(D); q, k, v [B, H, S, D].
void makePaddedBlock(Network& n) {
  Tensor* q = n.addInput("q", DataType::kFLOAT, {-1, H, -1, D});
  Tensor* k = n.addInput("k", DataType::kFLOAT, {-1, H, -1, D});
  Tensor* v = n.addInput("v", DataType::kFLOAT, {-1, H, -1, D});
  Tensor* flags = n.addInput("mask", DataType::kINT64, {-1, -1});
  Attributes toBool;
  toBool.set("to", int64_t(9));  // ONNX BOOL
  Tensor* kb = n.addLayer("Cast", {flags}, 1, toBool)->outputs[0];
  Tensor* k4 = n.addLayer("Unsqueeze", {kb, n.addConstant("", ints({1, 2}))}, 1)->outputs[0];
  Tensor* shape = n.addLayer("Shape", {flags}, 1)->outputs[0];
  Attributes axis0;
  axis0.set("axis", int64_t(0));
  Tensor* b = n.addLayer("Gather", {shape, n.addConstant("", ints({0}))}, 1, axis0)->outputs[0];
  Tensor* s = n.addLayer("Gather", {shape, n.addConstant("", ints({1}))}, 1, axis0)->outputs[0];
  Tensor* target = n.addLayer("Concat", {b, n.addConstant("", ints({1})), s, s}, 1, axis0)->outputs[0];
  Tensor* dense = n.addLayer("Expand", {k4, target}, 1)->outputs[0];
  HostTensor zero(DataType::kFLOAT, {}), fill(DataType::kFLOAT, {});
  *zero.as<float>() = 0.f;
  *fill.as<float>() = -3.4028235e38f;
  Tensor* m = n.addLayer("Where", {dense, n.addConstant("", zero), n.addConstant("", fill)}, 1)->outputs[0];
  HostTensor sc(DataType::kFLOAT, {});
  *sc.as<float>() = 1.0f / std::sqrt(static_cast<float>(D));
  Tensor* scores = n.addMatMul(q, permute(n, k, {0, 1, 3, 2}))->outputs[0];
  scores = n.addElementWise(n.addElementWise(scores, n.addConstant("", sc), "Mul")->outputs[0], m, "Add")->outputs[0];
  finish(n, n.addMatMul(n.addSoftmax(scores, -1)->outputs[0], v)->outputs[0]);
}


//! A decoder's mask from ids alone (transformers 5.17 exporting LLaMA with an all-ones
//! attention_mask made by ones_like(ids)): flags = Gather(Reshape(Cast(ConstantOfShape(Shape(ids)))
//! to [B*S]), b*S + j) -> [B, 1, 1, S], And-ed with the causal pattern kv <= q built from Ranges
//! of the ids' dims, then Where(m, 0, finfo.min). A value of the shapes alone, computed at run time.
void makeOnesMaskDecoderBlock(Network& n) {
  Tensor* q = n.addInput("q", DataType::kFLOAT, {-1, H, -1, D});
  Tensor* k = n.addInput("k", DataType::kFLOAT, {-1, H, -1, D});
  Tensor* v = n.addInput("v", DataType::kFLOAT, {-1, H, -1, D});
  Tensor* ids = n.addInput("ids", DataType::kINT64, {-1, -1});
  Attributes axis0, toBool, one;
  axis0.set("axis", int64_t(0));
  toBool.set("to", int64_t(9));  // ONNX BOOL
  one.set("value", ints({1}));
  Tensor* shape = n.addLayer("Shape", {ids}, 1)->outputs[0];
  Tensor* ones = n.addLayer("Cast", {n.addLayer("ConstantOfShape", {shape}, 1, one)->outputs[0]}, 1, toBool)->outputs[0];
  Tensor* b = n.addLayer("Gather", {shape, n.addConstant("", ints({0}, true))}, 1, axis0)->outputs[0];
  Tensor* s = n.addLayer("Gather", {shape, n.addConstant("", ints({1}, true))}, 1, axis0)->outputs[0];
  auto range = [&](Tensor* limit) {
    return n.addLayer("Range", {n.addConstant("", ints({0}, true)), limit, n.addConstant("", ints({1}, true))}, 1)->outputs[0];
  };
  auto unsqueeze = [&](Tensor* x, std::vector<int64_t> axes) {
    return n.addLayer("Unsqueeze", {x, n.addConstant("", ints(axes))}, 1)->outputs[0];
  };
  Tensor* rowStart = n.addElementWise(unsqueeze(range(b), {1}), s, "Mul")->outputs[0];     // [B, 1]: b * S
  Tensor* idx = n.addElementWise(rowStart, unsqueeze(range(s), {0}), "Add")->outputs[0];    // [B, S]: b * S + j
  Tensor* flat = reshape(n, ones, {-1});
  Tensor* flags = unsqueeze(n.addLayer("Gather", {flat, idx}, 1, axis0)->outputs[0], {1, 2});  // [B, 1, 1, S]
  Tensor* causal = n.addLayer("LessOrEqual", {range(s), unsqueeze(range(s), {1})}, 1)->outputs[0];  // [S, S]: j <= i
  Tensor* keep = n.addLayer("And", {causal, flags}, 1)->outputs[0];
  HostTensor zero(DataType::kFLOAT, {}), fill(DataType::kFLOAT, {}), sc(DataType::kFLOAT, {});
  *zero.as<float>() = 0.f;
  *fill.as<float>() = -3.4028235e38f;
  *sc.as<float>() = 1.0f / std::sqrt(static_cast<float>(D));
  Tensor* m = n.addLayer("Where", {keep, n.addConstant("", zero), n.addConstant("", fill)}, 1)->outputs[0];
  Tensor* scores = n.addMatMul(q, permute(n, k, {0, 1, 3, 2}))->outputs[0];
  scores = n.addElementWise(n.addElementWise(scores, n.addConstant("", sc), "Mul")->outputs[0], m, "Add")->outputs[0];
  finish(n, n.addMatMul(n.addSoftmax(scores, -1)->outputs[0], v)->outputs[0]);
}
}  // namespace

namespace {

//! Samples of a masked block: q, k, v [b, H, s, D] and the mask's source `extra` [b, s].
InputSamples maskedSamples(const std::string& extra) {
  InputSamples out;
  for (auto [b, s] : {std::pair<int64_t, int64_t>{4, 16}, {8, 32}, {1, 1}, {3, 16}, {4, 9}})
    out.push_back({{"q", {b, H, s, D}}, {"k", {b, H, s, D}}, {"v", {b, H, s, D}}, {extra, {b, s}}});
  return out;
}

//! `make`'s network in `net`, fused with maskedSamples(extra); its Attention layer.
const Layer* fuseMaskedBlock(Network& net, const std::function<void(Network&)>& make, const std::string& extra) {
  make(net);
  net.topoSort();
  net.inferShapes();
  EXPECT_TRUE(fuseAttention(net, {}, maskedSamples(extra)));
  return attentionLayer(net);
}

//! At each (b, s) of `runs`, the fused `net` agrees with a fresh unfused `make` on random q, k, v
//! and extraOf(b, s).
//! The fused `net` and a fresh unfused `make` give the same "y" on `in` (random q, k, v of
//! [b, H, s, D] added; seed advanced).
void expectAgreesAt(Network& net, const std::function<void(Network&)>& make, std::map<std::string, HostTensor> in,
                    int64_t b, int64_t s, uint32_t& seed) {
  for (const char* name : {"q", "k", "v"}) in[name] = randomTensor({b, H, s, D}, seed++, -2.f, 2.f);
  Network ref;
  make(ref);
  const HostTensor want = kiln::test::evaluateReference(ref, in).at("y"), got = kiln::test::evaluateReference(net, in).at("y");
  ASSERT_EQ(got.dims(), want.dims());
  for (int64_t i = 0; i < want.count(); ++i)
    ASSERT_NEAR(got.getDouble(i), want.getDouble(i), 2e-5 * (1 + std::fabs(want.getDouble(i)))) << b << "x" << s << " [" << i << "]";
}

void expectMaskedBlockAgrees(Network& net, const std::function<void(Network&)>& make, const std::string& extra,
                             const std::vector<std::pair<int64_t, int64_t>>& runs,
                             const std::function<HostTensor(int64_t, int64_t)>& extraOf) {
  uint32_t seed = 80;
  for (auto [b, s] : runs) expectAgreesAt(net, make, {{extra, extraOf(b, s)}}, b, s, seed);
}

}  // namespace

// The dense [B, 1, S, S] padding mask of a dynamic export becomes the flags as a bool
// [B, 1, 1, S] key mask (proven at every sample), and the output agrees at other shapes,
// rows whose keys are all padding included.
TEST(PassAttentionDynamic, PaddingMaskOfDynamicShapesBecomesKeyFlags) {
  Network net;
  const Layer* a = fuseMaskedBlock(net, makePaddedBlock, "mask");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->inputs.size(), 4u);
  EXPECT_EQ(a->inputs[3]->type, DataType::kBOOL);
  EXPECT_EQ(a->inputs[3]->dims, (Dims{-1, 1, 1, -1}));
  EXPECT_EQ(count(net, "Expand") + count(net, "Where"), 0);
  expectMaskedBlockAgrees(net, makePaddedBlock, "mask", {{3, 6}, {2, 11}}, [](int64_t b, int64_t s) {
    HostTensor flags(DataType::kINT64, {b, s});
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < s; ++j) flags.as<int64_t>()[i * s + j] = i == 0 ? j < s - 2 : (i == 1 ? j >= 3 : 0);  // right, left, all padding
    return flags;
  });
}

// A mask that is a value of the shapes alone (causal And all-true flags of ones_like(ids)) is the
// causal pattern at every sample, a 1 x 1 one included: is_causal and no mask, and the output
// agrees with the unfused network at shapes that are not samples.
TEST(PassAttentionDynamic, CausalMaskOfTheShapesAloneBecomesIsCausal) {
  Network net;
  const Layer* a = fuseMaskedBlock(net, makeOnesMaskDecoderBlock, "ids");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->inputs.size(), 3u) << "the dense mask was kept";
  EXPECT_EQ(a->attrs.getInt("is_causal", 0), 1);
  expectMaskedBlockAgrees(net, makeOnesMaskDecoderBlock, "ids", {{3, 6}, {2, 11}, {1, 1}},
                          [](int64_t b, int64_t s) { return HostTensor(DataType::kINT64, {b, s}); });
}

// Two unknown batch dims are not taken to be the same: where K and V have batch 1 at a sample of
// the profile while Q has 4 (the MatMuls broadcast them), no Attention layer is made; where they
// agree at every sample, one is.
TEST(PassAttentionDynamic, UnknownDimsAreComparedAtTheSamples) {
  auto make = [](Network& n) {
    Tensor* q = n.addInput("q", DataType::kFLOAT, {-1, H, -1, D});
    Tensor* k = n.addInput("k", DataType::kFLOAT, {-1, H, -1, D});
    Tensor* v = n.addInput("v", DataType::kFLOAT, {-1, H, -1, D});
    finish(n, sdpa(n, q, k, v));
  };
  auto sample = [](int64_t bq, int64_t bkv, int64_t s) {
    return std::map<std::string, Dims>{{"q", {bq, H, s, D}}, {"k", {bkv, H, s, D}}, {"v", {bkv, H, s, D}}};
  };
  Network broadcast;
  make(broadcast);
  broadcast.topoSort();
  broadcast.inferShapes();
  fuseAttention(broadcast, {}, {sample(4, 4, 8), sample(4, 1, 8), sample(2, 2, 16)});
  EXPECT_EQ(attentionLayer(broadcast), nullptr) << "fused although K's batch broadcasts at a sample";
  Network same;
  make(same);
  same.topoSort();
  same.inferShapes();
  ASSERT_TRUE(fuseAttention(same, {}, {sample(4, 4, 8), sample(1, 1, 8), sample(2, 2, 16)}));
  EXPECT_NE(attentionLayer(same), nullptr);
}

TEST(PassAttentionDynamic, VitDynamicBatchReadsThePackedProjectionInPlace) {
  const InputSamples samples{{{"x", {4, N, E}}}, {{"x", {8, N, E}}}, {{"x", {1, N, E}}}, {{"x", {3, N, E}}}};
  checkDynamicFusion(makeVitBlock, "x", samples, {{2, N, E}, {7, N, E}}, [](const Network& n) {
    const Layer* a = attentionLayer(n);
    ASSERT_NE(a, nullptr);
    EXPECT_TRUE(a->attrs.has("kiln_view_exprs"));
    EXPECT_TRUE(a->attrs.has("kiln_o_view"));
    EXPECT_EQ(a->inputs[0]->producer->op, "Add");  // the projection's output, read in place
    EXPECT_EQ(count(n, "Gather"), 0);
    EXPECT_EQ(count(n, "Transpose"), 0);
    EXPECT_EQ(a->outputs[0]->dims, (Dims{-1, N, E}));
    // Only the batch moves: the strides are constants, the batch is Q's buffer's dim 0.
    const std::vector<int64_t> e = a->attrs.getInts("kiln_view_exprs");
    EXPECT_EQ(std::vector<int64_t>(e.begin(), e.begin() + 4), (std::vector<int64_t>{1, 0, 0, 1}));
  });
}

TEST(PassAttentionDynamic, Gpt2DynamicBatchAndSequenceReadTheSplitInPlace) {
  const InputSamples samples{{{"p", {4, 16, 3 * E}}}, {{"p", {8, 32, 3 * E}}}, {{"p", {1, 1, 3 * E}}}, {{"p", {3, 16, 3 * E}}},
                             {{"p", {4, 9, 3 * E}}}};
  checkDynamicFusion(makeGpt2Block, "p", samples, {{2, 7, 3 * E}, {5, 3, 3 * E}, {1, 12, 3 * E}}, [](const Network& n) {
    const Layer* a = attentionLayer(n);
    ASSERT_NE(a, nullptr);
    EXPECT_TRUE(a->attrs.has("kiln_view_exprs"));
    for (const char* gone : {"Split", "Transpose", "Reshape"}) EXPECT_EQ(count(n, gone), 0) << gone;
  });
}

// Without samples a dynamic network keeps the copies (the views cannot be traced), and still fuses.
TEST(PassAttentionDynamic, WithoutSamplesTheDynamicViewFormIsNotTaken) {
  Network net;
  makeVitBlock(net);
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(fuseAttention(net));
  const Layer* a = attentionLayer(net);
  ASSERT_NE(a, nullptr);
  EXPECT_FALSE(a->attrs.has("kiln_view_dims"));
}

// The fit: constants, one dim, products of neighbouring dims; a value no expression gives fails.
TEST(ViewExprs, FitsTheShapeArithmeticOfTheSamples) {
  auto views = [](int64_t b, int64_t s) {
    QkvViews v;
    v.b = b, v.h = H, v.sq = s, v.skv = s, v.d = D, v.dv = D;
    v.q = {0, s * 3 * E, D, 3 * E}, v.k = {E, s * 3 * E, D, 3 * E}, v.v = {2 * E, s * 3 * E, D, 3 * E};
    v.outView = true, v.oDims = {b, s, E}, v.o = {s * E, D, E};
    return v;
  };
  auto refs = [](int64_t b, int64_t s) {
    const Dims p{b, s, 3 * E};
    return std::array<Dims, 4>{p, p, p, Dims{b, s, E}};
  };
  std::vector<int64_t> e;
  ASSERT_TRUE(fitViewExprs({views(2, 5), views(3, 5), views(2, 9)}, {refs(2, 5), refs(3, 5), refs(2, 9)}, e));
  // Resolving at a shape that is not a sample gives that shape's views.
  const std::vector<int64_t> want = viewValues(views(7, 11));
  const std::array<Dims, 4> r = refs(7, 11);
  const std::array<const Dims*, 4> rp{&r[0], &r[1], &r[2], &r[3]};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(evalViewExpr(&e[i * kViewExprInts], rp, "test"), want[i]) << i;
  // The Q stride over the batch, s * 3E: 3E times Q's dim 1; the output's, s * E: E times its own dim 1.
  EXPECT_EQ(std::vector<int64_t>(e.begin() + 7 * 4, e.begin() + 8 * 4), (std::vector<int64_t>{3 * E, 0, 1, 2}));
  EXPECT_EQ(std::vector<int64_t>(e.end() - 12, e.end() - 8), (std::vector<int64_t>{E, 3, 1, 2}));
  // A stride over a dim that is 1 at some sample (a trace gives 0 there) still fits.
  QkvViews one = views(1, 5);
  one.q[1] = one.k[1] = one.v[1] = one.o[0] = 0;
  EXPECT_TRUE(fitViewExprs({views(2, 5), one, views(2, 9)}, {refs(2, 5), refs(1, 5), refs(2, 9)}, e));
  // One sample proves nothing; a value that is no product of the dims does not fit.
  EXPECT_FALSE(fitViewExprs({views(2, 5)}, {refs(2, 5)}, e));
  QkvViews odd = views(3, 5);
  odd.q[0] = 7;
  EXPECT_FALSE(fitViewExprs({views(2, 5), odd, views(2, 9)}, {refs(2, 5), refs(3, 5), refs(2, 9)}, e));
}

// A built engine (CPU reference kernels with the GPU fusions) with one profile runs the fused
// dynamic ViT block at shapes across the profile.
TEST(PassAttentionDynamic, EngineWithAProfileRunsTheViewsAtEveryBatch) {
  Network net;
  makeVitBlock(net);
  BuilderConfig cfg;
  cfg.setThreads(2);
  cfg.setGpuFusions(true);
  OptimizationProfile prof;
  prof.setDimensions("x", OptProfileSelector::kMIN, {1, N, E});
  prof.setDimensions("x", OptProfileSelector::kOPT, {4, N, E});
  prof.setDimensions("x", OptProfileSelector::kMAX, {8, N, E});
  cfg.addOptimizationProfile(prof);
  auto engine = Builder().build(net, cfg);
  ASSERT_NE(engine, nullptr);
  const Layer* a = attentionLayer(net);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(a->attrs.has("kiln_view_exprs"));
  EXPECT_EQ(count(net, "Gather") + count(net, "Transpose"), 0);
  uint32_t seed = 60;
  for (int64_t b : {1, 3, 8, 5}) {
    Network ref;
    makeVitBlock(ref);
    const std::map<std::string, HostTensor> in{{"x", randomTensor({b, N, E}, seed++)}};
    const HostTensor want = kiln::test::evaluateReference(ref, in).at("y");
    const std::vector<float> got = kiln::test::runEngine(*engine, in).at("y");
    ASSERT_EQ(static_cast<int64_t>(got.size()), want.count()) << b;
    for (int64_t i = 0; i < want.count(); ++i) ASSERT_NEAR(got[static_cast<size_t>(i)], want.getDouble(i), 2e-5 * (1 + std::fabs(want.getDouble(i)))) << b;
  }
}

namespace {

//! T5's self-attention as its dynamic export has it for an ids-only call: a run-time position bias
//! pb [1, H, S, S] (an input here) and a mask of the shapes alone, all keys kept (the encoder) or
//! causal (the decoder), built from Ranges of the query's dims and Expand-ed to [B, 1, S|1, S].
//! maskedFill (transformers' SDPA path): Where(mask, pb, finfo.min) is the one mask; otherwise
//! (eager) pb, Where(mask, 0, finfo.min) and a zero bias of run-time dims (ConstantOfShape, as T5
//! makes for a layer without relative attention) are three masks added to the scores.
void makeBiasedBlock(Network& n, bool causal, bool maskedFill) {
  Tensor* q = n.addInput("q", DataType::kFLOAT, {-1, H, -1, D});
  Tensor* k = n.addInput("k", DataType::kFLOAT, {-1, H, -1, D});
  Tensor* v = n.addInput("v", DataType::kFLOAT, {-1, H, -1, D});
  Tensor* pb = n.addInput("pb", DataType::kFLOAT, {1, H, -1, -1});
  Attributes axis0;
  axis0.set("axis", int64_t(0));
  Tensor* shape = n.addLayer("Shape", {q}, 1)->outputs[0];
  auto dim = [&](int64_t i, bool scalar) {
    return n.addLayer("Gather", {shape, n.addConstant("", ints({i}, scalar))}, 1, axis0)->outputs[0];
  };
  Tensor* s = dim(2, true);
  auto range = [&](Tensor* limit) {
    return n.addLayer("Range", {n.addConstant("", ints({0}, true)), limit, n.addConstant("", ints({1}, true))}, 1)->outputs[0];
  };
  auto unsqueeze = [&](Tensor* x, std::vector<int64_t> axes) {
    return n.addLayer("Unsqueeze", {x, n.addConstant("", ints(axes))}, 1)->outputs[0];
  };
  Tensor* cond = causal ? n.addLayer("LessOrEqual", {range(s), unsqueeze(range(s), {1})}, 1)->outputs[0]  // [S, S]
                        : n.addLayer("GreaterOrEqual", {unsqueeze(range(s), {0, 1, 2}), n.addConstant("", ints({0}, true))}, 1)
                              ->outputs[0];  // [1, 1, 1, S]
  Tensor* s1 = dim(2, false);
  Tensor* target = n.addLayer("Concat", {dim(0, false), n.addConstant("", ints({1})), causal ? s1 : n.addConstant("", ints({1})), s1},
                              1, axis0)->outputs[0];
  cond = n.addLayer("Expand", {cond, target}, 1)->outputs[0];
  HostTensor zero(DataType::kFLOAT, {}), fill(DataType::kFLOAT, {}), sc(DataType::kFLOAT, {});
  *fill.as<float>() = -3.4028235e38f;
  *sc.as<float>() = 1.0f / std::sqrt(static_cast<float>(D));
  Tensor* scores = n.addMatMul(q, permute(n, k, {0, 1, 3, 2}))->outputs[0];
  scores = n.addElementWise(scores, n.addConstant("", sc), "Mul")->outputs[0];
  if (maskedFill) {
    Tensor* m = n.addLayer("Where", {cond, pb, n.addConstant("", fill)}, 1)->outputs[0];
    scores = n.addElementWise(scores, m, "Add")->outputs[0];
  } else {
    Tensor* m = n.addLayer("Where", {cond, n.addConstant("", zero), n.addConstant("", fill)}, 1)->outputs[0];
    Tensor* zeroShape = n.addLayer("Concat", {n.addConstant("", ints({1, H})), s1, s1}, 1, axis0)->outputs[0];
    Tensor* zeroBias = n.addLayer("ConstantOfShape", {zeroShape}, 1)->outputs[0];
    for (Tensor* x : {zeroBias, pb, m}) scores = n.addElementWise(scores, x, "Add")->outputs[0];
  }
  finish(n, n.addMatMul(n.addSoftmax(scores, -1)->outputs[0], v)->outputs[0]);
}

//! Fuses makeBiasedBlock(causal, maskedFill) at its samples: one Attention reading pb alone as its
//! mask, is_causal as the pattern; and the output agrees with the unfused network at other shapes.
void expectBiasAloneIsRead(bool causal, bool maskedFill) {
  auto make = [=](Network& n) { makeBiasedBlock(n, causal, maskedFill); };
  InputSamples samples;
  for (auto [b, s] : {std::pair<int64_t, int64_t>{4, 16}, {8, 32}, {1, 1}, {3, 16}, {4, 9}})
    samples.push_back({{"q", {b, H, s, D}}, {"k", {b, H, s, D}}, {"v", {b, H, s, D}}, {"pb", {1, H, s, s}}});
  Network net;
  make(net);
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(fuseAttention(net, {}, samples));
  const Layer* a = attentionLayer(net);
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->inputs.size(), 4u);
  EXPECT_EQ(a->inputs[3]->name, "pb") << "the attention reads " << a->inputs[3]->name << " " << toString(a->inputs[3]->dims);
  EXPECT_EQ(a->attrs.getInt("is_causal", 0), causal ? 1 : 0);
  uint32_t seed = 90;
  for (auto [b, s] : {std::pair<int64_t, int64_t>{3, 6}, {2, 11}})
    expectAgreesAt(net, make, {{"pb", randomTensor({1, H, s, s}, seed++, -3.f, 3.f)}}, b, s, seed);
}

}  // namespace

// T5's eager export: the masks of the shapes alone added beside the position bias (all kept, or
// causal) and the zero bias of run-time dims go; the sum of them would be a [B, H, S, S] bias.
TEST(PassAttentionDynamic, ShapeOnlyMasksBesideABiasAreDropped) {
  expectBiasAloneIsRead(false, false);
  expectBiasAloneIsRead(true, false);
}

// T5's SDPA-path export: Where(mask of the shapes alone, bias, finfo.min) reads as the bias
// (and is_causal where the mask is the causal pattern).
TEST(PassAttentionDynamic, BiasMaskedByAShapeOnlyConditionIsTheBias) {
  expectBiasAloneIsRead(false, true);
  expectBiasAloneIsRead(true, true);
}

// The fixed export of T5's decoder folds bias + causal mask to one constant, expanded to the
// batch [B, H, S, S]: it becomes is_causal and the bias at [1, H, S, S] (zeros above the
// diagonal), and the output is unchanged.
TEST(PassAttentionDynamic, FoldedBiasPlusCausalMaskOfAFixedExportIsCausal) {
  constexpr int64_t B = 2, S = 6;
  const HostTensor pb = randomTensor({1, H, S, S}, 7, -3.f, 3.f);
  HostTensor folded(DataType::kFLOAT, {B, H, S, S});
  for (int64_t x = 0; x < folded.count(); ++x) {
    const int64_t j = x % S, i = (x / S) % S;
    folded.as<float>()[x] = j > i ? -3.4028235e38f : pb.as<float>()[x % (H * S * S)];
  }
  auto make = [&](Network& n) {
    Tensor* q = n.addInput("q", DataType::kFLOAT, {B, H, S, D});
    Tensor* k = n.addInput("k", DataType::kFLOAT, {B, H, S, D});
    Tensor* v = n.addInput("v", DataType::kFLOAT, {B, H, S, D});
    HostTensor sc(DataType::kFLOAT, {});
    *sc.as<float>() = 1.0f / std::sqrt(static_cast<float>(D));
    Tensor* scores = n.addMatMul(q, permute(n, k, {0, 1, 3, 2}))->outputs[0];
    scores = n.addElementWise(scores, n.addConstant("", sc), "Mul")->outputs[0];
    scores = n.addElementWise(scores, n.addConstant("mask", folded), "Add")->outputs[0];
    finish(n, n.addMatMul(n.addSoftmax(scores, -1)->outputs[0], v)->outputs[0]);
  };
  Network net;
  make(net);
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(fuseAttention(net, {}));
  const Layer* a = attentionLayer(net);
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->inputs.size(), 4u);
  EXPECT_EQ(a->attrs.getInt("is_causal", 0), 1);
  EXPECT_EQ(a->inputs[3]->dims, (Dims{1, H, S, S}));
  uint32_t seed = 70;
  expectAgreesAt(net, make, {}, B, S, seed);
}

// A runtime bias gathered from a constant table (T5's relative position bias, computed at run time
// by a dynamic export) is proven bounded (kiln_mask_bias: no key masked, so cuDNN's SDPA may read
// it); a table holding a masking value, or a bias that adds a graph input, is not.
TEST(PassAttentionDynamic, RuntimeBiasFromAConstantTableIsMarkedBounded) {
  constexpr int64_t B = 2, S = 6, NB = 5;
  enum class Table { kFinite, kMasking, kPlusInput };
  for (Table kind : {Table::kFinite, Table::kMasking, Table::kPlusInput}) {
    Network n;
    Tensor* q = n.addInput("q", DataType::kFLOAT, {B, H, S, D});
    Tensor* k = n.addInput("k", DataType::kFLOAT, {B, H, S, D});
    Tensor* v = n.addInput("v", DataType::kFLOAT, {B, H, S, D});
    Tensor* buckets = n.addInput("buckets", DataType::kINT64, {S, S});
    HostTensor table = randomTensor({NB, H}, 5, -3.f, 3.f);
    if (kind == Table::kMasking) table.as<float>()[2] = -3.4028235e38f;
    Attributes axis0, perm;
    axis0.set("axis", int64_t(0));
    perm.set("perm", std::vector<int64_t>{2, 0, 1});
    Tensor* g = n.addLayer("Gather", {n.addConstant("table", table), buckets}, 1, axis0)->outputs[0];  // [S, S, H]
    Tensor* pb = n.addLayer("Unsqueeze", {n.addLayer("Transpose", {g}, 1, perm)->outputs[0], n.addConstant("", ints({0}))}, 1)->outputs[0];
    if (kind == Table::kPlusInput) pb = n.addElementWise(pb, n.addInput("extra", DataType::kFLOAT, {1, H, S, S}), "Add")->outputs[0];
    HostTensor sc(DataType::kFLOAT, {});
    *sc.as<float>() = 1.0f / std::sqrt(static_cast<float>(D));
    Tensor* scores = n.addMatMul(q, permute(n, k, {0, 1, 3, 2}))->outputs[0];
    scores = n.addElementWise(n.addElementWise(scores, n.addConstant("", sc), "Mul")->outputs[0], pb, "Add")->outputs[0];
    finish(n, n.addMatMul(n.addSoftmax(scores, -1)->outputs[0], v)->outputs[0]);
    n.topoSort();
    n.inferShapes();
    ASSERT_TRUE(fuseAttention(n, {}));
    const Layer* a = attentionLayer(n);
    ASSERT_NE(a, nullptr);
    ASSERT_EQ(a->inputs.size(), 4u);
    EXPECT_EQ(a->attrs.getInt("kiln_mask_bias", 0), kind == Table::kFinite ? 1 : 0) << static_cast<int>(kind);
  }
}
