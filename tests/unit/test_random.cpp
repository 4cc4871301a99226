// RandomUniform(Like), RandomNormal(Like), Bernoulli (ops/random.cpp): the values' statistics
// (mean, spread, range, frequency) over 200,000 draws against the distributions' definitions, the
// same values in every run with a seed and new ones without, never folded at build time, and
// (CudaRandom, skipped without a GPU) the GPU's values equal to the CPU's for one seed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kiln/device.h"
#include "kiln/kiln.h"
#include "op_test_util.h"

using namespace kiln;

namespace {

constexpr int64_t kN = 200000;

struct RandomCase {
  std::string op;
  Attributes attrs;
  bool withInput = false;  // *Like and Bernoulli: an input of kN elements (Bernoulli: p = 0.3)
};

// Runs one layer of the case `runs` times on `type`; returns each run's output as float.
std::vector<std::vector<float>> run(const RandomCase& c, DeviceType type, int runs = 1) {
  Network net;
  std::vector<Tensor*> in;
  if (c.withInput) in.push_back(net.addInput("p", DataType::kFLOAT, {kN}));
  Layer* l = net.addLayer(c.op, in, 1, c.attrs, "random");
  net.renameTensor(l->outputs[0], "y");
  net.markOutput(l->outputs[0]);
  BuilderConfig cfg;
  cfg.setDevice(type);
  std::unique_ptr<Engine> e = Builder().build(net, cfg);
  Device dev(type);
  auto ctx = e->createExecutionContext();
  std::vector<float> p(kN, 0.3f);
  void* dp = dev.allocate(kN * 4);
  void* dy = dev.allocate(kN * 4);
  dev.copyToDevice(dp, p.data(), kN * 4, nullptr);
  if (c.withInput) ctx->setTensorAddress("p", dp);
  ctx->setTensorAddress("y", dy);
  std::vector<std::vector<float>> out;
  for (int r = 0; r < runs; ++r) {
    void* s = dev.createStream();
    ctx->enqueue(s);
    dev.synchronize(s);
    dev.destroyStream(s);
    out.emplace_back(kN);
    dev.copyToHost(out.back().data(), dy, kN * 4, nullptr);
  }
  dev.release(dp);
  dev.release(dy);
  return out;
}

RandomCase uniformCase(bool like, bool seeded) {
  RandomCase c{like ? "RandomUniformLike" : "RandomUniform", {}, like};
  c.attrs.set("low", -2.f);
  c.attrs.set("high", 3.f);
  if (!like) c.attrs.set("shape", std::vector<int64_t>{kN});
  if (seeded) c.attrs.set("seed", 7.f);
  return c;
}

RandomCase normalCase(bool like, bool seeded) {
  RandomCase c{like ? "RandomNormalLike" : "RandomNormal", {}, like};
  c.attrs.set("mean", 1.5f);
  c.attrs.set("scale", 0.5f);
  if (!like) c.attrs.set("shape", std::vector<int64_t>{kN});
  if (seeded) c.attrs.set("seed", 7.f);
  return c;
}

RandomCase bernoulliCase(bool seeded) {
  RandomCase c{"Bernoulli", {}, true};
  if (seeded) c.attrs.set("seed", 3.f);
  return c;
}

void moments(const std::vector<float>& v, double& mean, double& sd) {
  double s = 0, q = 0;
  for (float x : v) s += x;
  mean = s / v.size();
  for (float x : v) q += (x - mean) * (x - mean);
  sd = std::sqrt(q / v.size());
}

}  // namespace

// Uniform on [-2, 3): mean 0.5, sd 5/sqrt(12) = 1.443; standard errors ~0.003 at 200,000 draws.
TEST(Random, UniformHasItsRangeAndMoments) {
  for (bool like : {false, true}) {
    const std::vector<float> v = run(uniformCase(like, true), DeviceType::kCPU)[0];
    double mean, sd;
    moments(v, mean, sd);
    EXPECT_NEAR(mean, 0.5, 0.02) << like;
    EXPECT_NEAR(sd, 5.0 / std::sqrt(12.0), 0.02) << like;
    for (float x : v) ASSERT_TRUE(x >= -2.f && x < 3.f) << x;
    int low = 0;  // a fifth of the range, a fifth of the draws
    for (float x : v) low += x < -1.f;
    EXPECT_NEAR(low / double(kN), 0.2, 0.01);
  }
}

TEST(Random, NormalHasItsMoments) {
  for (bool like : {false, true}) {
    const std::vector<float> v = run(normalCase(like, true), DeviceType::kCPU)[0];
    double mean, sd;
    moments(v, mean, sd);
    EXPECT_NEAR(mean, 1.5, 0.01) << like;
    EXPECT_NEAR(sd, 0.5, 0.01) << like;
    int within = 0;  // 68.27% within one sd
    for (float x : v) within += std::fabs(x - 1.5f) < 0.5f;
    EXPECT_NEAR(within / double(kN), 0.6827, 0.01);
    for (float x : v) ASSERT_TRUE(std::isfinite(x));
  }
}

TEST(Random, BernoulliFrequencyIsP) {
  const std::vector<float> v = run(bernoulliCase(true), DeviceType::kCPU)[0];
  int ones = 0;
  for (float x : v) {
    ASSERT_TRUE(x == 0.f || x == 1.f) << x;
    ones += x == 1.f;
  }
  EXPECT_NEAR(ones / double(kN), 0.3, 0.01);
}

TEST(Random, SeededRunsRepeatUnseededRunsDiffer) {
  for (const RandomCase& c : {uniformCase(false, true), normalCase(true, true), bernoulliCase(true)}) {
    const auto runs = run(c, DeviceType::kCPU, 2);
    EXPECT_EQ(runs[0], runs[1]) << c.op;
  }
  for (const RandomCase& c : {uniformCase(false, false), normalCase(true, false), bernoulliCase(false)}) {
    const auto runs = run(c, DeviceType::kCPU, 2);  // not folded at build time either
    EXPECT_NE(runs[0], runs[1]) << c.op;
  }
}

TEST(CudaRandom, GpuDrawsTheCpuValuesForOneSeed) {
  KILN_REQUIRE_GPU();
  for (const RandomCase& c : {uniformCase(false, true), uniformCase(true, true), normalCase(false, true), normalCase(true, true),
                              bernoulliCase(true)}) {
    const std::vector<float> cpu = run(c, DeviceType::kCPU)[0], gpu = run(c, DeviceType::kGPU)[0];
    for (int64_t i = 0; i < kN; ++i) ASSERT_NEAR(gpu[i], cpu[i], 1e-4f * (1.f + std::fabs(cpu[i]))) << c.op << " " << i;
  }
  const auto runs = run(uniformCase(false, false), DeviceType::kGPU, 2);
  EXPECT_NE(runs[0], runs[1]);
}
