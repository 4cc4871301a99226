// Reduction ops: shape inference and errors, reference kernels vs NumPy (expected values computed
// with NumPy from the same inputs), ONNX normalization, optimized tactics vs reference.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <random>

#include "backends/backend.h"
#include "kiln/network.h"
#include "ops/op_registry.h"
#include "ref_case.h"
#include "tactic_names.h"

using namespace kiln;

namespace {

HostTensor makeTensor(DataType t, const Dims& d, const std::function<double(int64_t)>& f) {
  HostTensor h(t, d);
  for (int64_t i = 0; i < h.count(); ++i) {
    double v = f(i);
    switch (t) {
      case DataType::kFLOAT: h.as<float>()[i] = static_cast<float>(v); break;
      case DataType::kDOUBLE: h.as<double>()[i] = v; break;
      case DataType::kINT64: h.as<int64_t>()[i] = static_cast<int64_t>(v); break;
      case DataType::kINT32: h.as<int32_t>()[i] = static_cast<int32_t>(v); break;
      case DataType::kBOOL: h.as<uint8_t>()[i] = v != 0; break;
      default: ADD_FAILURE() << "makeTensor: type not handled";
    }
  }
  return h;
}
HostTensor axesTensor(const std::vector<int64_t>& axes) {
  return makeTensor(DataType::kINT64, {static_cast<int64_t>(axes.size())}, [&](int64_t i) { return double(axes[i]); });
}
//! The deterministic inputs the NumPy expectations were computed from.
HostTensor wave(const Dims& d) { return makeTensor(DataType::kFLOAT, d, [](int64_t i) { return 3 * std::sin(0.7 * double(i)); }); }
HostTensor positive(const Dims& d) {
  return makeTensor(DataType::kFLOAT, d, [](int64_t i) { return 0.5 + 0.25 * double((i * 7) % 11); });
}

//! One reduction layer described for inference and run through a tactic.
class ReduceCase {
 public:
  explicit ReduceCase(const std::string& op) {
    desc.name = "test";
    desc.op = op;
    desc.attrs = &attrs;
    desc.outputs.resize(1);
  }
  ReduceCase& input(const HostTensor& t, bool constant = false) {
    desc.inputs.push_back(TensorDesc{t.type(), t.dims(), constant ? t : HostTensor()});
    desc.inputPresent.push_back(true);
    data.push_back(t);
    return *this;
  }
  ReduceCase& axes(const std::vector<int64_t>& a) { return input(axesTensor(a), true); }
  ReduceCase& shape(DataType t, const Dims& d) {
    desc.inputs.push_back(TensorDesc{t, d, HostTensor()});
    desc.inputPresent.push_back(true);
    data.emplace_back();
    return *this;
  }
  ReduceCase& attr(const std::string& n, AttrValue v) {
    attrs.set(n, std::move(v));
    return *this;
  }
  void infer() { inferLayer(desc); }
  HostTensor run(const Tactic& tactic, int threads = 4) { return test::runLayer(desc, data, tactic, threads)[0]; }
  HostTensor runRef() { return run(referenceTactic(desc.op)); }
  std::optional<Tactic> tactic(const std::string& name) {
    infer();
    for (auto& t : getBackend(DeviceType::kCPU, 4)->tactics(desc))
      if (t.name == name) return t;
    return std::nullopt;
  }

