// The rotary-embedding fusion (builder/passes/fuse_rotary.cpp): transformers' apply_rotary_pos_emb
// written out (x * cos + rotate_half(x) * sin) becomes one RotaryEmbedding layer, and the fused
// network computes what the unfused one does (reference kernels); patterns that are not exactly it
// stay.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "builder/passes/passes.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::countOps;
using kiln::test::randomTensor;

namespace {

constexpr int64_t B = 2, H = 3, S = 7, D = 8;

HostTensor ints(std::vector<int64_t> v) {
  HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

//! cos or sin of position * inverse frequency, as [1, 1, S, D] = cat(freqs, freqs); `skew` breaks
//! the equal halves.
HostTensor cache(bool sine, float skew = 0.f) {
  HostTensor c(DataType::kFLOAT, {1, 1, S, D});
  for (int64_t p = 0; p < S; ++p)
    for (int64_t j = 0; j < D; ++j) {
      const double f = std::pow(10000.0, -2.0 * static_cast<double>(j % (D / 2)) / D) * static_cast<double>(p);
      c.as<float>()[p * D + j] = static_cast<float>(sine ? std::sin(f) : std::cos(f)) + (j >= D / 2 ? skew : 0.f);
    }
  return c;
}

Tensor* slice(Network& n, Tensor* x, int64_t start, int64_t end) {
  return n.addLayer("Slice", {x, n.addConstant("", ints({start})), n.addConstant("", ints({end})), n.addConstant("", ints({-1}))}, 1)
      ->outputs[0];
}

//! x * cos + Concat(-x[..., D/2:], x[..., :D/2]) * sin, operands in the given orders; `negLow`
//! negates the other half instead (Concat(-x[..., :D/2], x[..., D/2:]): not rotate_half).
Tensor* rope(Network& n, Tensor* x, Tensor* c, Tensor* s, bool swapped, bool negLow = false) {
  Tensor* neg = n.addLayer("Neg", {negLow ? slice(n, x, 0, D / 2) : slice(n, x, D / 2, INT64_MAX)}, 1)->outputs[0];
  Attributes cat;
  cat.set("axis", int64_t(-1));
  Tensor* rot = n.addLayer("Concat", {neg, negLow ? slice(n, x, D / 2, D) : slice(n, x, 0, D / 2)}, 1, cat)->outputs[0];
  Tensor* a = n.addElementWise(swapped ? c : x, swapped ? x : c, "Mul")->outputs[0];
  Tensor* b = n.addElementWise(swapped ? s : rot, swapped ? rot : s, "Mul")->outputs[0];
  return n.addElementWise(swapped ? b : a, swapped ? a : b, "Add")->outputs[0];
}

//! Q and K rotated (K with the operands the other way round), then Q K^T.
void makeRope(Network& n, const HostTensor& cosV, const HostTensor& sinV, bool negLow = false) {
  Tensor* c = n.addConstant("cos", cosV);
  Tensor* s = n.addConstant("sin", sinV);
  Tensor* q = rope(n, n.addInput("q", DataType::kFLOAT, {B, H, S, D}), c, s, false, negLow);
  Tensor* k = rope(n, n.addInput("k", DataType::kFLOAT, {B, H, S, D}), c, s, true, negLow);
  Tensor* y = n.addMatMul(q, kiln::test::addPermute(n, k, {0, 1, 3, 2})->outputs[0])->outputs[0];
  n.renameTensor(y, "y");
  n.markOutput(y);
}

//! The caches as a dynamic export computes them from the sequence length of q [B, H, S, D]:
//! cos/sin(Concat(f, f)) with f = Range(0, S) x inverse frequencies, unsqueezed to [1, 1, S, D].
std::pair<Tensor*, Tensor*> runtimeCaches(Network& n, Tensor* q) {
  Attributes axis0;
  axis0.set("axis", int64_t(0));
  HostTensor two(DataType::kINT64, {});
  *two.as<int64_t>() = 2;
  HostTensor zero(DataType::kFLOAT, {}), one(DataType::kFLOAT, {}), inv(DataType::kFLOAT, {1, D / 2});
  *zero.as<float>() = 0.f;
  *one.as<float>() = 1.f;
  for (int64_t j = 0; j < D / 2; ++j) inv.as<float>()[j] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(j) / D));
  Tensor* s = n.addLayer("Gather", {n.addLayer("Shape", {q}, 1)->outputs[0], n.addConstant("", two)}, 1, axis0)->outputs[0];
  Attributes toFloat;
  toFloat.set("to", int64_t(1));
  Tensor* sf = n.addLayer("Cast", {s}, 1, toFloat)->outputs[0];
  Tensor* pos = n.addLayer("Range", {n.addConstant("", zero), sf, n.addConstant("", one)}, 1)->outputs[0];
  pos = n.addLayer("Unsqueeze", {pos, n.addConstant("", ints({1}))}, 1)->outputs[0];  // [S, 1]
  Tensor* f = n.addElementWise(pos, n.addConstant("", inv), "Mul")->outputs[0];      // [S, D/2]
  Attributes last;
  last.set("axis", int64_t(-1));
  Tensor* emb = n.addLayer("Concat", {f, f}, 1, last)->outputs[0];
  auto cache = [&](const char* op) {
    return n.addLayer("Unsqueeze", {n.addLayer(op, {emb}, 1)->outputs[0], n.addConstant("", ints({0, 1}))}, 1)->outputs[0];
  };
  return {cache("Cos"), cache("Sin")};
}

