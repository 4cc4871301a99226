// The residual Add + LayerNormalization fusion (GPU builds): BERT's post-LN block becomes one
// LayerNormalization with a skip input that computes what the two layers did (reference
// kernels); a sum that is read elsewhere too (pre-LN blocks) becomes its second output.
#include <gtest/gtest.h>

#include <cmath>

#include "builder/passes/passes.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::randomTensor;

namespace {

int count(const Network& n, const std::string& op) {
  int c = 0;
  for (auto& l : n.layers()) c += l->op == op;
  return c;
}

//! y = LN(x @ W + x) (post-LN); with `sumOut`, the sum is a second network output (pre-LN style).
//! `xDims` may be dynamic; with `secondInput` the residual is an input "r" of x's printed dims.
void makeBlock(Network& n, bool sumOut, const Dims& xDims = {2, 5, 16}, bool secondInput = false) {
  Tensor* x = n.addInput("x", DataType::kFLOAT, xDims);
  Tensor* r = secondInput ? n.addInput("r", DataType::kFLOAT, xDims) : x;
  Tensor* h = n.addMatMul(x, n.addConstant("w", randomTensor({16, 16}, 1, -0.3f, 0.3f)))->outputs[0];
  Tensor* s = n.addElementWise(h, r, "Add")->outputs[0];
  Attributes a;
  a.set("epsilon", 1e-5f);
  Layer* ln = n.addLayer("LayerNormalization", {s, n.addConstant("g", randomTensor({16}, 2, 0.5f, 1.5f)), n.addConstant("b", randomTensor({16}, 3))},
                         1, a);
  n.renameTensor(ln->outputs[0], "y");
  n.markOutput(ln->outputs[0]);
  if (sumOut) {
    n.renameTensor(s, "sum");
    n.markOutput(s);
  }
}

}  // namespace

TEST(PassSkipLayerNorm, PostLnBlockFusesAndAgrees) {
  Network ref;
  makeBlock(ref, false);
  const std::map<std::string, HostTensor> in{{"x", randomTensor({2, 5, 16}, 9)}};
  auto want = kiln::test::evaluateReference(ref, in);
  Network net;
  makeBlock(net, false);
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(fuseSkipLayerNorm(net));
  EXPECT_EQ(count(net, "Add"), 0);
  ASSERT_EQ(count(net, "LayerNormalization"), 1);
  for (auto& l : net.layers())
    if (l->op == "LayerNormalization") {
      EXPECT_EQ(l->attrs.getInt("kiln_skip", 0), 1);
      EXPECT_EQ(l->inputs.size(), 4u);
    }
  auto got = kiln::test::evaluateReference(net, in);
  const HostTensor &g = got.at("y"), &r = want.at("y");
  ASSERT_EQ(g.dims(), r.dims());
  for (int64_t i = 0; i < r.count(); ++i) ASSERT_NEAR(g.getDouble(i), r.getDouble(i), 1e-5 * (1 + std::fabs(r.getDouble(i)))) << i;
}

// Pre-LN style: the sum is a network output too; the fused layer writes it as its second output.
TEST(PassSkipLayerNorm, SumReadElsewhereBecomesASecondOutput) {
  Network ref;
  makeBlock(ref, true);
  const std::map<std::string, HostTensor> in{{"x", randomTensor({2, 5, 16}, 10)}};
  auto want = kiln::test::evaluateReference(ref, in);
  Network net;
  makeBlock(net, true);
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(fuseSkipLayerNorm(net));
  EXPECT_EQ(count(net, "Add"), 0);
  for (auto& l : net.layers())
    if (l->op == "LayerNormalization") EXPECT_EQ(l->outputs.size(), 2u);
  auto got = kiln::test::evaluateReference(net, in);
  for (const char* name : {"y", "sum"}) {
    const HostTensor &g = got.at(name), &r = want.at(name);
    ASSERT_EQ(g.dims(), r.dims()) << name;
    for (int64_t i = 0; i < r.count(); ++i) ASSERT_NEAR(g.getDouble(i), r.getDouble(i), 1e-5 * (1 + std::fabs(r.getDouble(i)))) << name << i;
  }
}

TEST(PassSkipLayerNorm, SkipInputMustMatchX) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {2, 16});
  Attributes a;
  a.set("kiln_skip", int64_t(1));
  Layer* ln = net.addLayer("LayerNormalization",
                           {x, net.addConstant("g", randomTensor({16}, 2)), net.addConstant("b", randomTensor({16}, 3)),
                            net.addInput("r", DataType::kFLOAT, {1, 16})},
                           1, a);
  net.markOutput(ln->outputs[0]);
  net.topoSort();
  EXPECT_THROW(net.inferShapes(), Error);
}

// Dynamic dims (issue 23): the same symbolic dims fuse, dims that only print alike do not.
TEST(PassSkipLayerNorm, DynamicDimsFuseWhenSymbolicallyEqual) {
  Network net;
  makeBlock(net, false, {-1, -1, 16});
  net.topoSort();
  net.inferShapes();
  const InputSamples samples{{{"x", {2, 5, 16}}}, {{"x", {4, 5, 16}}}, {{"x", {2, 7, 16}}}};
  ASSERT_FALSE(fuseSkipLayerNorm(net));  // no samples: -1 dims are not known to agree
  ASSERT_TRUE(fuseSkipLayerNorm(net, {}, samples));
  EXPECT_EQ(count(net, "Add"), 0);
}

