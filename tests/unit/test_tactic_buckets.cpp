// Tactics per size bucket inside one dynamic profile (issue 23): the builder times tactics at the
// profile's min/opt/max shapes, a layer whose best tactic differs gets size buckets, and a context
// runs each set of shapes with its bucket's kernel (chosen when it plans the shapes).
#include <gtest/gtest.h>

#include <cstdint>
#include <mutex>
#include <regex>

#include "builder/tactic_timing.h"
#include "kiln/kiln.h"
#include "op_test_util.h"
#include "reference_eval.h"
#include "runtime/engine_graph.h"

using namespace kiln;
using kiln::test::randomTensor;

namespace {

void dynamicConv(Network& net) { kiln::test::dynamicConvNetwork(net, 31); }

std::vector<uint8_t> dynamicConvPlan(int points, ILogger& logger) {
  Network net;
  dynamicConv(net);
  BuilderConfig cfg;
  cfg.setThreads(1);
  cfg.setTacticShapePoints(points);
  cfg.addOptimizationProfile(kiln::test::profileFor("x", {1, 3, 8, 8}, {4, 3, 8, 8}, {16, 3, 8, 8}));
  return Builder(logger).build(net, cfg)->serialize();
}

struct CountingLogger : ILogger {
  std::mutex m;
  int timings = 0;  // "layer '...' tactic NAME: T ms" lines of the conv layer
  void log(Severity, const std::string& msg) noexcept override {
    static const std::regex timed("^layer '[^']*Conv[^']*' tactic [a-z0-9_]+: [0-9.]+ ms$");
    std::lock_guard<std::mutex> lock(m);
    if (std::regex_match(msg, timed)) ++timings;
  }
};

struct QuietLogger : ILogger {
  void log(Severity, const std::string&) noexcept override {}
};

// The conv layer's index in a plan's graph.
size_t convLayer(const EngineGraph& g) {
  for (size_t i = 0; i < g.layers.size(); ++i)
    if (g.layers[i].op == "Conv") return i;
  ADD_FAILURE() << "no Conv layer";
  return 0;
}

}  // namespace

TEST(TacticBuckets, PointsBecomeSizeRanges) {
  // One tactic everywhere: no buckets.
  EXPECT_TRUE(tacticBucketsFromPoints({{100, "a", 1.f}, {10, "a", .1f}, {1000, "a", 9.f}}).empty());
  // The small shapes want another tactic: it serves sizes up to halfway (geometrically) to the next point.
  auto b = tacticBucketsFromPoints({{100, "a", 1.f}, {10, "b", .1f}, {1000, "a", 9.f}});
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].tactic, "b");
  EXPECT_EQ(b[0].maxSize, 31);  // floor(sqrt(10 * 100))
  EXPECT_EQ(b[1].tactic, "a");
  EXPECT_EQ(b[1].maxSize, INT64_MAX);
  // Alternating tactics keep three ranges; the opt point (first) wins a tie of sizes.
  b = tacticBucketsFromPoints({{100, "b", 1.f}, {10, "a", .1f}, {1000, "a", 9.f}, {100, "c", 1.f}});
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].tactic, "a");
  EXPECT_EQ(b[1].tactic, "b");
  EXPECT_EQ(b[1].maxSize, 316);  // floor(sqrt(100 * 1000))
  EXPECT_EQ(b[2].tactic, "a");
  EXPECT_EQ(b[2].maxSize, INT64_MAX);
  EXPECT_TRUE(tacticBucketsFromPoints({{5, "a", 1.f}}).empty());
}

// The builder times the conv's tactics at 1, 3 or 5 shapes of the profile, as asked.
TEST(TacticBuckets, BuilderTimesTheProfilesShapes) {
  int timings[3] = {};
  const int points[3] = {1, 3, 5};
  for (int k = 0; k < 3; ++k) {
    CountingLogger log;
    dynamicConvPlan(points[k], log);
    timings[k] = log.timings;
  }
#ifdef KILN_TEST_WITHOUT_ONEDNN
  if (timings[0] == 0) GTEST_SKIP() << "built without oneDNN: the CPU backend has one conv tactic here";
#endif
  ASSERT_GT(timings[0], 0) << "the conv's tactics were not timed";
  EXPECT_EQ(timings[1], 3 * timings[0]);
  EXPECT_EQ(timings[2], 5 * timings[0]);
}