void makeDynamicRope(Network& n) {
  Tensor* qIn = n.addInput("q", DataType::kFLOAT, {-1, H, -1, D});
  auto [c, s] = runtimeCaches(n, qIn);
  Tensor* q = rope(n, qIn, c, s, false);
  Tensor* k = rope(n, n.addInput("k", DataType::kFLOAT, {-1, H, -1, D}), c, s, true);
  Tensor* y = n.addMatMul(q, kiln::test::addPermute(n, k, {0, 1, 3, 2})->outputs[0])->outputs[0];
  n.renameTensor(y, "y");
  n.markOutput(y);
}

//! q's and k's dims at batch b and sequence s ([B, H, S, D] unless a test says otherwise).
using RunDims = std::function<Dims(int64_t, int64_t)>;
Dims headsFirst(int64_t b, int64_t s) { return {b, H, s, D}; }

//! Builds `make`, fuses (with `samples`), checks the counts (and `inspect`), and compares with the
//! unfused network at each run shape.
void checkFusion(const std::function<void(Network&)>& make, int expectFused, const InputSamples& samples = {},
                 const std::vector<std::pair<int64_t, int64_t>>& runs = {{B, S}}, const RunDims& dims = headsFirst,
                 const std::function<void(const Network&)>& inspect = nullptr) {
  Network net;
  make(net);
  net.topoSort();
  net.inferShapes();
  EXPECT_EQ(fuseRotaryPattern(net, samples), expectFused > 0);
  net.removeDeadLayers();
  EXPECT_EQ(countOps(net, "RotaryEmbedding"), expectFused);
  if (expectFused == 2)
    for (const char* gone : {"Neg", "Add"}) EXPECT_EQ(countOps(net, gone), 0) << gone;
  if (inspect) inspect(net);
  uint32_t seed = 1;
  for (auto [b, s] : runs) {
    const std::map<std::string, HostTensor> in{{"q", randomTensor(dims(b, s), seed++)}, {"k", randomTensor(dims(b, s), seed++)}};
    Network ref;
    make(ref);
    const HostTensor want = kiln::test::evaluateReference(ref, in).at("y"), got = kiln::test::evaluateReference(net, in).at("y");
    ASSERT_EQ(got.dims(), want.dims());
    for (int64_t i = 0; i < want.count(); ++i)
      ASSERT_NEAR(got.getDouble(i), want.getDouble(i), 1e-5 * (1 + std::fabs(want.getDouble(i)))) << b << "x" << s << " [" << i << "]";
  }
}

}  // namespace

TEST(PassRotary, ApplyRotaryPosEmbBecomesRotaryEmbedding) {
  checkFusion([](Network& n) { makeRope(n, cache(false), cache(true)); }, 2);
}

