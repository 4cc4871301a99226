// Timing cache: round trip, damaged files refused, and a rebuild that reuses every timing and
// chooses the same tactics.
#include <gtest/gtest.h>

#include <mutex>

#include "kiln/kiln.h"
#include "reference_eval.h"

using namespace kiln;

namespace {

std::unique_ptr<Network> convNet() {
  auto net = std::make_unique<Network>();
  Tensor* x = net->addInput("x", DataType::kFLOAT, {1, 8, 16, 16});
  Layer* c = net->addConvolution(x, test::randomTensor({16, 8, 3, 3}, 1), test::randomTensor({16}, 2), {1, 1}, {1, 1, 1, 1});
  Layer* r = net->addActivation(c->outputs[0], "Relu");
  Layer* mm = net->addMatMul(r->outputs[0], net->addConstant("w", test::randomTensor({16, 24}, 3)));
  net->markOutput(mm->outputs[0]);
  return net;
}

std::vector<std::string> tacticsOf(const Engine& e) {
  std::vector<std::string> v;
  std::string info = e.getLayerInformation();
  for (size_t p = info.find("\"tactic\":\""); p != std::string::npos; p = info.find("\"tactic\":\"", p + 1))
    v.push_back(info.substr(p + 10, info.find('"', p + 10) - p - 10));
  return v;
}

}  // namespace

TEST(TimingCache, RoundTripAndDamage) {
  TimingCache c;
  c.insert("dev", "sig", "tacticA", 1.5f);
  c.insert("dev", "sig", "tacticB", 0.25f);
  std::vector<uint8_t> bytes = c.serialize();
  TimingCache d = TimingCache::deserialize(bytes.data(), bytes.size());
  EXPECT_EQ(d.size(), 2u);
  EXPECT_FLOAT_EQ(d.find("dev", "sig", "tacticB"), 0.25f);
  EXPECT_LT(d.find("other", "sig", "tacticB"), 0.f);
  EXPECT_EQ(d.hits(), 1u);
  EXPECT_EQ(d.misses(), 1u);
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(TimingCache::deserialize(bytes.data(), n), Error) << "truncated to " << n;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::vector<uint8_t> bad = bytes;
    bad[i] ^= 0x5A;
    EXPECT_THROW(TimingCache::deserialize(bad.data(), bad.size()), Error) << "byte " << i;
  }
}

TEST(TimingCache, RebuildReusesEveryTimingAndChoosesTheSameTactics) {
  TimingCache cache;
  BuilderConfig cfg;
  cfg.setDevice(DeviceType::kCPU);
  cfg.setThreads(1);
  cfg.setTimingCache(&cache);
  auto n1 = convNet();
  auto e1 = Builder().build(*n1, cfg);
  size_t timed = cache.size();
  ASSERT_GT(timed, 0u);  // conv and matmul have several CPU tactics
  EXPECT_EQ(cache.hits(), 0u);
  std::vector<uint8_t> bytes = cache.serialize();
  TimingCache reloaded = TimingCache::deserialize(bytes.data(), bytes.size());
  cfg.setTimingCache(&reloaded);
  auto n2 = convNet();
  auto e2 = Builder().build(*n2, cfg);
  EXPECT_EQ(reloaded.misses(), 0u);
  EXPECT_EQ(reloaded.hits(), timed);
  EXPECT_EQ(tacticsOf(*e1), tacticsOf(*e2));
}

namespace {

//! Counts the conv layers' tactic timings: measured, and taken from a timing cache.
struct TimingLogger : ILogger {
  std::mutex m;
  int measured = 0, cached = 0;
  void log(Severity, const std::string& msg) noexcept override {
    if (msg.rfind("layer 'conv", 0) != 0 || msg.find(" tactic ") == std::string::npos || msg.find(" ms") == std::string::npos) return;
    std::lock_guard<std::mutex> lock(m);
    (msg.find("(timing cache)") != std::string::npos ? cached : measured)++;
  }
};

}  // namespace

// Without a user's timing cache the builder keeps one for the build (as TensorRT does): a layer
// identical to an earlier one (op, attributes, types, dims, constness) takes its timings instead
// of running every tactic again.
TEST(TimingCache, IdenticalLayersAreTimedOnceWithoutAUserCache) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {1, 8, 12, 12});
  Layer* c1 = net.addConvolution(x, test::randomTensor({8, 8, 3, 3}, 4), test::randomTensor({8}, 5), {1, 1}, {1, 1, 1, 1});
  c1->name = "conv_a";
  Layer* c2 = net.addConvolution(c1->outputs[0], test::randomTensor({8, 8, 3, 3}, 6), test::randomTensor({8}, 7), {1, 1}, {1, 1, 1, 1});
  c2->name = "conv_b";
  net.markOutput(c2->outputs[0]);
  BuilderConfig cfg;
  cfg.setDevice(DeviceType::kCPU);
  cfg.setThreads(1);
  TimingLogger log;
  Builder(log).build(net, cfg);
  ASSERT_GT(log.measured, 1) << "the first conv's tactics are timed";
  EXPECT_EQ(log.cached, log.measured) << "the second conv takes every timing of the first";
}