  Attributes attrs;
  LayerDesc desc;
  std::vector<HostTensor> data;
};

void expectClose(const HostTensor& actual, const std::vector<double>& expected, double tol) {
  ASSERT_EQ(actual.count(), static_cast<int64_t>(expected.size()));
  for (int64_t i = 0; i < actual.count(); ++i)
    EXPECT_NEAR(actual.getDouble(i), expected[i], tol * std::max(1.0, std::fabs(expected[i]))) << "at " << i;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Reference kernels vs NumPy

TEST(ReduceRef, AllOpsMatchNumpy) {
  struct Expect {
    const char* op;
    std::vector<double> axes02, all;
  };
  // NumPy on wave([2,3,4]) (positive([2,3,4]) for ReduceLogSum): axes (0, 2) keepdims, then all.
  const std::vector<Expect> table = {
      {"ReduceSum", {7.2611975, -8.29183648, 8.36430966}, {7.33367068}},
      {"ReduceMean", {0.907649687, -1.03647956, 1.04553871}, {0.305569612}},
      {"ReduceMax", {2.95634919, 2.00870929, 2.97182207}, {2.97182207}},
      {"ReduceMin", {-2.63908728, -2.94735784, -1.89379991}, {-2.94735784}},
      {"ReduceProd", {0, -8.99568652, 4.38669523}, {0}},
      {"ReduceL1", {14.7382468, 14.5209222, 14.444338}, {43.7035071}},
      {"ReduceL2", {5.90290893, 5.80983139, 5.80276164}, {10.1128887}},
      {"ReduceLogSum", {2.74084002, 2.62103882, 2.48490665}, {3.71965111}},
      {"ReduceLogSumExp", {4.03343369, 2.482901, 4.13896177}, {4.8764792}},
      {"ReduceSumSquare", {34.8443339, 33.7541408, 33.6720426}, {102.270517}},
  };
  for (const auto& e : table) {
    SCOPED_TRACE(e.op);
    HostTensor x = std::string(e.op) == "ReduceLogSum" ? positive({2, 3, 4}) : wave({2, 3, 4});
    ReduceCase some(e.op);
    some.input(x).axes({0, -1});
    HostTensor y = some.runRef();
    EXPECT_EQ(y.dims(), (Dims{1, 3, 1}));
    expectClose(y, e.axes02, 1e-6);
    ReduceCase all(e.op);
    all.input(x).attr("keepdims", int64_t(0));
    HostTensor z = all.runRef();
    EXPECT_EQ(z.dims(), Dims{});
    expectClose(z, e.all, 1e-6);
  }
}

TEST(ReduceRef, IntegersStayExact) {
  // x = [[1, 2, 4], [-3, -5, -7]]; NumPy: sum [7, -15], prod [8, -105], mean(...).astype(int64) [2, -5].
  auto x = makeTensor(DataType::kINT64, {2, 3}, [](int64_t i) { return std::vector<double>{1, 2, 4, -3, -5, -7}[i]; });
  const std::vector<std::pair<const char*, std::vector<double>>> table = {
      {"ReduceSum", {7, -15}}, {"ReduceProd", {8, -105}}, {"ReduceMean", {2, -5}}, {"ReduceMax", {4, -3}},
      {"ReduceMin", {1, -7}},  {"ReduceL1", {7, 15}},     {"ReduceSumSquare", {21, 83}}};
  for (const auto& [op, expected] : table) {
    SCOPED_TRACE(op);
    ReduceCase c(op);
    c.input(x).axes({1}).attr("keepdims", int64_t(0));
    HostTensor y = c.runRef();
    EXPECT_EQ(y.type(), DataType::kINT64);
    expectClose(y, expected, 0);
  }
  // Large int64 sums must not go through double.
  auto big = makeTensor(DataType::kINT64, {2}, [](int64_t) { return 0.0; });
  big.as<int64_t>()[0] = (int64_t(1) << 60) + 1;
  big.as<int64_t>()[1] = 1;
  ReduceCase c("ReduceSum");
  c.input(big);
  EXPECT_EQ(c.runRef().as<int64_t>()[0], (int64_t(1) << 60) + 2);
}

TEST(ReduceRef, EmptySetGivesTheSpecIdentities) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<std::pair<const char*, double>> table = {
      {"ReduceSum", 0},    {"ReduceProd", 1},         {"ReduceMax", -inf},     {"ReduceMin", inf},
      {"ReduceL1", 0},     {"ReduceL2", 0},           {"ReduceLogSum", -inf},  {"ReduceLogSumExp", -inf},
      {"ReduceSumSquare", 0}};
  for (const auto& [op, expected] : table) {
    SCOPED_TRACE(op);
    ReduceCase c(op);
    c.input(HostTensor(DataType::kFLOAT, {2, 0, 4})).axes({1});
    HostTensor y = c.runRef();
    ASSERT_EQ(y.dims(), (Dims{2, 1, 4}));
    for (int64_t i = 0; i < y.count(); ++i) EXPECT_EQ(y.getDouble(i), expected);
  }
  ReduceCase mean("ReduceMean");
  mean.input(HostTensor(DataType::kFLOAT, {2, 0})).axes({1});
  EXPECT_TRUE(std::isnan(mean.runRef().getDouble(0)));
  ReduceCase intMax("ReduceMax");
  intMax.input(HostTensor(DataType::kINT32, {0, 3})).axes({0});
  EXPECT_EQ(intMax.runRef().as<int32_t>()[2], std::numeric_limits<int32_t>::min());
  ReduceCase boolMin("ReduceMin");
  boolMin.input(HostTensor(DataType::kBOOL, {0})).attr("keepdims", int64_t(0));
  EXPECT_EQ(boolMin.runRef().as<uint8_t>()[0], 1);  // all() of nothing is true
}

TEST(ReduceRef, EmptyAxesNoopOrReduceAll) {
  HostTensor x = wave({2, 3});
  ReduceCase noop("ReduceSum");
  noop.input(x).axes({}).attr("noop_with_empty_axes", int64_t(1));
  HostTensor same = noop.runRef();
  ASSERT_EQ(same.dims(), (Dims{2, 3}));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(same.getDouble(i), x.getDouble(i));
  ReduceCase all("ReduceMax");
  all.input(x).axes({});
  HostTensor m = all.runRef();
  ASSERT_EQ(m.dims(), (Dims{1, 1}));
  EXPECT_NEAR(m.getDouble(0), 2.95634919, 1e-6);  // max of 3 sin(0.7 i), i < 6: at i = 2
}

TEST(ReduceRef, BoolMaxIsAnyMinIsAll) {
  auto b = makeTensor(DataType::kBOOL, {2, 3}, [](int64_t i) { return std::vector<double>{0, 1, 0, 1, 1, 1}[i]; });
  ReduceCase any("ReduceMax"), all("ReduceMin");
  any.input(b).axes({1}).attr("keepdims", int64_t(0));
  all.input(b).axes({1}).attr("keepdims", int64_t(0));
  expectClose(any.runRef(), {1, 1}, 0);
  expectClose(all.runRef(), {0, 1}, 0);
}

// ---------------------------------------------------------------------------------------------
// Inference and errors

TEST(ReduceInfer, ShapesWithKnownAndUnknownAxes) {
  ReduceCase keep("ReduceMean");
  keep.shape(DataType::kFLOAT, {-1, 7, 5}).axes({-1});
  keep.infer();
  EXPECT_EQ(keep.desc.outputs[0].dims, (Dims{-1, 7, 1}));
  ReduceCase drop("ReduceL2");
  drop.shape(DataType::kFLOAT, {4, 7, 5}).axes({0, 2}).attr("keepdims", int64_t(0));
  drop.infer();
  EXPECT_EQ(drop.desc.outputs[0].dims, (Dims{7}));
  ReduceCase unknownKeep("ReduceSum");
  unknownKeep.shape(DataType::kFLOAT, {4, 1, 5}).shape(DataType::kINT64, {-1});
  unknownKeep.infer();
  EXPECT_EQ(unknownKeep.desc.outputs[0].dims, (Dims{-1, 1, -1}));
  ReduceCase unknownDrop("ReduceSum");
  unknownDrop.shape(DataType::kFLOAT, {4, 1, 5}).shape(DataType::kINT64, {2}).attr("keepdims", int64_t(0));
  unknownDrop.infer();
  EXPECT_EQ(unknownDrop.desc.outputs[0].dims, (Dims{-1}));
  ReduceCase unknownCount("ReduceSum");
  unknownCount.shape(DataType::kFLOAT, {4, 1, 5}).shape(DataType::kINT64, {-1}).attr("keepdims", int64_t(0));
  EXPECT_THROW(unknownCount.infer(), UnsupportedError);
}

TEST(ReduceInfer, Errors) {
  ReduceCase dup("ReduceSum");
  dup.shape(DataType::kFLOAT, {2, 3}).axes({1, -1});
  EXPECT_THROW(dup.infer(), Error);
  ReduceCase range("ReduceMax");
  range.shape(DataType::kFLOAT, {2, 3}).axes({2});
  EXPECT_THROW(range.infer(), Error);
  ReduceCase floatAxes("ReduceMin");
  floatAxes.shape(DataType::kFLOAT, {2, 3}).shape(DataType::kFLOAT, {1});
  EXPECT_THROW(floatAxes.infer(), Error);
  ReduceCase boolSum("ReduceSum");
  boolSum.shape(DataType::kBOOL, {2, 3});
  EXPECT_THROW(boolSum.infer(), Error);
  ReduceCase badKeep("ReduceProd");
  badKeep.shape(DataType::kFLOAT, {2, 3}).attr("keepdims", int64_t(5));
  EXPECT_THROW(badKeep.infer(), Error);
  ReduceCase legacyAttr("ReduceMean");
  legacyAttr.shape(DataType::kFLOAT, {2, 3}).attr("axes", std::vector<int64_t>{1});
  EXPECT_THROW(legacyAttr.infer(), Error);
  ReduceCase absurd("ReduceSum");
  absurd.shape(DataType::kFLOAT, {int64_t(1) << 40, int64_t(1) << 40});
  EXPECT_THROW(absurd.infer(), Error);
  ReduceCase noInput("ReduceSum");
  EXPECT_THROW(noInput.infer(), Error);
}

TEST(ReduceNormalize, AxesAttributeBecomesAnInputPerOpset) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {2, 3, 4});
  Attributes a;
  a.set("axes", std::vector<int64_t>{0, 2});
  a.set("keepdims", int64_t(0));
  Layer* mean13 = net.addLayer("ReduceMean", {x}, 1, a);
  OpRegistry::instance().find("ReduceMean")->normalize(net, *mean13, 13);
  ASSERT_EQ(mean13->inputs.size(), 2u);
  ASSERT_TRUE(mean13->inputs[1]->isConstant());
  EXPECT_EQ(mean13->inputs[1]->value.toInts(), (std::vector<int64_t>{0, 2}));
  EXPECT_FALSE(mean13->attrs.has("axes"));
  EXPECT_EQ(mean13->attrs.getInt("keepdims", 1), 0);

  Layer* sum11 = net.addLayer("ReduceSum", {x}, 1, a);
  OpRegistry::instance().find("ReduceSum")->normalize(net, *sum11, 11);
  ASSERT_EQ(sum11->inputs.size(), 2u);
  EXPECT_EQ(sum11->inputs[1]->value.toInts(), (std::vector<int64_t>{0, 2}));

  Layer* noAxes = net.addLayer("ReduceMax", {x}, 1);
  OpRegistry::instance().find("ReduceMax")->normalize(net, *noAxes, 11);
  EXPECT_EQ(noAxes->inputs.size(), 1u);  // reduce over all dims either way

  Tensor* axesIn = net.addConstant("axes", axesTensor({1}));
  Layer* sum13 = net.addLayer("ReduceSum", {x, axesIn}, 1);
  OpRegistry::instance().find("ReduceSum")->normalize(net, *sum13, 13);
  EXPECT_EQ(sum13->inputs[1], axesIn);
}