TEST(PassRotary, PatternsThatAreNotRotateHalfStay) {
  // cos whose halves differ (not cat(freqs, freqs)), and the low half negated instead of the high one.
  checkFusion([](Network& n) { makeRope(n, cache(false, 0.25f), cache(true)); }, 0);
  checkFusion([](Network& n) { makeRope(n, cache(false), cache(true), true); }, 0);
}

// A dynamic export: the caches come from the sequence length, are checked at the sample shapes, and
// are sliced and indexed at run time; the fused network agrees at shapes that are not samples.
TEST(PassRotary, DynamicCachesFuseWithRunTimePositions) {
  auto sample = [](int64_t b, int64_t s) { return std::map<std::string, Dims>{{"q", {b, H, s, D}}, {"k", {b, H, s, D}}}; };
  checkFusion(makeDynamicRope, 2, {sample(2, 16), sample(4, 32), sample(1, 1), sample(3, 9)}, {{2, 5}, {3, 11}});
  checkFusion(makeDynamicRope, 0);  // without samples nothing proves the halves equal
}

// Partial rotation (Phi, GPT-NeoX: the first R of each head's dims rotate, the rest pass through):
// Concat(rope(x[..., :R]), x[..., R:]) becomes one RotaryEmbedding of x with rotary_embedding_dim
// R; the fused network agrees with the unfused one. With the parts the other way round
// (Concat(x[..., R:], rope(..))) only the rotation itself fuses.
TEST(PassRotary, PartialRotationBecomesOneRotaryEmbedding) {
  constexpr int64_t kPass = 4, kHead = D + kPass;
  for (bool reversed : {false, true}) {
    SCOPED_TRACE(reversed ? "pass-through part first" : "rotated part first");
    auto make = [reversed](Network& n) {
      Tensor* c = n.addConstant("cos", cache(false));
      Tensor* s = n.addConstant("sin", cache(true));
      Attributes cat;
      cat.set("axis", int64_t(-1));
      auto partial = [&](Tensor* x, bool swapped) {
        Tensor* rot = rope(n, slice(n, x, 0, D), c, s, swapped);
        Tensor* pass = slice(n, x, D, INT64_MAX);
        return n.addLayer("Concat", {reversed ? pass : rot, reversed ? rot : pass}, 1, cat)->outputs[0];
      };
      Tensor* q = partial(n.addInput("q", DataType::kFLOAT, {B, H, S, kHead}), false);
      Tensor* k = partial(n.addInput("k", DataType::kFLOAT, {B, H, S, kHead}), true);
      Tensor* y = n.addMatMul(q, kiln::test::addPermute(n, k, {0, 1, 3, 2})->outputs[0])->outputs[0];
      n.renameTensor(y, "y");
      n.markOutput(y);
    };
    Network net;
    make(net);
    net.topoSort();
    net.inferShapes();
    EXPECT_TRUE(fuseRotaryPattern(net));
    EXPECT_EQ(countOps(net, "RotaryEmbedding"), 2);
    EXPECT_EQ(countOps(net, "Concat"), reversed ? 2 : 0);
    EXPECT_EQ(countOps(net, "Slice"), reversed ? 4 : 0);
    for (auto& l : net.layers())
      if (l->op == "RotaryEmbedding") {
        EXPECT_EQ(l->attrs.getInt("rotary_embedding_dim", 0), reversed ? 0 : D);
        EXPECT_EQ(l->inputs[0]->dims.back(), reversed ? D : kHead);
      }
    const std::map<std::string, HostTensor> in{{"q", randomTensor({B, H, S, kHead}, 5)}, {"k", randomTensor({B, H, S, kHead}, 6)}};
    Network ref;
    make(ref);
    kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), kiln::test::evaluateReference(ref, in), 1e-5);
  }
}