// A context runs each shape with its bucket's kernel (outputs against the reference, the tactic
// reported by getLayerCosts), switching back and forth; the buckets survive the plan file.
TEST(TacticBuckets, ContextRunsEachShapeWithItsBucketsKernel) {
  QuietLogger quiet;
  auto plan = dynamicConvPlan(1, quiet);
  EngineGraph g = deserializePlan(plan.data(), plan.size());
  const size_t conv = convLayer(g);
  auto cpu = getBackend(DeviceType::kCPU, 1);
  std::vector<Tactic> tactics = cpu->tactics(buildTimeDesc(g, conv));
  if (tactics.size() < 2) GTEST_SKIP() << "the CPU backend has one conv tactic in this build";
  // Sizes: (3 + 4) * 64 elements per batch item = 448 * batch. Batches 1-2 -> tactics[1].
  TacticChoice& c = g.layers[conv].choices[0];
  c.tactic = tactics[0].name;
  c.buckets = {{1000, tactics[1].name, 0.1f}, {INT64_MAX, tactics[0].name, 1.f}};
  plan = serializePlan(g);
  const EngineGraph back = deserializePlan(plan.data(), plan.size());
  ASSERT_EQ(back.layers[conv].choices[0].buckets.size(), 2u);
  EXPECT_EQ(back.layers[conv].choices[0].buckets[0].maxSize, 1000);
  EXPECT_EQ(back.layers[conv].choices[0].buckets[0].tactic, tactics[1].name);

  auto engine = Engine::deserialize(plan.data(), plan.size(), quiet);
  EXPECT_NE(engine->getLayerInformation().find("\"tacticBuckets\":[{\"maxSize\":1000,\"tactic\":\"" + tactics[1].name),
            std::string::npos)
      << engine->getLayerInformation();
  auto ctx = engine->createExecutionContext();
  for (int64_t batch : {1, 8, 2, 16, 1, 3}) {
    HostTensor in = randomTensor({batch, 3, 8, 8}, static_cast<uint32_t>(200 + batch));
    HostTensor out(DataType::kFLOAT, {batch, 4, 8, 8});
    ctx->setInputShape("x", in.dims());
    ctx->setTensorAddress("x", in.data());
    ctx->setTensorAddress("y", out.data());
    ctx->enqueue();
    Network ref;
    dynamicConv(ref);
    kiln::test::expectClose(out, kiln::test::evaluateReference(ref, {{"x", in}}).at("y"), 1e-4, 1e-5,
                            "batch " + std::to_string(batch));
    std::string ran;
    for (const LayerCost& lc : ctx->getLayerCosts())
      if (lc.op == "Conv") ran = lc.tactic;
    EXPECT_EQ(ran, batch <= 2 ? tactics[1].name : tactics[0].name) << "batch " << batch;
  }
}

// Buckets a builder never writes are refused on load with a message naming the layer.
TEST(TacticBuckets, MalformedBucketsAreRefused) {
  QuietLogger quiet;
  const auto plan = dynamicConvPlan(1, quiet);
  const EngineGraph g = deserializePlan(plan.data(), plan.size());
  const size_t conv = convLayer(g);
  const std::string t = g.layers[conv].choices[0].tactic;
  auto refused = [&](std::vector<TacticBucket> buckets, const std::string& expect) {
    EngineGraph bad = g;
    bad.layers[conv].choices[0].buckets = std::move(buckets);
    auto bytes = serializePlan(bad);
    try {
      Engine::deserialize(bytes.data(), bytes.size(), quiet);
      ADD_FAILURE() << "accepted buckets that should fail with: " << expect;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  };
  refused({{INT64_MAX, t, 1.f}}, "a single tactic bucket");
  refused({{500, t, 1.f}, {100, t, 1.f}, {INT64_MAX, t, 1.f}}, "do not ascend");
  refused({{500, t, 1.f}, {900, t, 1.f}}, "do not cover every size");
  refused({{-5, t, 1.f}, {INT64_MAX, t, 1.f}}, "do not ascend");
  refused({{500, "", 1.f}, {INT64_MAX, t, 1.f}}, "empty tactic name");
  refused({{500, "conv_f32_no_such_kernel", 1.f}, {INT64_MAX, t, 1.f}}, "tactic 'conv_f32_no_such_kernel' is not available");
}
