// Symbolic dims of dynamic networks (issue 23): dims identified at sample shapes, and the shape
// arithmetic of dynamic exports folded into constant Reshape targets (the fusions' side:
// test_pass_skip_layernorm.cpp).
#include <gtest/gtest.h>

#include <algorithm>

#include "builder/passes/passes.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::randomTensor;

namespace {

int layersOf(const Network& n, const std::string& op) {
  return static_cast<int>(std::count_if(n.layers().begin(), n.layers().end(), [&](auto& l) { return l->op == op; }));
}

Tensor* int64Const(Network& n, const std::string& name, std::vector<int64_t> v, Dims dims) {
  HostTensor t(DataType::kINT64, dims);
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return n.addConstant(name, t);
}

//! y = Reshape(x @ W, Concat(Shape(x)[0], Shape(x)[1], 4, 4)): BERT's head split as exported with
//! dynamic batch and sequence axes, x [-1, -1, 16].
void makeHeadSplit(Network& n) {
  Tensor* x = n.addInput("x", DataType::kFLOAT, {-1, -1, 16});
  Tensor* h = n.addMatMul(x, n.addConstant("w", randomTensor({16, 16}, 1, -0.3f, 0.3f)))->outputs[0];
  Tensor* shape = n.addLayer("Shape", {h}, 1)->outputs[0];
  Attributes g;
  g.set("axis", int64_t(0));
  Tensor* b = n.addLayer("Gather", {shape, int64Const(n, "i0", {0}, {1})}, 1, g)->outputs[0];
  Tensor* s = n.addLayer("Gather", {shape, int64Const(n, "i1", {1}, {1})}, 1, g)->outputs[0];
  Attributes c;
  c.set("axis", int64_t(0));
  Tensor* target = n.addLayer("Concat", {b, s, int64Const(n, "heads", {4, 4}, {2})}, 1, c)->outputs[0];
  Layer* r = n.addLayer("Reshape", {h, target}, 1);
  n.renameTensor(r->outputs[0], "y");
  n.markOutput(r->outputs[0]);
}

}  // namespace

TEST(SymbolicDims, SameDimsAreTheSameExpressionAtEverySample) {
  Network n;
  makeHeadSplit(n);
  n.topoSort();
  n.inferShapes();
  const InputSamples samples{{{"x", {2, 5, 16}}}, {{"x", {3, 5, 16}}}, {{"x", {2, 9, 16}}}};
  SymbolicDims sym(samples);
  Tensor* x = n.findTensor("x");
  Tensor* y = n.findTensor("y");
  EXPECT_TRUE(sym.sameDim(x, 0, y, 0));
  EXPECT_TRUE(sym.sameDim(x, 1, y, 1));
  EXPECT_FALSE(sym.sameDim(x, 0, y, 1));  // batch and sequence: one sample apart
  EXPECT_EQ(sym.constantDim(y, 2), 4);
  EXPECT_EQ(sym.constantDim(y, 0), -1);
  EXPECT_FALSE(sym.sameDims(x, y));  // ranks differ
  // The static view cannot tell: every dim that depends on x's prints -1.
  EXPECT_EQ(y->dims, (Dims{-1, -1, -1, -1}));
}

TEST(SymbolicDims, SamplesWhereTheNetworkCannotRunAreDropped) {
  Network n;
  Tensor* a = n.addInput("a", DataType::kFLOAT, {-1, 8});
  Tensor* b = n.addInput("b", DataType::kFLOAT, {-1, 8});
  n.markOutput(n.addElementWise(a, b, "Add")->outputs[0]);
  n.topoSort();
  n.inferShapes();
  // a and b with batch 3 and 5: the Add cannot broadcast, so that sample says nothing.
  const InputSamples kept = keepRunnableSamples(n, {{{"a", {2, 8}}, {"b", {2, 8}}}, {{"a", {3, 8}}, {"b", {5, 8}}},
                                                    {{"a", {4, 8}}, {"b", {1, 8}}}});
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[1].at("b"), (Dims{1, 8}));
}

TEST(FoldShapeArithmetic, HeadSplitTargetBecomesAConstantAndTheEngineAgrees) {
  const std::map<std::string, HostTensor> in{{"x", randomTensor({3, 7, 16}, 4)}};
  Network ref;
  makeHeadSplit(ref);
  auto want = kiln::test::evaluateReference(ref, in);
  Network net;
  makeHeadSplit(net);
  BuilderConfig cfg;
  cfg.setThreads(2);
  cfg.addOptimizationProfile(kiln::test::profileFor("x", {1, 1, 16}, {2, 5, 16}, {4, 9, 16}));
  auto engine = Builder().build(net, cfg);
  // The builder optimized `net` in place: the shape arithmetic is gone, the target is constant.
  EXPECT_EQ(layersOf(net, "Shape"), 0);
  EXPECT_EQ(layersOf(net, "Gather"), 0);
  EXPECT_EQ(layersOf(net, "Concat"), 0);
  ASSERT_EQ(layersOf(net, "Reshape"), 1);
  for (auto& l : net.layers())
    if (l->op == "Reshape") {
      ASSERT_TRUE(l->inputs[1]->isConstant());
      EXPECT_EQ(l->inputs[1]->value.toInts(), (std::vector<int64_t>{0, 0, 4, 4}));
      EXPECT_EQ(l->outputs[0]->dims, (Dims{-1, -1, 4, 4}));
    }
  auto got = kiln::test::runEngine(*engine, in);
  const HostTensor& r = want.at("y");
  ASSERT_EQ(got.at("y").size(), static_cast<size_t>(r.count()));
  for (int64_t i = 0; i < r.count(); ++i) ASSERT_NEAR(got.at("y")[static_cast<size_t>(i)], r.getDouble(i), 1e-5) << i;
}