namespace {

//! GPT-J's interleaved rotation (rotate_every_two): pairs (x[2k], x[2k+1]) -> (-x[2k+1], x[2k]), as
//! the exporter writes it: Reshape(Concat(Unsqueeze(Neg(x[..., 1::2]), -1), Unsqueeze(x[..., 0::2], -1), -1)).
//! `negEven` negates the other element of each pair instead (not a rotation by +angle).
Tensor* rotateEveryTwo(Network& n, Tensor* x, bool negEven, int64_t width = D) {
  auto strided = [&](int64_t start) {
    return n.addLayer("Slice", {x, n.addConstant("", ints({start})), n.addConstant("", ints({INT64_MAX})), n.addConstant("", ints({-1})),
                                n.addConstant("", ints({2}))},
                      1)
        ->outputs[0];
  };
  auto unitAxis = [&](Tensor* t) { return n.addLayer("Unsqueeze", {t, n.addConstant("", ints({-1}))}, 1)->outputs[0]; };
  Attributes cat;
  cat.set("axis", int64_t(-1));
  Tensor* first = unitAxis(n.addLayer("Neg", {strided(negEven ? 0 : 1)}, 1)->outputs[0]);
  Tensor* second = unitAxis(strided(negEven ? 1 : 0));
  Tensor* pairs = n.addLayer("Concat", {first, second}, 1, cat)->outputs[0];
  return n.addLayer("Reshape", {pairs, n.addConstant("", ints({0, 0, 0, width}))}, 1)->outputs[0];
}

//! cos or sin repeat_interleaved over pairs, of dims `dims` ([1, S, 1, R] or [1, 1, S, R]); `skew`
//! makes the second of each pair differ.
HostTensor pairCacheValues(bool sine, const Dims& dims, float skew = 0.f) {
  HostTensor c(DataType::kFLOAT, dims);
  const int64_t r = dims.back(), s = c.count() / r;
  for (int64_t p = 0; p < s; ++p)
    for (int64_t j = 0; j < r; ++j) {
      const double f = std::pow(10000.0, -2.0 * static_cast<double>(j / 2) / r) * static_cast<double>(p);
      c.as<float>()[p * r + j] = static_cast<float>(sine ? std::sin(f) : std::cos(f)) + (j % 2 ? skew : 0.f);
    }
  return c;
}

struct EveryTwoCase {
  bool headsFirst;  // x [B, H, S, D] (else GPT-J's [B, S, H, D])
  int64_t pass;     // dims of each head that pass through (partial rotation when > 0)
  float skew;
  bool negEven;
};

//! Q and K of `c`'s layout rotated the GPT-J way (K with the Mul / Add operands swapped), then their
//! scores in [B, H, S, S].
void makeEveryTwo(Network& n, const EveryTwoCase& c) {
  const Dims x = c.headsFirst ? Dims{B, H, S, D + c.pass} : Dims{B, S, H, D + c.pass};
  const Dims cd = c.headsFirst ? Dims{1, 1, S, D} : Dims{1, S, 1, D};
  Tensor* cosT = n.addConstant("cos", pairCacheValues(false, cd, c.skew));
  Tensor* sinT = n.addConstant("sin", pairCacheValues(true, cd));
  Attributes cat;
  cat.set("axis", int64_t(-1));
  auto rotate = [&](Tensor* in, bool swapped) {
    Tensor* rot = c.pass ? slice(n, in, 0, D) : in;
    Tensor* r = rotateEveryTwo(n, rot, c.negEven);
    Tensor* a = n.addElementWise(swapped ? cosT : rot, swapped ? rot : cosT, "Mul")->outputs[0];
    Tensor* b = n.addElementWise(swapped ? sinT : r, swapped ? r : sinT, "Mul")->outputs[0];
    Tensor* y = n.addElementWise(swapped ? b : a, swapped ? a : b, "Add")->outputs[0];
    if (c.pass) y = n.addLayer("Concat", {y, slice(n, in, D, INT64_MAX)}, 1, cat)->outputs[0];
    return c.headsFirst ? y : kiln::test::addPermute(n, y, {0, 2, 1, 3})->outputs[0];
  };
  Tensor* q = rotate(n.addInput("q", DataType::kFLOAT, x), false);
  Tensor* k = rotate(n.addInput("k", DataType::kFLOAT, x), true);
  Tensor* y = n.addMatMul(q, kiln::test::addPermute(n, k, {0, 1, 3, 2})->outputs[0])->outputs[0];
  n.renameTensor(y, "y");
  n.markOutput(y);
}

}  // namespace

