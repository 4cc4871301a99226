// The merged-heads lift (lift_merged_heads.cpp): torch.bmm attention over [B*H, S, D] becomes 4-D
// MatMuls, which the attention fusion then takes; the values never change.
#include <gtest/gtest.h>

#include <functional>

#include "builder/passes/passes.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::randomTensor;

namespace {

constexpr int64_t B = 2, H = 3, S = 7, D = 4;

HostTensor scalar(float v) { return kiln::test::floatScalar(v); }
Tensor* reshape(Network& n, Tensor* x, const std::vector<int64_t>& shape) { return kiln::test::addReshape(n, x, shape)->outputs[0]; }
Tensor* transpose(Network& n, Tensor* x, const std::vector<int64_t>& perm) { return kiln::test::addPermute(n, x, perm)->outputs[0]; }

//! DeBERTa's eager attention: heads split to [B, H, S, D], merged to [B*H, S, D], K^T by a 3-D
//! Transpose divided by a scale, bmm, scores back to [B, H, S, S] for a padding mask and the
//! softmax, probabilities merged again, bmm with V, back to [B, H, S, D] and [B, S, H*D].
void bmmAttention(Network& n, bool scoresOut, bool relative = false, const Dims& relDims = {B * H, S, S}) {
  auto heads = [&](const char* name) {
    Tensor* x = n.addInput(name, DataType::kFLOAT, {B, S, H * D});
    return reshape(n, transpose(n, reshape(n, x, {B, S, H, D}), {0, 2, 1, 3}), {B * H, S, D});
  };
  Tensor *q = heads("q"), *k = heads("k"), *v = heads("v");
  Tensor* kt = n.addElementWise(transpose(n, k, {0, 2, 1}), n.addConstant("", scalar(2.f)), "Div")->outputs[0];
  Tensor* s3 = n.addMatMul(q, kt)->outputs[0];
  if (relative)  // DeBERTa-v3: relative-position terms [B*H, S, S] added to the merged scores
    s3 = n.addElementWise(s3, n.addInput("rel", DataType::kFLOAT, relDims), "Add")->outputs[0];
  Tensor* s = reshape(n, s3, {B, H, S, S});
  if (scoresOut) {
    n.renameTensor(s, "scores");
    n.markOutput(s);
  }
  s = n.addElementWise(s, n.addInput("m", DataType::kFLOAT, {B, 1, 1, S}), "Add")->outputs[0];
  Tensor* p = reshape(n, n.addSoftmax(s, -1)->outputs[0], {B * H, S, S});
  Tensor* o = reshape(n, n.addMatMul(p, v)->outputs[0], {B, H, S, D});
  Tensor* y = reshape(n, transpose(n, o, {0, 2, 1, 3}), {B, S, H * D});
  n.renameTensor(y, "y");
  n.markOutput(y);
}

std::map<std::string, HostTensor> inputs(bool relative = false, const Dims& relDims = {B * H, S, S}) {
  HostTensor m(DataType::kFLOAT, {B, 1, 1, S});
  for (int64_t i = 0; i < m.count(); ++i) m.as<float>()[i] = i % S < S - 2 * (i / S) ? 0.f : -10000.f;
  std::map<std::string, HostTensor> in{
      {"q", randomTensor({B, S, H * D}, 1)}, {"k", randomTensor({B, S, H * D}, 2)}, {"v", randomTensor({B, S, H * D}, 3)}, {"m", m}};
  if (relative) in["rel"] = randomTensor(relDims, 4);
  return in;
}


}  // namespace

TEST(PassLiftHeads, BmmAttentionBecomesFourDimensionalAndFuses) {
  Network ref;
  bmmAttention(ref, false);
  const auto want = kiln::test::evaluateReference(ref, inputs());
  Network net;
  bmmAttention(net, false);
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(liftMergedHeads(net));
  net.inferShapes();
  int matmuls3d = 0;
  for (auto& l : net.layers()) matmuls3d += l->op == "MatMul" && l->outputs[0]->dims.size() == 3;
  EXPECT_EQ(matmuls3d, 0);
  kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, inputs()), want, 0);  // the lift alone: the same values exactly
  ASSERT_TRUE(fuseAttention(net));
  net.inferShapes();
  EXPECT_EQ(kiln::test::countOps(net, "Attention"), 1);
  EXPECT_EQ(kiln::test::countOps(net, "Softmax"), 0);
  EXPECT_EQ(kiln::test::countOps(net, "MatMul"), 0);
  kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, inputs()), want, 2e-5);
}

