// traceView (builder/passes/view_trace.h): random chains of data-movement layers over a tensor of
// element indices; wherever the trace claims a strided view, every element the reference
// evaluation produces must sit at offset + sum(index * stride) of the base.
#include <gtest/gtest.h>

#include <random>

#include "builder/passes/view_trace.h"
#include "reference_eval.h"

using namespace kiln;

namespace {

HostTensor ints(const std::vector<int64_t>& v, bool scalar = false) {
  HostTensor t(DataType::kINT64, scalar ? Dims{} : Dims{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

//! Appends one random data-movement layer to `x` (known dims); returns its output.
Tensor* randomStep(Network& n, Tensor* x, std::mt19937& rng) {
  const Dims d = x->dims;
  const int64_t rank = static_cast<int64_t>(d.size());
  auto pick = [&](int64_t hi) { return static_cast<int64_t>(rng() % static_cast<uint32_t>(hi)); };
  const int64_t axis = pick(rank);
  switch (pick(6)) {
    case 0: {  // Transpose
      std::vector<int64_t> perm(d.size());
      for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
      std::shuffle(perm.begin(), perm.end(), rng);
      Attributes a;
      a.set("perm", perm);
      return n.addLayer("Transpose", {x}, 1, a)->outputs[0];
    }
    case 1: {  // Reshape: merge two neighbours or split one dim by a divisor
      Dims s = d;
      if (rank > 1 && pick(2) == 0 && axis + 1 < rank) {
        s[axis] *= s[axis + 1];
        s.erase(s.begin() + axis + 1);
      } else {
        int64_t f = 1;
        for (int64_t k = 2; k <= d[axis]; ++k)
          if (d[axis] % k == 0) {
            f = k;
            if (pick(2) == 0) break;
          }
        s[axis] = d[axis] / f;
        s.insert(s.begin() + axis + 1, f);
      }
      if (s.size() > 6) return x;
      return n.addLayer("Reshape", {x, n.addConstant("", ints(s))}, 1)->outputs[0];
    }
    case 2: {  // Gather one index (scalar or 1-element)
      if (rank < 2) return x;
      Attributes a;
      a.set("axis", axis);
      return n.addLayer("Gather", {x, n.addConstant("", ints({pick(d[axis])}, pick(2) == 0))}, 1, a)->outputs[0];
    }
    case 3: {  // Split in two, keep one part
      if (d[axis] < 2) return x;
      const int64_t first = 1 + pick(d[axis] - 1);
      Attributes a;
      a.set("axis", axis);
      Layer* l = n.addLayer("Split", {x, n.addConstant("", ints({first, d[axis] - first}))}, 2, a);
      return l->outputs[pick(2)];
    }
    case 4: {  // Slice [s, e) of one axis
      const int64_t s = pick(d[axis]), e = s + 1 + pick(d[axis] - s);
      return n.addLayer("Slice", {x, n.addConstant("", ints({s})), n.addConstant("", ints({e})), n.addConstant("", ints({axis}))}, 1)
          ->outputs[0];
    }
    default: {  // Unsqueeze
      if (rank >= 6) return x;
      return n.addLayer("Unsqueeze", {x, n.addConstant("", ints({pick(rank + 1)}))}, 1)->outputs[0];
    }
  }
}

}  // namespace

TEST(ViewTrace, RandomChainsAgreeWithTheReference) {
  std::mt19937 rng(2026);
  int traced = 0;
  for (int trial = 0; trial < 300; ++trial) {
    Network n;
    const Dims baseDims{2 + static_cast<int64_t>(rng() % 3), 6, 4 + static_cast<int64_t>(rng() % 2) * 4};
    Tensor* base = n.addInput("base", DataType::kFLOAT, baseDims);
    // A non-view layer first, so that the trace stops at a computed tensor.
    Tensor* x = n.addActivation(base, "Relu")->outputs[0];
    Tensor* start = x;
    const int steps = 1 + static_cast<int>(rng() % 6);
    for (int s = 0; s < steps; ++s) {
      n.topoSort();
      n.inferShapes();
      x = randomStep(n, x, rng);
    }
    n.renameTensor(x, "y");
    n.markOutput(x);
    n.topoSort();
    n.inferShapes();
    StridedView v;
    if (!traceView(x, v)) continue;
    ++traced;
    ASSERT_EQ(v.base, start);
    HostTensor in(DataType::kFLOAT, baseDims);
    for (int64_t i = 0; i < in.count(); ++i) in.as<float>()[i] = static_cast<float>(i);
    const HostTensor y = kiln::test::evaluateReference(n, {{"base", in}}).at("y");
    ASSERT_EQ(y.dims(), v.sizes) << "trial " << trial;
    std::vector<int64_t> idx(v.sizes.size(), 0);
    for (int64_t e = 0; e < y.count(); ++e) {
      int64_t at = v.offset;
      for (size_t k = 0; k < idx.size(); ++k) at += idx[k] * v.strides[k];
      ASSERT_EQ(static_cast<int64_t>(y.as<float>()[e]), at) << "trial " << trial << " element " << e;
      for (size_t k = idx.size(); k-- > 0;) {
        if (++idx[k] < v.sizes[k]) break;
        idx[k] = 0;
      }
    }
  }
  EXPECT_GT(traced, 150) << "most random chains are strided views";
}
