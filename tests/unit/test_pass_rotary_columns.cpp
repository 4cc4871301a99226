// RotaryEmbeddings of a packed projection's parts read their column range in place
// (builder/passes/rotary_packed_columns.cpp, the reference kernel's kiln_rotary_columns): the
// Split that copied the parts out goes, and the outputs are the unfused network's.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "builder/passes/passes.h"
#include "ops/fused_attrs.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::countOps;
using kiln::test::randomTensor;

namespace {

constexpr int64_t B = 2, S = 5, H = 3, D = 8, HD = H * D;

HostTensor ints(std::vector<int64_t> v) {
  HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

//! Rotation of x ([B, S, H*D]) by constant caches of `rd` rotated dims (0: all).
Tensor* rotate(Network& n, Tensor* x, int64_t rd, bool interleaved, uint32_t seed) {
  const int64_t half = (rd ? rd : D) / 2;
  Attributes a;
  a.set("num_heads", H);
  a.set("rotary_embedding_dim", rd);
  a.set("interleaved", int64_t(interleaved));
  Tensor* c = n.addConstant("", randomTensor({B, S, half}, seed));
  Tensor* s = n.addConstant("", randomTensor({B, S, half}, seed + 1));
  return n.addLayer("RotaryEmbedding", {x, c, s}, 1, a)->outputs[0];
}

enum class Parts { kSplit, kSlices, kSplitOnRows };

//! A packed [B, S, 3 H D] input whose Q and K parts are rotated (Q partly, K interleaved); V is
//! read too when `readV` (then the Split stays for it).
void makePacked(Network& n, Parts parts, bool readV) {
  Tensor* qkv = n.addInput("qkv", DataType::kFLOAT, parts == Parts::kSplitOnRows ? Dims{B, 3 * S, HD} : Dims{B, S, 3 * HD});
  std::vector<Tensor*> p;
  if (parts == Parts::kSlices) {
    for (int64_t k = 0; k < 3; ++k)
      p.push_back(n.addLayer("Slice", {qkv, n.addConstant("", ints({k * HD})), n.addConstant("", ints({(k + 1) * HD})),
                                      n.addConstant("", ints({-1}))},
                             1)
                      ->outputs[0]);
  } else {
    Attributes a;
    a.set("axis", int64_t(parts == Parts::kSplitOnRows ? 1 : -1));
    const int64_t each = parts == Parts::kSplitOnRows ? S : HD;
    p = n.addLayer("Split", {qkv, n.addConstant("", ints({each, each, each}))}, 3, a)->outputs;
  }
  Tensor* q = rotate(n, p[0], 4, false, 10);
  Tensor* k = rotate(n, p[1], 0, true, 20);
  n.renameTensor(q, "q");
  n.markOutput(q);
  n.renameTensor(k, "k");
  n.markOutput(k);
  if (readV) {
    Tensor* v = n.addLayer("Neg", {p[2]}, 1)->outputs[0];
    n.renameTensor(v, "v");
    n.markOutput(v);
  }
}

//! Builds, rewrites with `supported`, checks the counts, compares with the unfused network.
void check(Parts parts, bool readV, const std::function<bool(const Layer&)>& supported, bool expectRewrite) {
  auto make = [&](Network& n) { makePacked(n, parts, readV); };
  Network net;
  make(net);
  net.topoSort();
  net.inferShapes();
  EXPECT_EQ(rotaryPackedColumns(net, supported), expectRewrite);
  net.topoSort();
  net.inferShapes();
  std::vector<std::vector<int64_t>> cols;
  for (const auto& l : net.layers())
    if (l->op == "RotaryEmbedding" && l->attrs.has(attr::kRotaryColumns)) cols.push_back(l->attrs.getInts(attr::kRotaryColumns, {}));
  if (expectRewrite) {
    ASSERT_EQ(cols.size(), 2u);
    EXPECT_EQ(cols[0], (std::vector<int64_t>{0, HD}));
    EXPECT_EQ(cols[1], (std::vector<int64_t>{HD, HD}));
    // The Split goes unless V still reads it; the Slices of Q and K go, V's stays when read.
    EXPECT_EQ(countOps(net, "Split") + countOps(net, "Slice"), readV ? 1 : 0);
  } else {
    EXPECT_TRUE(cols.empty());
  }
  const Dims in = parts == Parts::kSplitOnRows ? Dims{B, 3 * S, HD} : Dims{B, S, 3 * HD};
  const std::map<std::string, HostTensor> inputs{{"qkv", randomTensor(in, 7)}};
  Network ref;
  make(ref);
  const auto want = kiln::test::evaluateReference(ref, inputs), got = kiln::test::evaluateReference(net, inputs);
  kiln::test::expectOutputsNear(got, want, 1e-6);
}

}  // namespace

TEST(PassRotaryColumns, SplitPartsAreReadInPlace) {
  check(Parts::kSplit, false, nullptr, true);
  check(Parts::kSplit, true, nullptr, true);
}

TEST(PassRotaryColumns, SlicedPartsAreReadInPlace) {
  check(Parts::kSlices, false, nullptr, true);
  check(Parts::kSlices, true, nullptr, true);
}

TEST(PassRotaryColumns, NothingChangesWithoutAKernelOrOnOtherAxes) {
  check(Parts::kSplit, false, [](const Layer&) { return false; }, false);
  check(Parts::kSplitOnRows, false, nullptr, false);
}

TEST(PassRotaryColumns, ReferenceRefusesBadRanges) {
  for (const std::vector<int64_t>& bad : {std::vector<int64_t>{-1, HD}, {0, 0}, {2 * HD + 1, HD}, {0}}) {
    Network n;
    Attributes a;
    a.set("num_heads", H);
    a.set(attr::kRotaryColumns, bad);
    Tensor* x = n.addInput("x", DataType::kFLOAT, {B, S, 3 * HD});
    n.markOutput(n.addLayer("RotaryEmbedding",
                            {x, n.addConstant("", randomTensor({B, S, D / 2}, 1)), n.addConstant("", randomTensor({B, S, D / 2}, 2))}, 1, a)
                     ->outputs[0]);
    n.topoSort();
    EXPECT_THROW(n.inferShapes(), Error) << bad.size() << " " << bad[0];
  }
}