// A merged tensor that is also a network output stays readable under its name: the scores are
// an output here, so their MatMul keeps a 3-D result for that reader (merged back), the values
// unchanged; the attention then does not fuse (the scores are read outside it).
TEST(PassLiftHeads, OutputsKeepTheirTensors) {
  Network ref;
  bmmAttention(ref, true);
  const auto want = kiln::test::evaluateReference(ref, inputs());
  Network net;
  bmmAttention(net, true);
  net.topoSort();
  net.inferShapes();
  liftMergedHeads(net);
  net.inferShapes();
  EXPECT_NE(net.findTensor("scores"), nullptr);
  kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, inputs()), want, 0);
  EXPECT_FALSE(fuseAttention(net));
}

// DeBERTa-v3's relative attention: its position terms, [B*H, S, S] tensors, are added to the
// merged scores; the Add lifts with them viewed as [B, H, S, S], and the attention fuses with the
// sum of the terms and the padding mask as its additive mask.
TEST(PassLiftHeads, RelativePositionTermsLiftAndFuse) {
  Network ref;
  bmmAttention(ref, false, true);
  const auto want = kiln::test::evaluateReference(ref, inputs(true));
  Network net;
  bmmAttention(net, false, true);
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(liftMergedHeads(net));
  net.inferShapes();
  kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, inputs(true)), want, 0);
  ASSERT_TRUE(fuseAttention(net));
  net.inferShapes();
  EXPECT_EQ(kiln::test::countOps(net, "Attention"), 1);
  EXPECT_EQ(kiln::test::countOps(net, "Softmax"), 0);
  kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, inputs(true)), want, 2e-5);
}

// A merge with no MatMul downstream stays as it is (MobileViT's unfolding merges [B*C*nh, ..] and
// adds to it; lifting those only added Reshapes).
TEST(PassLiftHeads, MergesWithoutAMatMulStay) {
  Network n;
  Tensor* x = reshape(n, n.addInput("x", DataType::kFLOAT, {B, H, S, D}), {B * H, S, D});
  Tensor* y = n.addElementWise(x, n.addInput("r", DataType::kFLOAT, {B * H, S, D}), "Add")->outputs[0];
  y = n.addActivation(transpose(n, y, {0, 2, 1}), "Relu")->outputs[0];
  n.renameTensor(y, "y");
  n.markOutput(y);
  n.topoSort();
  n.inferShapes();
  EXPECT_FALSE(liftMergedHeads(n));
}

// ALiBi (BLOOM): a per-(batch, head) bias [B*H, 1, S] broadcast over the queries, added to the
// merged scores. It lifts viewed as [B, H, 1, S] and the attention fuses with it in its mask; a
// [1, S, S] term (not per head) does not lift. Values unchanged.
TEST(PassLiftHeads, PerHeadBroadcastTermsLiftAndFuse) {
  for (const Dims& rel : {Dims{B * H, 1, S}, Dims{1, S, S}}) {
    SCOPED_TRACE(toString(rel));
    const bool lifts = rel[0] == B * H;
    Network ref;
    bmmAttention(ref, false, true, rel);
    const auto want = kiln::test::evaluateReference(ref, inputs(true, rel));
    Network net;
    bmmAttention(net, false, true, rel);
    net.topoSort();
    net.inferShapes();
    ASSERT_TRUE(liftMergedHeads(net));  // the MatMuls lift in any case
    net.inferShapes();
    kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, inputs(true, rel)), want, 0);
    EXPECT_EQ(fuseAttention(net), lifts);
    net.inferShapes();
    EXPECT_EQ(kiln::test::countOps(net, "Attention"), lifts ? 1 : 0);
    kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, inputs(true, rel)), want, 2e-5);
  }
}
