// PointwiseChain steps checked against their ONNX formulas evaluated here in double precision, not
// against kiln's own code: the reference kernel (plain scalar) and every CPU tactic (chunked, AVX2
// activations). Lengths cross the tactic's 2048-element chunks and leave an AVX2 tail of 5.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "op_test_util.h"

namespace kiln {
namespace {

using Formula = std::function<double(double c, double o)>;

struct StepCase {
  std::string op;
  int64_t swapped = 0;    // binary steps: 1 = operand OP chain
  float alpha = 0, beta = 0;
  double lo, hi;          // chain input range
  double olo = 0, ohi = 0;  // operand range (binary steps)
  Formula f;
};

Attributes oneStep(const StepCase& s, bool binary) {
  Attributes a;
  a.set("steps", std::vector<std::string>{s.op});
  a.set("operand", std::vector<int64_t>{binary ? 1 : -1});
  a.set("swapped", std::vector<int64_t>{s.swapped});
  a.set("alpha", std::vector<float>{s.alpha});
  a.set("beta", std::vector<float>{s.beta});
  return a;
}

// Values of the chain input: seeded uniform in [lo, hi) plus the edge cases at the front.
HostTensor chainInput(const StepCase& s, int64_t n, const std::vector<float>& edges) {
  HostTensor x = test::uniformOfType({n}, DataType::kFLOAT, 7, s.lo, s.hi);
  for (size_t i = 0; i < edges.size() && static_cast<int64_t>(i) < n; ++i) x.as<float>()[i] = edges[i];
  return x;
}

void checkStep(const StepCase& s, const std::vector<float>& edges, double rtol) {
  const bool binary = s.op == "Pow";
  auto cpu = getBackend(DeviceType::kCPU, 2);
  for (int64_t n : {int64_t{37}, int64_t{2 * 2048 + 5}}) {
    SCOPED_TRACE(s.op + (s.swapped ? " swapped" : "") + " n=" + std::to_string(n));
    test::OpCase c;
    c.op = "PointwiseChain";
    c.attrs = oneStep(s, binary);
    c.inputs = {chainInput(s, n, edges)};
    if (binary) c.inputs.push_back(test::uniformOfType({n}, DataType::kFLOAT, 11, s.olo, s.ohi));
    HostTensor want(DataType::kFLOAT, {n});
    for (int64_t i = 0; i < n; ++i)
      want.as<float>()[i] = static_cast<float>(s.f(c.inputs[0].as<float>()[i], binary ? c.inputs[1].as<float>()[i] : 0.0));
    test::expectClose(test::runReference(c)[0], want, rtol, 1e-7, "reference");
    std::vector<std::string> tactics = test::tacticNames(*cpu, c);
    ASSERT_FALSE(tactics.empty());
    for (const std::string& t : tactics) test::expectClose(test::runTactic(*cpu, t, c)[0], want, rtol, 1e-7, "cpu tactic " + t);
  }
}

TEST(PointwiseChainSteps, PowBothOrientations) {
  checkStep({"Pow", 0, 0, 0, 0.1, 4.0, -2.5, 3.0, [](double c, double o) { return std::pow(c, o); }}, {1.f, 2.f}, 2e-6);
  checkStep({"Pow", 1, 0, 0, -2.0, 2.5, 0.2, 3.0, [](double c, double o) { return std::pow(o, c); }}, {0.f, -1.f}, 2e-6);
}

TEST(PointwiseChainSteps, FloorAndCeil) {
  const std::vector<float> edges = {-2.5f, -0.5f, -0.f, 0.5f, 1.f, 2.999f, -3.f, 1e7f + 1};
  checkStep({"Floor", 0, 0, 0, -50, 50, 0, 0, [](double c, double) { return std::floor(c); }}, edges, 0);
  checkStep({"Ceil", 0, 0, 0, -50, 50, 0, 0, [](double c, double) { return std::ceil(c); }}, edges, 0);
}

TEST(PointwiseChainSteps, ReciprocalAndLog) {
  checkStep({"Reciprocal", 0, 0, 0, -8, 8, 0, 0, [](double c, double) { return 1.0 / c; }}, {1.f, -4.f, 0.25f, 3.f}, 1e-7);
  checkStep({"Log", 0, 0, 0, 1e-3, 100, 0, 0, [](double c, double) { return std::log(c); }}, {1.f, 2.7182817f, 1e-6f}, 2e-6);
}

TEST(PointwiseChainSteps, HardSigmoidAndClip) {
  // max(0, min(1, alpha x + beta)); both saturations and the linear part are hit.
  auto hardSigmoid = [](double c, double) { return std::max(0.0, std::min(1.0, 0.2 * c + 0.5)); };
  checkStep({"HardSigmoid", 0, 0.2f, 0.5f, -6, 6, 0, 0, hardSigmoid}, {-2.5f, 2.5f, 0.f, -10.f, 10.f}, 1e-6);
  auto clip = [](double c, double) { return std::max(-0.8, std::min(0.9, c)); };
  checkStep({"Clip", 0, -0.8f, 0.9f, -2, 2, 0, 0, clip}, {-0.8f, 0.9f, -0.81f, 0.91f}, 0);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Broadcast operands read in runs (a per-channel scale filled over each plane, an [H, W] operand
// copied per channel, runs cut by the 2048-element chunks and shorter than them) give what NumPy's
// broadcasting gives, computed here element by element: BatchNorm + ReLU chains as DenseNet has them.
TEST(PointwiseChainSteps, BroadcastOperandsReadInRuns) {
  auto cpu = getBackend(DeviceType::kCPU, 2);
  const Dims x{2, 6, 17, 23};  // planes of 391: runs cross the chunk edges
  for (const Dims& od : {Dims{6, 1, 1}, Dims{1, 6, 1, 1}, Dims{17, 23}, Dims{2, 1, 17, 23}, Dims{6, 17, 1}, Dims{1}}) {
    SCOPED_TRACE(toString(od));
    test::OpCase c;
    c.op = "PointwiseChain";
    Attributes a;
    a.set("steps", std::vector<std::string>{"Mul", "Relu"});
    a.set("operand", std::vector<int64_t>{1, -1});
    a.set("swapped", std::vector<int64_t>{0, 0});
    a.set("alpha", std::vector<float>{0.f, 0.f});
    a.set("beta", std::vector<float>{0.f, 0.f});
    c.attrs = a;
    c.inputs = {test::uniformOfType(x, DataType::kFLOAT, 3, -2.f, 2.f), test::uniformOfType(od, DataType::kFLOAT, 4, -1.f, 1.f)};
    HostTensor want(DataType::kFLOAT, x);
    const Dims o4 = [&] { Dims d(4 - od.size(), 1); d.insert(d.end(), od.begin(), od.end()); return d; }();
    for (int64_t n = 0; n < x[0]; ++n)
      for (int64_t ch = 0; ch < x[1]; ++ch)
        for (int64_t h = 0; h < x[2]; ++h)
          for (int64_t w = 0; w < x[3]; ++w) {
            const int64_t i = ((n * x[1] + ch) * x[2] + h) * x[3] + w;
            const int64_t j = (((o4[0] > 1 ? n : 0) * o4[1] + (o4[1] > 1 ? ch : 0)) * o4[2] + (o4[2] > 1 ? h : 0)) * o4[3] + (o4[3] > 1 ? w : 0);
            want.as<float>()[i] = std::max(0.f, c.inputs[0].as<float>()[i] * c.inputs[1].as<float>()[j]);
          }
    test::expectClose(test::runReference(c)[0], want, 0, 0, "reference");
    for (const std::string& t : test::tacticNames(*cpu, c)) test::expectClose(test::runTactic(*cpu, t, c)[0], want, 0, 0, "cpu tactic " + t);
  }
}

// The per-channel operands of a blocked (nChw8c) chain: [1, C/8, 1, 1, 8] over [N, C/8, H, W, 8]
// repeats 8 values over every pixel (written by doubling copies), plus the other broadcast shapes
// of rank 5; against an element-by-element NumPy-rule reference.
TEST(PointwiseChainSteps, RepeatedRunsOfBlockedOperands) {
  auto cpu = getBackend(DeviceType::kCPU, 2);
  const Dims x{2, 3, 7, 13, 8};  // 2,184 elements per image: runs and repeats cross the 2,048-element chunks
  for (const Dims& od : {Dims{1, 3, 1, 1, 8}, Dims{3, 1, 1, 8}, Dims{2, 3, 1, 1, 8}, Dims{1, 1, 7, 13, 1}, Dims{3, 7, 1, 8},
                         Dims{2, 1, 7, 1, 8}, Dims{8}}) {
    SCOPED_TRACE(toString(od));
    test::OpCase c;
    c.op = "PointwiseChain";
    Attributes a;
    a.set("steps", std::vector<std::string>{"Mul", "Add", "Relu"});
    a.set("operand", std::vector<int64_t>{1, 2, -1});
    a.set("swapped", std::vector<int64_t>{0, 0, 0});
    a.set("alpha", std::vector<float>{0.f, 0.f, 0.f});
    a.set("beta", std::vector<float>{0.f, 0.f, 0.f});
    c.attrs = a;
    c.inputs = {test::uniformOfType(x, DataType::kFLOAT, 5, -2.f, 2.f), test::uniformOfType(od, DataType::kFLOAT, 6, -1.f, 1.f),
                test::uniformOfType(od, DataType::kFLOAT, 7, -1.f, 1.f)};
    Dims o5(5 - od.size(), 1);
    o5.insert(o5.end(), od.begin(), od.end());
    HostTensor want(DataType::kFLOAT, x);
    int64_t i = 0;
    for (int64_t a0 = 0; a0 < x[0]; ++a0)
      for (int64_t a1 = 0; a1 < x[1]; ++a1)
        for (int64_t a2 = 0; a2 < x[2]; ++a2)
          for (int64_t a3 = 0; a3 < x[3]; ++a3)
            for (int64_t a4 = 0; a4 < x[4]; ++a4, ++i) {
              const int64_t at[5] = {a0, a1, a2, a3, a4};
              int64_t j = 0;
              for (int d = 0; d < 5; ++d) j = j * o5[d] + (o5[d] > 1 ? at[d] : 0);
              const float v = c.inputs[0].as<float>()[i] * c.inputs[1].as<float>()[j] + c.inputs[2].as<float>()[j];
              want.as<float>()[i] = std::max(0.f, v);
            }
    // 1 ulp: the compiler may fuse this reference's x * s + b into one FMA, the kernels round x * s first.
    test::expectClose(test::runReference(c)[0], want, 1e-6, 1e-6, "reference");
    for (const std::string& t : test::tacticNames(*cpu, c)) test::expectClose(test::runTactic(*cpu, t, c)[0], want, 1e-6, 1e-6, "cpu tactic " + t);
  }
}

}  // namespace
}  // namespace kiln