// GPT-J / CodeGen: x * cos + rotate_every_two(x) * sin becomes one interleaved RotaryEmbedding, in
// the op's [B, H, S, D] form or, for GPT-J's [B, S, H, D], as the 3-D form with num_heads between
// two Reshapes; a partial rotation's Concat with the pass-through part joins it. Values unchanged.
// Caches whose pairs differ, or the other element negated, stay unfused.
TEST(PassRotary, InterleavedPairsBecomeOneRotaryEmbedding) {
  for (const EveryTwoCase& c : {EveryTwoCase{false, 0, 0.f, false}, EveryTwoCase{false, 4, 0.f, false},
                                EveryTwoCase{true, 0, 0.f, false}, EveryTwoCase{true, 6, 0.f, false},
                                EveryTwoCase{false, 4, 0.25f, false}, EveryTwoCase{true, 0, 0.f, true}}) {
    const bool fuses = c.skew == 0.f && !c.negEven;
    SCOPED_TRACE(std::string(c.headsFirst ? "[B, H, S, D]" : "[B, S, H, D]") + " pass " + std::to_string(c.pass) +
                 (fuses ? "" : " (not a rotation)"));
    Network net;
    makeEveryTwo(net, c);
    net.topoSort();
    net.inferShapes();
    EXPECT_EQ(fuseRotaryPattern(net), fuses);
    net.removeDeadLayers();
    EXPECT_EQ(countOps(net, "RotaryEmbedding"), fuses ? 2 : 0);
    if (fuses) {
      for (const char* gone : {"Neg", "Add", "Slice", "Concat", "Unsqueeze", "Mul"}) EXPECT_EQ(countOps(net, gone), 0) << gone;
      for (auto& l : net.layers())
        if (l->op == "RotaryEmbedding") {
          EXPECT_EQ(l->attrs.getInt("interleaved", 0), 1);
          EXPECT_EQ(l->attrs.getInt("rotary_embedding_dim", 0), c.pass ? D : 0);
          EXPECT_EQ(l->attrs.getInt("num_heads", 0), c.headsFirst ? 0 : H);
        }
    }
    const Dims x = c.headsFirst ? Dims{B, H, S, D + c.pass} : Dims{B, S, H, D + c.pass};
    const std::map<std::string, HostTensor> in{{"q", randomTensor(x, 7)}, {"k", randomTensor(x, 8)}};
    Network ref;
    makeEveryTwo(ref, c);
    kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), kiln::test::evaluateReference(ref, in), 1e-5);
  }
}

