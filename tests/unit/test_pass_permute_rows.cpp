// permuteRowsBeforeLinear: a row permutation after a Gemm / MatMul by a constant weight
// (nn.MultiheadAttention's sequence-first out_proj transposed back to batch-first) moves onto the
// linear's input when that input is data movement; the values stay (reference kernels). Onto any
// other producer it stays where it is.
#include <gtest/gtest.h>

#include "builder/passes/passes.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::countOps;
using kiln::test::randomTensor;

namespace {

constexpr int64_t S = 5, B = 3, K = 6, N = 4;

//! x [S, B, K] -> (Reshape | Relu + Reshape) [S*B, K] -> Gemm or MatMul [S*B, N] -> Reshape
//! [S, B, N] -> Transpose [B, S, N] -> Sigmoid.
void make(Network& n, bool gemm, bool movementInput) {
  Tensor* x = n.addInput("x", DataType::kFLOAT, {S, B, K});
  if (!movementInput) x = n.addActivation(x, "Relu")->outputs[0];
  Tensor* x2 = kiln::test::addReshape(n, x, {S * B, K})->outputs[0];
  if (!movementInput) x2 = n.addActivation(x2, "Tanh")->outputs[0];
  Tensor* y;
  if (gemm) {
    Attributes a;
    a.set("transB", int64_t(1));
    y = n.addLayer("Gemm", {x2, n.addConstant("w", randomTensor({N, K}, 1)), n.addConstant("b", randomTensor({N}, 2))}, 1, a)->outputs[0];
  } else {
    y = n.addMatMul(x2, n.addConstant("w", randomTensor({K, N}, 1)))->outputs[0];
  }
  Tensor* z = kiln::test::addPermute(n, kiln::test::addReshape(n, y, {S, B, N})->outputs[0], {1, 0, 2})->outputs[0];
  z = n.addActivation(z, "Sigmoid")->outputs[0];
  n.renameTensor(z, "y");
  n.markOutput(z);
}

}  // namespace

TEST(PassPermuteRows, PermutationAfterALinearMovesOntoDataMovement) {
  for (bool gemm : {true, false})
    for (bool movementInput : {true, false}) {
      SCOPED_TRACE(std::string(gemm ? "Gemm" : "MatMul") + (movementInput ? "" : " after a Tanh (stays)"));
      const std::map<std::string, HostTensor> in{{"x", randomTensor({S, B, K}, 3)}};
      Network net;
      const auto want = kiln::test::referenceAndCopy([&](Network& n) { make(n, gemm, movementInput); }, in, net);
      EXPECT_EQ(permuteRowsBeforeLinear(net), movementInput);
      net.removeDeadLayers();
      net.inferShapes();
      EXPECT_EQ(countOps(net, "Transpose"), 1);
      if (movementInput)  // the Transpose now reads the linear's input rows, K wide
        for (auto& l : net.layers())
          if (l->op == "Transpose") EXPECT_EQ(l->outputs[0]->dims, (Dims{B, S, K}));
      kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), want, 1e-5);
    }
}
