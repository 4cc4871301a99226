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
  int64_t batch = 0;  // > 0: the dynamic (-1) dims of the operands at run time
};

Dims atRun(Dims d, int64_t batch) {
  for (int64_t& v : d)
    if (v < 0) v = batch;
  return d;
}

void check(const Case& c) {
  SCOPED_TRACE(c.equation);
  auto make = [&c](Network& n) {
    Attributes at;
    at.set("equation", std::string(c.equation));
    Tensor* y = n.addLayer("Einsum", {n.addInput("a", DataType::kFLOAT, c.a), n.addInput("b", DataType::kFLOAT, c.b)}, 1, at)->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  const std::map<std::string, HostTensor> in{{"a", randomTensor(atRun(c.a, c.batch), 1)}, {"b", randomTensor(atRun(c.b, c.batch), 2)}};
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
           {"bhid,bhjd->bhij", {-1, 3, 5, 4}, {-1, 3, 6, 4}, true, 2},                // a dynamic batch
           {"bij,bjk->bik", {-1, 3, 4}, {-1, 4, 5}, true, 3},
           {"abijk,abkl->abijl", {-1, -1, 2, 3, 4}, {-1, -1, 4, 5}, true, 2},          // two dynamic batch dims, rows merged
           {"ij,bjk->bik", {-1, 4}, {-1, 4, 5}, false, 3},                             // a dynamic row dim
           {"ii,ij->ij", {3, 3}, {3, 4}, false},                                       // a diagonal
           {"ij,jk->k", {3, 4}, {4, 5}, false},                                        // i summed out of A alone
       })
    check(c);
}