// ---------------------------------------------------------------------------------------------
// AVX2 ReduceSum / ReduceMean vs reference

// Per output element of ReduceSum/ReduceMean `c` over x: 1e-6 of the sum of the |x| it reduces
// (for the mean: of their mean), plus 1e-7. float32 sums of a few thousand terms stay far below.
std::vector<double> elementTolerances(const ReduceCase& c, const std::string& op, const HostTensor& x) {
  HostTensor ax = x.clone();
  for (int64_t i = 0; i < ax.count(); ++i) ax.as<float>()[i] = std::fabs(ax.as<float>()[i]);
  ReduceCase sumAbs("ReduceSum");
  sumAbs.input(ax).attr("keepdims", c.attrs.getInt("keepdims", 1));
  if (c.data.size() > 1) sumAbs.input(c.data[1], true);
  sumAbs.infer();
  HostTensor s = sumAbs.runRef();
  const double perOutput = s.count() ? double(x.count()) / double(s.count()) : 1.0;
  std::vector<double> tol(static_cast<size_t>(s.count()));
  for (int64_t i = 0; i < s.count(); ++i)
    tol[i] = 1e-6 * s.getDouble(i) / (op == "ReduceMean" ? std::max(1.0, perOutput) : 1.0) + 1e-7;
  return tol;
}

