// mergeDuplicateLayers (merge_duplicate_layers.cpp): layers with the same op, attributes and inputs
// (small constants by value) become one, and the network computes what it did (checked against the
// unmerged network with the reference kernels); layers that must stay apart do.
#include <gtest/gtest.h>

#include "builder/passes/passes.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::randomTensor;

namespace {

int count(const Network& n, const std::string& op) { return kiln::test::countOps(n, op); }

HostTensor scalar(float v) {
  HostTensor t(DataType::kFLOAT, {});
  *t.as<float>() = v;
  return t;
}

//! y = (a + b) * (a + b) + Sigmoid(a + b) with the sum written three times, and a bias Add whose
//! equal constants are two tensors (one Constant node per use, as exporters emit them).
void makeRepeated(Network& n) {
  Tensor* a = n.addInput("a", DataType::kFLOAT, {2, 3});
  Tensor* b = n.addInput("b", DataType::kFLOAT, {2, 3});
  Tensor* s1 = n.addElementWise(a, b, "Add")->outputs[0];
  Tensor* s2 = n.addElementWise(a, b, "Add")->outputs[0];
  Tensor* s3 = n.addElementWise(a, b, "Add")->outputs[0];
  Tensor* p = n.addElementWise(s1, s2, "Mul")->outputs[0];
  Tensor* g = n.addActivation(s3, "Sigmoid")->outputs[0];
  Tensor* c1 = n.addElementWise(p, n.addConstant("half_1", scalar(0.5f)), "Mul")->outputs[0];
  Tensor* c2 = n.addElementWise(p, n.addConstant("half_2", scalar(0.5f)), "Mul")->outputs[0];
  Tensor* y = n.addElementWise(n.addElementWise(c1, c2, "Add")->outputs[0], g, "Add")->outputs[0];
  n.renameTensor(y, "y");
  n.markOutput(y);
}

}  // namespace

TEST(MergeDuplicateLayers, RepeatedWorkRunsOnceAndComputesTheSame) {
  Network net;
  makeRepeated(net);
  net.topoSort();
  net.inferShapes();
  ASSERT_EQ(count(net, "Add"), 5);
  ASSERT_EQ(count(net, "Mul"), 3);
  EXPECT_TRUE(mergeDuplicateLayers(net));
  EXPECT_EQ(count(net, "Add"), 3) << "a + b three times -> once";
  EXPECT_EQ(count(net, "Mul"), 2) << "p * 0.5 with two equal constants -> once";
  EXPECT_FALSE(mergeDuplicateLayers(net)) << "nothing left to merge";
  Network ref;
  makeRepeated(ref);
  const std::map<std::string, HostTensor> in{{"a", randomTensor({2, 3}, 1)}, {"b", randomTensor({2, 3}, 2)}};
  const HostTensor want = kiln::test::evaluateReference(ref, in).at("y");
  const HostTensor got = kiln::test::evaluateReference(net, in).at("y");
  ASSERT_EQ(got.dims(), want.dims());
  for (int64_t i = 0; i < want.count(); ++i) EXPECT_FLOAT_EQ(got.as<float>()[i], want.as<float>()[i]) << i;
}

TEST(MergeDuplicateLayers, DifferentAttributesConstantsOrOrderStayApart) {
  Network net;
  Tensor* a = net.addInput("a", DataType::kFLOAT, {2, 3});
  Tensor* b = net.addInput("b", DataType::kFLOAT, {2, 3});
  Tensor* outs[] = {
      net.addSoftmax(a, 0)->outputs[0],                                          // axis 0
      net.addSoftmax(a, 1)->outputs[0],                                          // axis 1: another attribute value
      net.addElementWise(a, b, "Sub")->outputs[0],                               // a - b
      net.addElementWise(b, a, "Sub")->outputs[0],                               // b - a: other input order
      net.addElementWise(a, net.addConstant("one", scalar(1.f)), "Mul")->outputs[0],
      net.addElementWise(a, net.addConstant("two", scalar(2.f)), "Mul")->outputs[0],  // another value
      net.addActivation(a, "LeakyRelu", 0.1f)->outputs[0],
      net.addActivation(a, "LeakyRelu", 0.2f)->outputs[0],                       // another alpha
  };
  Tensor* sum = outs[0];
  for (Tensor* t : outs) sum = t == outs[0] ? sum : net.addElementWise(sum, t, "Add")->outputs[0];
  net.markOutput(sum);
  // Two equal layers that both write network outputs keep their own names and buffers.
  Tensor* o1 = net.addActivation(b, "Relu")->outputs[0];
  Tensor* o2 = net.addActivation(b, "Relu")->outputs[0];
  net.markOutput(o1);
  net.markOutput(o2);
  net.topoSort();
  net.inferShapes();
  EXPECT_FALSE(mergeDuplicateLayers(net));
  EXPECT_EQ(count(net, "Softmax"), 2);
  EXPECT_EQ(count(net, "Sub"), 2);
  EXPECT_EQ(count(net, "Mul"), 2);
  EXPECT_EQ(count(net, "LeakyRelu"), 2);
  EXPECT_EQ(count(net, "Relu"), 2);
}

// Merged readers merge in the same sweep: Relu(a + b) written twice is one Add and one Relu.
TEST(MergeDuplicateLayers, ChainsMergeInOneSweep) {
  Network net;
  Tensor* a = net.addInput("a", DataType::kFLOAT, {4});
  Tensor* b = net.addInput("b", DataType::kFLOAT, {4});
  Tensor* r1 = net.addActivation(net.addElementWise(a, b, "Add")->outputs[0], "Relu")->outputs[0];
  Tensor* r2 = net.addActivation(net.addElementWise(a, b, "Add")->outputs[0], "Relu")->outputs[0];
  Tensor* y = net.addElementWise(r1, r2, "Mul")->outputs[0];
  net.markOutput(y);
  net.topoSort();
  net.inferShapes();
  EXPECT_TRUE(mergeDuplicateLayers(net));
  EXPECT_EQ(count(net, "Add"), 1);
  EXPECT_EQ(count(net, "Relu"), 1);
  const Layer* mul = kiln::test::firstOp(net, "Mul");
  ASSERT_NE(mul, nullptr);
  EXPECT_EQ(mul->inputs[0], mul->inputs[1]);
}
