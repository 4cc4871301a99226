// lowerEinsumToMatMul: two-operand Einsums that are batched matrix products become Transposes,
// Reshapes and one MatMul computing the same values (reference kernels); other equations stay.
#include <gtest/gtest.h>

#include "builder/passes/passes.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::countOps;
using kiln::test::randomTensor;

namespace {

struct Case {
  const char* equation;
  Dims a, b;
  bool lowers;
};

void check(const Case& c) {
  SCOPED_TRACE(c.equation);
  auto make = [&c](Network& n) {
    Attributes at;
    at.set("equation", std::string(c.equation));
    Tensor* y = n.addLayer("Einsum", {n.addInput("a", DataType::kFLOAT, c.a), n.addInput("b", DataType::kFLOAT, c.b)}, 1, at)->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  const std::map<std::string, HostTensor> in{{"a", randomTensor(c.a, 1)}, {"b", randomTensor(c.b, 2)}};
  Network net;
  const auto want = kiln::test::referenceAndCopy(make, in, net);
  EXPECT_EQ(lowerEinsumToMatMul(net), c.lowers);
  EXPECT_EQ(countOps(net, "Einsum"), c.lowers ? 0 : 1);
  EXPECT_EQ(countOps(net, "MatMul"), c.lowers ? 1 : 0);
  net.inferShapes();
  kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), want, 1e-5);
}

}  // namespace

TEST(PassLowerEinsum, MatrixProductsBecomeMatMul) {
  for (const Case& c : std::vector<Case>{
           {"ij,jk->ik", {3, 4}, {4, 5}, true},
           {"bhid,bhjd->bhij", {2, 3, 5, 4}, {2, 3, 6, 4}, true},                      // Q K^T
           {"bhij,bhjd->bhid", {2, 3, 5, 6}, {2, 3, 6, 4}, true},                      // P V
           {"B G H I D, B G H J D -> B G H I J", {2, 2, 3, 5, 4}, {2, 2, 3, 6, 4}, true},  // MaxViT
           {"bhid,bhjd->bjhi", {2, 3, 5, 4}, {2, 3, 6, 4}, true},                      // a permuted output
           {"bi,bj->bij", {2, 3}, {2, 4}, true},                                       // outer product
           {"abc,cd->abd", {2, 3, 4}, {4, 5}, true},
           {"ijk,jkl->il", {2, 3, 4}, {3, 4, 5}, true},                                // two contracted labels
           {"bn,anm->bam", {2, 3}, {4, 3, 5}, true},                                   // rows and columns on both sides
           {"ii,ij->ij", {3, 3}, {3, 4}, false},                                       // a diagonal
           {"ij,jk->k", {3, 4}, {4, 5}, false},                                        // i summed out of A alone
       })
    check(c);
}