TEST(PassSkipLayerNorm, DynamicDimsThatBroadcastAtSomeShapeDoNotFuse) {
  Network net;
  makeBlock(net, false, {-1, -1, 16}, true);
  net.topoSort();
  net.inferShapes();
  // r's batch is 1 at the second sample: the Add broadcasts there, which the fused kernel cannot.
  const InputSamples samples{{{"x", {2, 5, 16}}, {"r", {2, 5, 16}}}, {{"x", {4, 5, 16}}, {"r", {1, 5, 16}}}};
  EXPECT_FALSE(fuseSkipLayerNorm(net, {}, samples));
  EXPECT_EQ(count(net, "Add"), 1);
}

// LLaMA / Qwen: h = x + x @ W; y = RMSNorm(h); the next residual reads h again (z = h + y). The
// Add and the RMSNorm become one RMSNormalization with the skip input (input 2 empty) that
// writes h as its second output; y and z agree with the unfused graph.
TEST(PassSkipLayerNorm, RmsNormWithResidualFusesAndWritesTheSum) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 5, 16});
    Tensor* h = n.addElementWise(x, n.addMatMul(x, n.addConstant("w", randomTensor({16, 16}, 1, -0.3f, 0.3f)))->outputs[0], "Add")->outputs[0];
    Attributes a;
    a.set("epsilon", 1e-6f);
    Layer* rms = n.addLayer("RMSNormalization", {h, n.addConstant("g", randomTensor({16}, 2, 0.5f, 1.5f))}, 1, a);
    Tensor* z = n.addElementWise(h, rms->outputs[0], "Add")->outputs[0];
    n.renameTensor(rms->outputs[0], "y");
    n.markOutput(rms->outputs[0]);
    n.renameTensor(z, "z");
    n.markOutput(z);
  };
  Network ref;
  make(ref);
  const std::map<std::string, HostTensor> in{{"x", randomTensor({2, 5, 16}, 11)}};
  auto want = kiln::test::evaluateReference(ref, in);
  Network net;
  make(net);
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(fuseSkipLayerNorm(net));
  net.inferShapes();
  EXPECT_EQ(count(net, "Add"), 1);  // z's residual Add stays (nothing normalizes it)
  ASSERT_EQ(count(net, "RMSNormalization"), 1);
  for (auto& l : net.layers())
    if (l->op == "RMSNormalization") {
      EXPECT_EQ(l->attrs.getInt("kiln_skip", 0), 1);
      ASSERT_EQ(l->inputs.size(), 4u);
      EXPECT_EQ(l->inputs[2], nullptr);
      EXPECT_EQ(l->outputs.size(), 2u);
    }
  auto got = kiln::test::evaluateReference(net, in);
  for (const char* name : {"y", "z"}) {
    const HostTensor &g = got.at(name), &r = want.at(name);
    ASSERT_EQ(g.dims(), r.dims()) << name;
    for (int64_t i = 0; i < r.count(); ++i) ASSERT_NEAR(g.getDouble(i), r.getDouble(i), 1e-5 * (1 + std::fabs(r.getDouble(i)))) << name << i;
  }
}

// OPT's pre-LN block: the residual sum [B, S, E] viewed as [B*S, E] before the LayerNorm, the view
// read again by the next residual Add. The Reshape moves onto the Add's operands (views): one
// LayerNormalization with a skip input and the sum as its second output, no Add of the sum; a
// view that changes the normalized last dim keeps the pattern. Both agree with the reference.
TEST(PassSkipLayerNorm, ReshapeBetweenSumAndNormMovesOntoTheOperands) {
  for (bool keepsLastDim : {true, false}) {
    SCOPED_TRACE(keepsLastDim ? "view [B*S, E]" : "view [B, S*E/8, 8]");
    auto make = [keepsLastDim](Network& n) {
      Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 5, 16});
      Tensor* h = n.addMatMul(x, n.addConstant("w", randomTensor({16, 16}, 1, -0.3f, 0.3f)))->outputs[0];
      Tensor* s = n.addElementWise(h, x, "Add")->outputs[0];
      HostTensor shape(DataType::kINT64, {keepsLastDim ? 2 : 3});
      const std::vector<int64_t> v = keepsLastDim ? std::vector<int64_t>{10, 16} : std::vector<int64_t>{2, 10, 8};
      for (size_t i = 0; i < v.size(); ++i) shape.as<int64_t>()[i] = v[i];
      Tensor* flat = n.addLayer("Reshape", {s, n.addConstant("shape", shape)}, 1)->outputs[0];
      const int64_t e = keepsLastDim ? 16 : 8;
      Attributes a;
      a.set("epsilon", 1e-5f);
      Layer* ln = n.addLayer("LayerNormalization", {flat, n.addConstant("g", randomTensor({e}, 2, 0.5f, 1.5f)), n.addConstant("b", randomTensor({e}, 3))},
                             1, a);
      Tensor* y = n.addElementWise(ln->outputs[0], flat, "Add")->outputs[0];  // the next residual reads the view
      n.renameTensor(y, "y");
      n.markOutput(y);
    };
    const std::map<std::string, HostTensor> in{{"x", randomTensor({2, 5, 16}, 9)}};
    Network ref;
    make(ref);
    Network net;
    make(net);
    net.topoSort();
    net.inferShapes();
    EXPECT_EQ(fuseSkipLayerNorm(net), keepsLastDim);
    removeFoldedLayers(net);
    EXPECT_EQ(count(net, "Add"), keepsLastDim ? 1 : 2);  // the next residual only
    for (auto& l : net.layers())
      if (l->op == "LayerNormalization") EXPECT_EQ(l->outputs.size(), keepsLastDim ? 2u : 1u);
    kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), kiln::test::evaluateReference(ref, in), 1e-5);
  }
}