TEST(ReduceTactic, SumAndMeanMatchReference) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  struct Case {
    Dims dims;
    std::vector<int64_t> axes;
    bool noAxesInput;
  };
  const std::vector<Case> cases = {
      {{64, 1000}, {-1}, false}, {{2, 3, 37}, {1, 2}, false},  {{4, 16, 5, 7}, {2, 3}, false},
      {{3, 600, 5}, {1}, false}, {{2, 1100}, {0}, false},       {{5, 6, 7}, {}, true},
      {{3, 0}, {1}, false},      {{1, 1, 9}, {0, 1}, false},    {{16, 2049}, {1}, false}};
  for (const char* op : {"ReduceSum", "ReduceMean"})
    for (int64_t keep : {0, 1})
      for (const auto& k : cases) {
        SCOPED_TRACE(std::string(op) + " " + toString(k.dims) + " keepdims " + std::to_string(keep));
        HostTensor x = makeTensor(DataType::kFLOAT, k.dims, [&](int64_t) { return u(rng); });
        ReduceCase c(op);
        c.input(x).attr("keepdims", keep);
        if (!k.noAxesInput) c.axes(k.axes);
        auto tactic = c.tactic(kiln::test::f32Avx2(c.desc.op));
        ASSERT_TRUE(tactic.has_value());
        HostTensor fast = c.run(*tactic, 3), ref = c.runRef();
        ASSERT_EQ(fast.dims(), ref.dims());
        // Per output element: float32 summation error relative to the sum of the |x| it reduces
        // (a mean's to their mean), so that one element dropped by an AVX2 tail shows.
        const std::vector<double> tol = elementTolerances(c, op, x);
        for (int64_t i = 0; i < ref.count(); ++i) {
          double r = ref.getDouble(i);
          if (std::isnan(r)) EXPECT_TRUE(std::isnan(fast.getDouble(i)));
          else EXPECT_NEAR(fast.getDouble(i), r, tol[i]) << i;
        }
        // The tolerance sees a tail dropped: zeroing the last element of the reduced last axis
        // moves some output past it (a check that this test can fail).
        const bool lastAxisReduced = k.noAxesInput || k.axes.back() == -1 || k.axes.back() == int64_t(k.dims.size()) - 1;
        if (lastAxisReduced && x.count() > 0 && k.dims.back() > 8) {
          HostTensor cut = x.clone();
          for (int64_t j = k.dims.back() - 1; j < cut.count(); j += k.dims.back()) cut.as<float>()[j] = 0.f;
          ReduceCase d(op);
          d.input(cut).attr("keepdims", keep);
          if (!k.noAxesInput) d.axes(k.axes);
          d.infer();
          HostTensor dropped = d.runRef();
          int64_t seen = 0;
          for (int64_t i = 0; i < ref.count(); ++i) seen += std::fabs(dropped.getDouble(i) - ref.getDouble(i)) > tol[i];
          EXPECT_GT(seen, 0) << "a dropped tail element stays within the tolerance";
        }
      }
}

