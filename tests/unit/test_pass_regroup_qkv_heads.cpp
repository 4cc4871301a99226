// regroupQkvHeads: a fused Q / K / V projection viewed [B, S, H, 3D] and sliced per part (GPT-NeoX,
// before or after the head Transpose) gets its weight columns and bias regrouped part-major and
// becomes a Split of the 3-D projection plus head Reshapes; the rewritten network computes what the
// original does (reference kernels, CPU). Slices off the part grid stay.
#include <gtest/gtest.h>

#include "builder/passes/passes.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::countOps;
using kiln::test::randomTensor;

namespace {

constexpr int64_t B = 2, S = 5, E = 12, H = 3, D = 4;

HostTensor ints(std::vector<int64_t> v) {
  HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

struct Case {
  bool transposed;    // the slices read the head Transpose [B, H, S, 3D] (GPT-NeoX) or the view itself
  int biasFirst;      // -1: no bias; 0: x W + b; 1: b + x W
  int64_t kStart;     // where K's slice starts (D: regroups; off the part grid: stays)
};

//! q, k, v sliced from the fused projection; y = (q k^T) v per head, and v alone as a second output.
void make(Network& n, const Case& c) {
  Tensor* x = n.addInput("x", DataType::kFLOAT, {B, S, E});
  Tensor* y = n.addMatMul(x, n.addConstant("w", randomTensor({E, H * 3 * D}, 3)))->outputs[0];
  if (c.biasFirst >= 0) {
    Tensor* b = n.addConstant("b", randomTensor({H * 3 * D}, 4));
    y = n.addElementWise(c.biasFirst ? b : y, c.biasFirst ? y : b, "Add")->outputs[0];
  }
  Tensor* v4 = kiln::test::addReshape(n, y, {B, S, H, 3 * D})->outputs[0];
  if (c.transposed) v4 = kiln::test::addPermute(n, v4, {0, 2, 1, 3})->outputs[0];
  auto part = [&](int64_t start, int64_t width) {
    return n.addLayer("Slice", {v4, n.addConstant("", ints({start})), n.addConstant("", ints({start + width})), n.addConstant("", ints({-1}))}, 1)
        ->outputs[0];
  };
  Tensor* q = part(0, D);
  Tensor* k = part(c.kStart, D);
  Tensor* v = part(2 * D, D);
  if (!c.transposed) {
    q = kiln::test::addPermute(n, q, {0, 2, 1, 3})->outputs[0];
    k = kiln::test::addPermute(n, k, {0, 2, 1, 3})->outputs[0];
    v = kiln::test::addPermute(n, v, {0, 2, 1, 3})->outputs[0];
  }
  Tensor* scores = n.addMatMul(q, kiln::test::addPermute(n, k, {0, 1, 3, 2})->outputs[0])->outputs[0];
  Tensor* out = n.addMatMul(scores, v)->outputs[0];
  n.renameTensor(out, "y");
  n.markOutput(out);
  Tensor* vOut = n.addActivation(v, "Relu")->outputs[0];
  n.renameTensor(vOut, "v");
  n.markOutput(vOut);
}

}  // namespace

TEST(PassRegroupQkvHeads, HeadInterleavedPartsBecomeASplit) {
  for (const Case& c : {Case{true, 0, D}, Case{true, 1, D}, Case{false, -1, D}, Case{false, 0, D}, Case{true, 0, D / 2}}) {
    const bool regroups = c.kStart == D;
    SCOPED_TRACE(std::string(c.transposed ? "after the Transpose" : "before the Transpose") + ", bias " + std::to_string(c.biasFirst) +
                 (regroups ? "" : ", K off the part grid (stays)"));
    Network net;
    make(net, c);
    net.topoSort();
    net.inferShapes();
    EXPECT_EQ(regroupQkvHeads(net), regroups);
    net.removeDeadLayers();
    EXPECT_EQ(countOps(net, "Split"), regroups ? 1 : 0);
    EXPECT_EQ(countOps(net, "Slice"), regroups ? 0 : 3);
    const std::map<std::string, HostTensor> in{{"x", randomTensor({B, S, E}, 9)}};
    Network ref;
    make(ref, c);
    kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), kiln::test::evaluateReference(ref, in), 1e-5);
  }
}

// A dynamic export (batch and sequence unknown, the view a Reshape to [0, 0, H, 3D]): regrouped
// where the samples prove B and S carried through the view (none given: it stays); the result
// agrees at run shapes that are not samples.
TEST(PassRegroupQkvHeads, DynamicBatchAndSequence) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {-1, -1, E});
    Tensor* y = n.addMatMul(x, n.addConstant("w", randomTensor({E, H * 3 * D}, 3)))->outputs[0];
    y = n.addElementWise(y, n.addConstant("b", randomTensor({H * 3 * D}, 4)), "Add")->outputs[0];
    Tensor* v4 = kiln::test::addPermute(n, kiln::test::addReshape(n, y, {0, 0, H, 3 * D})->outputs[0], {0, 2, 1, 3})->outputs[0];
    auto part = [&](int64_t j) {
      return n.addLayer("Slice", {v4, n.addConstant("", ints({j * D})), n.addConstant("", ints({(j + 1) * D})), n.addConstant("", ints({-1}))}, 1)
          ->outputs[0];
    };
    Tensor* scores = n.addMatMul(part(0), kiln::test::addPermute(n, part(1), {0, 1, 3, 2})->outputs[0])->outputs[0];
    Tensor* out = n.addMatMul(scores, part(2))->outputs[0];
    n.renameTensor(out, "y");
    n.markOutput(out);
  };
  {
    Network net;
    make(net);
    net.topoSort();
    net.inferShapes();
    EXPECT_FALSE(regroupQkvHeads(net)) << "nothing proves B and S carried through without samples";
  }
  auto sample = [](int64_t b, int64_t s) { return std::map<std::string, Dims>{{"x", {b, s, E}}}; };
  Network net;
  make(net);
  net.topoSort();
  net.inferShapes();
  ASSERT_TRUE(regroupQkvHeads(net, {sample(2, 5), sample(3, 7)}));
  net.removeDeadLayers();
  net.topoSort();
  net.inferShapes();
  EXPECT_EQ(countOps(net, "Slice"), 0);
  for (auto [b, s] : {std::pair<int64_t, int64_t>{1, 4}, {3, 6}}) {
    const std::map<std::string, HostTensor> in{{"x", randomTensor({b, s, E}, 10)}};
    Network ref;
    make(ref);
    kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), kiln::test::evaluateReference(ref, in), 1e-5);
  }
}