// A dynamic export of a partial rotation (GPT-NeoX with dynamic batch and sequence): the rotation's
// run-time positions read Shape(x[..., :R]); merged into one RotaryEmbedding of x, those Shapes read
// x itself (batch and sequence: the same dims), so no slice is left. Values agree at run shapes
// that are not samples.
TEST(PassRotary, DynamicPartialRotationBecomesOneRotaryEmbedding) {
  constexpr int64_t kPass = 4, kHead = D + kPass;
  auto make = [](Network& n) {
    Tensor* qIn = n.addInput("q", DataType::kFLOAT, {-1, H, -1, kHead});
    auto [c, s] = runtimeCaches(n, qIn);
    Attributes cat;
    cat.set("axis", int64_t(-1));
    auto partial = [&](Tensor* x, bool swapped) {
      return n.addLayer("Concat", {rope(n, slice(n, x, 0, D), c, s, swapped), slice(n, x, D, INT64_MAX)}, 1, cat)->outputs[0];
    };
    Tensor* q = partial(qIn, false);
    Tensor* k = partial(n.addInput("k", DataType::kFLOAT, {-1, H, -1, kHead}), true);
    Tensor* y = n.addMatMul(q, kiln::test::addPermute(n, k, {0, 1, 3, 2})->outputs[0])->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  auto sample = [](int64_t b, int64_t s) {
    return std::map<std::string, Dims>{{"q", {b, H, s, kHead}}, {"k", {b, H, s, kHead}}};
  };
  checkFusion(make, 2, {sample(2, 16), sample(4, 32), sample(1, 1), sample(3, 9)}, {{2, 5}, {3, 11}},
              [](int64_t b, int64_t s) { return Dims{b, H, s, kHead}; }, [head = kHead](const Network& net) {
                EXPECT_EQ(countOps(net, "Concat"), 1);  // the caches' cat(freqs, freqs) alone
                for (auto& l : net.layers()) {
                  if (l->op == "RotaryEmbedding") EXPECT_EQ(l->inputs[0]->dims.back(), head);
                  if (l->op == "Slice") EXPECT_FALSE(l->inputs[0]->isInput) << l->name << " slices " << l->inputs[0]->name;
                }
              });
}

// A dynamic GPT-J-style export: x [B, S, H, D] with batch and sequence unknown, cos / sin computed
// from the sequence length with each frequency repeated for its pair ([1, S, 1, D]). The pairs are
// checked at the samples and the caches sliced (c[..., 0:D:2]) at run time; one interleaved
// RotaryEmbedding each, agreeing at run shapes that are not samples.
TEST(PassRotary, DynamicInterleavedPairsBecomeOneRotaryEmbedding) {
  auto caches = [](Network& n, Tensor* q) {
    Attributes axis0;
    axis0.set("axis", int64_t(0));
    HostTensor one(DataType::kINT64, {});
    *one.as<int64_t>() = 1;
    HostTensor zero(DataType::kFLOAT, {}), step(DataType::kFLOAT, {}), inv(DataType::kFLOAT, {1, D});
    *zero.as<float>() = 0.f;
    *step.as<float>() = 1.f;
    for (int64_t j = 0; j < D; ++j) inv.as<float>()[j] = static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(j / 2) / D));
    Tensor* s = n.addLayer("Gather", {n.addLayer("Shape", {q}, 1)->outputs[0], n.addConstant("", one)}, 1, axis0)->outputs[0];
    Attributes toFloat;
    toFloat.set("to", int64_t(1));
    Tensor* pos = n.addLayer("Range", {n.addConstant("", zero), n.addLayer("Cast", {s}, 1, toFloat)->outputs[0], n.addConstant("", step)}, 1)
                      ->outputs[0];
    pos = n.addLayer("Unsqueeze", {pos, n.addConstant("", ints({1}))}, 1)->outputs[0];  // [S, 1]
    Tensor* f = n.addElementWise(pos, n.addConstant("", inv), "Mul")->outputs[0];      // [S, D], pairs equal
    auto cache = [&](const char* op) {
      return n.addLayer("Unsqueeze", {n.addLayer(op, {f}, 1)->outputs[0], n.addConstant("", ints({0, 2}))}, 1)->outputs[0];  // [1, S, 1, D]
    };
    return std::make_pair(cache("Cos"), cache("Sin"));
  };
  auto make = [&caches](Network& n) {
    Tensor* qIn = n.addInput("q", DataType::kFLOAT, {-1, -1, H, D});
    auto [c, s] = caches(n, qIn);
    auto rotate = [&](Tensor* x, bool swapped) {
      Tensor* r = rotateEveryTwo(n, x, false);
      Tensor* a = n.addElementWise(swapped ? c : x, swapped ? x : c, "Mul")->outputs[0];
      Tensor* b = n.addElementWise(swapped ? s : r, swapped ? r : s, "Mul")->outputs[0];
      return kiln::test::addPermute(n, n.addElementWise(a, b, "Add")->outputs[0], {0, 2, 1, 3})->outputs[0];
    };
    Tensor* q = rotate(qIn, false);
    Tensor* k = rotate(n.addInput("k", DataType::kFLOAT, {-1, -1, H, D}), true);
    Tensor* y = n.addMatMul(q, kiln::test::addPermute(n, k, {0, 1, 3, 2})->outputs[0])->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  auto sample = [](int64_t b, int64_t s) { return std::map<std::string, Dims>{{"q", {b, s, H, D}}, {"k", {b, s, H, D}}}; };
  const RunDims sequenceFirst = [](int64_t b, int64_t s) { return Dims{b, s, H, D}; };
  checkFusion(make, 0, {}, {{2, 5}}, sequenceFirst);  // without samples nothing proves the pairs equal
  checkFusion(make, 2, {sample(2, 16), sample(4, 32), sample(1, 1), sample(3, 9)}, {{2, 5}, {3, 11}}, sequenceFirst,
              [](const Network& net) {
                for (auto& l : net.layers())
                  if (l->op == "RotaryEmbedding") EXPECT_EQ(l->attrs.getInt("interleaved", 0), 1);
              });
}