TEST(ReduceTactic, NotOfferedForScatteredOrUnknownAxes) {
  ReduceCase scattered("ReduceSum");
  scattered.shape(DataType::kFLOAT, {2, 3, 4}).axes({0, 2});
  EXPECT_FALSE(scattered.tactic(kiln::test::f32Avx2(scattered.desc.op)).has_value());
  ReduceCase unknown("ReduceMean");
  unknown.shape(DataType::kFLOAT, {2, 3, 4}).shape(DataType::kINT64, {1});
  EXPECT_FALSE(unknown.tactic(kiln::test::f32Avx2(unknown.desc.op)).has_value());
  ReduceCase integer("ReduceSum");
  integer.shape(DataType::kINT32, {2, 3, 4}).axes({2});
  EXPECT_FALSE(integer.tactic(kiln::test::f32Avx2(integer.desc.op)).has_value());
  ReduceCase noop("ReduceSum");
  noop.shape(DataType::kFLOAT, {2, 3, 4}).axes({}).attr("noop_with_empty_axes", int64_t(1));
  EXPECT_FALSE(noop.tactic(kiln::test::f32Avx2(noop.desc.op)).has_value());
  ReduceCase other("ReduceMax");
  other.shape(DataType::kFLOAT, {2, 3, 4}).axes({2});
  EXPECT_FALSE(other.tactic(kiln::test::f32Avx2(other.desc.op)).has_value());
}
