// End-to-end tests of the public API: a network built by hand (no ONNX), built, run, serialized,
// reloaded, run from two threads; damaged plans rejected with kiln::Error.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>

#include "kiln/kiln.h"
#include "op_test_util.h"
#include "reference_eval.h"
#include "runtime/engine_graph.h"

using namespace kiln;

namespace {

using kiln::test::randomTensor;

// x[1,3,8,8] -> Conv(4, 3x3, pad 1) -> Relu -> Add(conv2 of x) -> GlobalAveragePool -> Flatten
// -> MatMul(W[4,5]) -> Softmax. The expected output is computed by running every layer with its
// naive reference kernel, independently of the builder's fusions and tactics.
std::unique_ptr<Network> makeNetwork(const std::vector<HostTensor>& w) {
  auto net = std::make_unique<Network>();
  Tensor* x = net->addInput("x", DataType::kFLOAT, {1, 3, 8, 8});
  Layer* c1 = net->addConvolution(x, w[0], w[1], {1, 1}, {1, 1, 1, 1});
  Layer* r = net->addActivation(c1->outputs[0], "Relu");
  Layer* c2 = net->addConvolution(x, w[2], w[3], {1, 1}, {1, 1, 1, 1});
  Layer* add = net->addElementWise(r->outputs[0], c2->outputs[0], "Add");
  Layer* gap = net->addLayer("GlobalAveragePool", {add->outputs[0]}, 1);
  Attributes fa;
  fa.set("axis", int64_t(1));
  Layer* flat = net->addLayer("Flatten", {gap->outputs[0]}, 1, fa);
  Layer* mm = net->addMatMul(flat->outputs[0], net->addConstant("w_fc", w[4]));
  Layer* sm = net->addSoftmax(mm->outputs[0], -1);
  net->renameTensor(sm->outputs[0], "prob");
  net->markOutput(sm->outputs[0]);
  return net;
}

std::vector<HostTensor> weights() {
  return {randomTensor({4, 3, 3, 3}, 1), randomTensor({4}, 2), randomTensor({4, 3, 3, 3}, 3), randomTensor({4}, 4),
          randomTensor({4, 5}, 5)};
}

// The unoptimized network evaluated layer by layer with reference kernels.
HostTensor referenceOutput(const HostTensor& input) {
  auto net = makeNetwork(weights());
  return kiln::test::evaluateReference(*net, {{"x", input}}).at("prob");
}

std::vector<float> run(ExecutionContext& ctx, const HostTensor& input) {
  std::vector<float> out(5, std::nanf(""));  // poisoned: an output never written fails
  ctx.setTensorAddress("x", const_cast<void*>(input.data()));
  ctx.setTensorAddress("prob", out.data());
  ctx.enqueue();
  return out;
}

void expectNear(const std::vector<float>& a, const HostTensor& ref) {
  ASSERT_EQ(static_cast<int64_t>(a.size()), ref.count());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], ref.as<float>()[i], 1e-5f) << i;
}

std::unique_ptr<Engine> buildEngine(int threads = 2) {
  auto net = makeNetwork(weights());
  BuilderConfig cfg;
  cfg.setThreads(threads);
  Builder b;
  return b.build(*net, cfg);
}

}  // namespace

TEST(Runtime, HandBuiltNetworkMatchesReference) {
  auto engine = buildEngine();
  HostTensor in = randomTensor({1, 3, 8, 8}, 42);
  auto ctx = engine->createExecutionContext();
  expectNear(run(*ctx, in), referenceOutput(in));
  // Fusions happened: BN-free network, but Relu fused into the first conv and Add into a conv.
  EXPECT_LT(engine->getNbLayers(), 8);
}

TEST(Runtime, PlanRoundTripGivesSameOutputs) {
  auto engine = buildEngine();
  auto plan = engine->serialize();
  auto loaded = Engine::deserialize(plan.data(), plan.size());
  HostTensor in = randomTensor({1, 3, 8, 8}, 7);
  auto a = run(*engine->createExecutionContext(), in);
  auto b = run(*loaded->createExecutionContext(), in);
  EXPECT_EQ(a, b);
  EXPECT_EQ(loaded->getLayerInformation(), engine->getLayerInformation());
}

TEST(Runtime, TwoThreadsTwoContextsOneEngine) {
  auto engine = buildEngine();
  HostTensor in1 = randomTensor({1, 3, 8, 8}, 11), in2 = randomTensor({1, 3, 8, 8}, 12);
  HostTensor r1 = referenceOutput(in1), r2 = referenceOutput(in2);
  // Every one of the 50 runs per thread is checked (a race may spoil any of them, not the last).
  struct Result {
    int bad = 0, firstBad = -1;
    std::vector<float> firstBadOutput;
  } res1, res2;
  auto worker = [&](const HostTensor& in, const HostTensor& want, Result& res) {
    auto ctx = engine->createExecutionContext();
    for (int i = 0; i < 50; ++i) {
      std::vector<float> out = run(*ctx, in);
      bool ok = static_cast<int64_t>(out.size()) == want.count();
      for (size_t k = 0; ok && k < out.size(); ++k) ok = std::fabs(out[k] - want.as<float>()[k]) <= 1e-5f;
      if (!ok && res.bad++ == 0) {
        res.firstBad = i;
        res.firstBadOutput = out;
      }
    }
  };
  std::thread t1(worker, std::cref(in1), std::cref(r1), std::ref(res1)), t2(worker, std::cref(in2), std::cref(r2), std::ref(res2));
  t1.join();
  t2.join();
  for (const Result* r : {&res1, &res2}) {
    EXPECT_EQ(r->bad, 0) << "wrong runs, the first at iteration " << r->firstBad;
    if (r->bad) expectNear(r->firstBadOutput, r == &res1 ? r1 : r2);
  }
}

// oneDNN's primitive cache keys a primitive by the calling thread's OpenMP max-threads when the
// primitive is made, not by the thread count its primitive_desc was made for. A conv kernel's
// create-time primitive_desc (made on the building thread, here at 2 threads) turned into a
// primitive on a thread at another count (a fresh std::thread has the process default, e.g. 16
// on a 16-core machine) could get the cached primitive of that count, whose per-thread im2col
// scratchpad is larger than the workspace the context sized from the create-time
// primitive_desc: its threads wrote past the workspace (heap corruption; the two-thread test
// above aborted with std::bad_alloc on a 16-core machine). Contexts at one thread count must
// size their workspace alike, and the run (under ASan too) must stay in bounds and be right.
TEST(Runtime, OneDnnConvWorkspaceFitsThePrimitiveWhateverTheOpenMpThreadCount) {
  auto setOmp = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  auto getOmp = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  if (!setOmp || !getOmp) GTEST_SKIP() << "no OpenMP runtime in the process";
  const int saved = getOmp();
  // A shape no other test uses (the primitive cache is process-wide); batch 3: oneDNN's gemm
  // convolution books one im2col buffer per thread, up to the batch.
  const HostTensor w = randomTensor({4, 3, 3, 3}, 31), b = randomTensor({4}, 32);
  auto makeNet = [&] {
    auto net = std::make_unique<Network>();
    Tensor* x = net->addInput("x", DataType::kFLOAT, {3, 3, 7, 7});
    Layer* c = net->addConvolution(x, w, b, {1, 1}, {1, 1, 1, 1});
    net->renameTensor(c->outputs[0], "y");
    net->markOutput(c->outputs[0]);
    return net;
  };
  auto build = [&] {
    BuilderConfig cfg;
    cfg.setThreads(2);
    cfg.setDisabledTactics({"conv_f32_onednn_blocked", "conv_f32_im2col_gemm"});  // the plain oneDNN tactic
    Builder builder;
    return builder.build(*makeNet(), cfg);
  };
  setOmp(16);
  auto engineA = build();
  auto ctxA = engineA->createExecutionContext();
  const size_t wsA = ctxA->getMemoryUsage().workspaceBytes;  // primitive made at 16 threads, cached
  setOmp(2);
  auto engineB = build();  // its kernel's create-time primitive_desc is made at 2 threads
  setOmp(16);
  auto ctxB = engineB->createExecutionContext();
  EXPECT_EQ(ctxB->getMemoryUsage().workspaceBytes, wsA);
  HostTensor in = randomTensor({3, 3, 7, 7}, 33), out(DataType::kFLOAT, {3, 4, 7, 7});
  ctxB->setTensorAddress("x", in.data());
  ctxB->setTensorAddress("y", out.data());
  ctxB->enqueue();
  setOmp(saved);
  kiln::test::expectClose(out, kiln::test::evaluateReference(*makeNet(), {{"x", in}}).at("y"), 1e-4, 1e-5, "conv");
}

TEST(Runtime, TruncatedPlansAreRejected) {
  auto plan = buildEngine()->serialize();
  for (size_t n = 0; n < plan.size(); n += std::max<size_t>(1, plan.size() / 97))
    EXPECT_THROW(Engine::deserialize(plan.data(), n), Error) << "length " << n;
}

TEST(Runtime, CorruptedPlansAreRejected) {
  auto plan = buildEngine()->serialize();
  std::mt19937 rng(3);
  for (int i = 0; i < 300; ++i) {
    auto bad = plan;
    size_t pos = rng() % bad.size();
    bad[pos] ^= static_cast<uint8_t>(1 + rng() % 255);
    EXPECT_THROW(Engine::deserialize(bad.data(), bad.size()), Error) << "byte " << pos;
  }
}

TEST(Runtime, StructurallyCorruptPayloadNeverCrashes) {
  // Bypass the checksum so that the parser's bounds checks themselves are exercised.
  auto plan = buildEngine()->serialize();
  std::mt19937 rng(5);
  int rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    auto bad = plan;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) bad[rng() % bad.size()] = static_cast<uint8_t>(rng());
    try {
      deserializePlan(bad.data(), bad.size(), /*verifyChecksum=*/false);
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST(Runtime, WrongVersionAndForeignFilesAreRejected) {
  auto plan = buildEngine()->serialize();
  auto v = plan;
  v[8] = 99;  // format version
  try {
    Engine::deserialize(v.data(), v.size());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("version"), std::string::npos) << e.what();
  }
  std::string junk = "this is not a plan file at all";
  EXPECT_THROW(Engine::deserialize(junk.data(), junk.size()), Error);
}

namespace {

// y = Relu(x[-1, 4] @ w[4, 3]) with w = randomTensor({4, 3}, 9).
std::unique_ptr<Network> dynamicMlp() {
  auto net = std::make_unique<Network>();
  Tensor* x = net->addInput("x", DataType::kFLOAT, {-1, 4});
  Layer* mm = net->addMatMul(x, net->addConstant("w", randomTensor({4, 3}, 9)));
  Layer* r = net->addActivation(mm->outputs[0], "Relu");
  net->renameTensor(r->outputs[0], "y");
  net->markOutput(r->outputs[0]);
  return net;
}

// Runs dynamicMlp's engine at `batch` and checks y against a double-precision reference.
void runDynamicMlp(ExecutionContext& ctx, int64_t batch) {
  HostTensor w = randomTensor({4, 3}, 9);
  HostTensor in = randomTensor({batch, 4}, static_cast<uint32_t>(batch));
  std::vector<float> out(static_cast<size_t>(batch * 3));
  ctx.setInputShape("x", {batch, 4});
  EXPECT_EQ(ctx.getTensorShape("y"), (Dims{batch, 3}));
  ctx.setTensorAddress("x", in.data());
  ctx.setTensorAddress("y", out.data());
  ctx.enqueue();
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < 4; ++k) acc += double(in.as<float>()[i * 4 + k]) * w.as<float>()[k * 3 + j];
      EXPECT_NEAR(out[static_cast<size_t>(i * 3 + j)], std::max(acc, 0.0), 1e-5) << "batch " << batch;
    }
}

}  // namespace

TEST(Runtime, DynamicBatchWithProfile) {
  auto net = dynamicMlp();
  BuilderConfig cfg;
  cfg.addOptimizationProfile(kiln::test::profileFor("x", {1, 4}, {4, 4}, {8, 4}));
  auto engine = Builder().build(*net, cfg);
  auto ctx = engine->createExecutionContext();
  for (int64_t batch : {1, 5, 8}) runDynamicMlp(*ctx, batch);
  ctx->setInputShape("x", {9, 4});
  EXPECT_THROW(ctx->enqueue(), Error);  // outside the profile
}

// A server alternates request shapes: each shape's plan (memory plan, kernel states, graph) is
// kept (up to 8) and taken again when the shape returns. More distinct shapes than the cache
// holds, revisited in an order that evicts and restores, must always give the right outputs.
TEST(Runtime, AlternatingShapesReuseCachedPlans) {
  auto net = dynamicMlp();
  BuilderConfig cfg;
  cfg.addOptimizationProfile(kiln::test::profileFor("x", {1, 4}, {4, 4}, {16, 4}));
  auto engine = Builder().build(*net, cfg);
  auto ctx = engine->createExecutionContext();
  runDynamicMlp(*ctx, 16);  // the largest arena first: later shapes keep it, and their plans stay cached
  for (int64_t batch : {3, 1, 3, 16, 1, 2, 4, 5, 6, 7, 8, 9, 10, 3, 1, 10, 2, 16, 3}) runDynamicMlp(*ctx, batch);
}

// The same with host-computed values in the arena (positions = Range(0, S) read by a Gather on
// the device, as BERT's position ids): a restored plan writes them again, since other shapes'
// runs reused that memory.
TEST(Runtime, CachedPlansRewriteHostComputedValues) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {2, -1, 4});
  HostTensor table = randomTensor({16, 4}, 21);
  Layer* shape = net.addLayer("Shape", {x}, 1);
  HostTensor one(DataType::kINT64, {}), zero(DataType::kINT64, {});
  one.as<int64_t>()[0] = 1;
  zero.as<int64_t>()[0] = 0;
  Attributes ga;
  ga.set("axis", int64_t(0));
  Layer* seq = net.addLayer("Gather", {shape->outputs[0], net.addConstant("one", one)}, 1, ga);
  Layer* range = net.addLayer("Range", {net.addConstant("zero", zero), seq->outputs[0], net.addConstant("step", one)}, 1);
  Layer* pos = net.addLayer("Gather", {net.addConstant("table", table), range->outputs[0]}, 1, ga);
  Layer* add = net.addElementWise(x, pos->outputs[0], "Add");
  net.renameTensor(add->outputs[0], "y");
  net.markOutput(add->outputs[0]);
  BuilderConfig cfg;
  cfg.addOptimizationProfile(kiln::test::profileFor("x", {2, 1, 4}, {2, 8, 4}, {2, 16, 4}));
  auto engine = Builder().build(net, cfg);
  auto ctx = engine->createExecutionContext();
  for (int64_t s : {16, 3, 7, 3, 16, 7, 1, 3}) {
    HostTensor in = randomTensor({2, s, 4}, static_cast<uint32_t>(100 + s));
    std::vector<float> out(static_cast<size_t>(2 * s * 4), std::nanf(""));
    ctx->setInputShape("x", {2, s, 4});
    ctx->setTensorAddress("x", in.data());
    ctx->setTensorAddress("y", out.data());
    ctx->enqueue();
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t i = 0; i < s; ++i)
        for (int64_t k = 0; k < 4; ++k) {
          const size_t at = static_cast<size_t>((b * s + i) * 4 + k);
          EXPECT_FLOAT_EQ(out[at], in.as<float>()[at] + table.as<float>()[i * 4 + k]) << "S " << s;
        }
  }
}

// Two optimization profiles (e.g. decode and prefill sizes): each is timed at its own opt shape,
// survives the plan, and a context runs whichever it selects, checking shapes against it alone.
TEST(Runtime, MultipleOptimizationProfiles) {
  auto net = dynamicMlp();
  BuilderConfig cfg;
  cfg.addOptimizationProfile(kiln::test::profileFor("x", {1, 4}, {4, 4}, {8, 4}));
  cfg.addOptimizationProfile(kiln::test::profileFor("x", {16, 4}, {32, 4}, {64, 4}));
  auto built = Builder().build(*net, cfg);
  auto plan = built->serialize();
  auto engine = Engine::deserialize(plan.data(), plan.size());
  ASSERT_EQ(engine->getNbOptimizationProfiles(), 2);
  EXPECT_EQ(engine->getProfileShape("x", 1, OptProfileSelector::kMAX), (Dims{64, 4}));
  EXPECT_EQ(engine->getProfileShape("x", OptProfileSelector::kOPT), (Dims{4, 4}));
  EXPECT_THROW(engine->getProfileShape("x", 2, OptProfileSelector::kMIN), Error);
  const std::string info = engine->getLayerInformation();
  EXPECT_NE(info.find("\"optimizationProfiles\":2"), std::string::npos) << info;
  EXPECT_NE(info.find("\"profiles\":[{"), std::string::npos) << info;

  auto ctx = engine->createExecutionContext();
  EXPECT_EQ(ctx->getOptimizationProfile(), 0);
  ctx->setInputShape("x", {20, 4});
  EXPECT_THROW(ctx->enqueue(), Error);  // outside profile 0
  ctx->setOptimizationProfile(1);
  EXPECT_EQ(ctx->getOptimizationProfile(), 1);
  runDynamicMlp(*ctx, 20);
  runDynamicMlp(*ctx, 64);
  ctx->setInputShape("x", {5, 4});
  EXPECT_THROW(ctx->enqueue(), Error);  // outside profile 1
  ctx->setOptimizationProfile(0);
  runDynamicMlp(*ctx, 5);
  EXPECT_THROW(ctx->setOptimizationProfile(2), Error);
  EXPECT_THROW(ctx->setOptimizationProfile(-1), Error);
  EXPECT_EQ(ctx->getOptimizationProfile(), 0);

  // A dynamic input missing from one profile is an error that names the profile.
  BuilderConfig partial;
  partial.addOptimizationProfile(cfg.profiles()[0]);
  partial.addOptimizationProfile(OptimizationProfile{});
  try {
    Builder().build(*net, partial);
    FAIL() << "a profile without the dynamic input was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("optimization profile 1"), std::string::npos) << e.what();
  }
}

namespace {

void dynamicConv(Network& net) { kiln::test::dynamicConvNetwork(net, 21); }

// dynamicConv built with profiles for batch 1-4 and 8-16, as a plan.
std::vector<uint8_t> twoProfileConvPlan() {
  Network net;
  dynamicConv(net);
  BuilderConfig cfg;
  cfg.addOptimizationProfile(kiln::test::profileFor("x", {1, 3, 8, 8}, {2, 3, 8, 8}, {4, 3, 8, 8}));
  cfg.addOptimizationProfile(kiln::test::profileFor("x", {8, 3, 8, 8}, {16, 3, 8, 8}, {16, 3, 8, 8}));
  return Builder().build(net, cfg)->serialize();
}

}  // namespace

// Profiles whose tactics differ get kernels of their own: one context switching between them
// (new kernel states each time) and two contexts on two threads agree with the reference.
TEST(Runtime, ProfilesWithDifferentTacticsSwitchCleanly) {
  auto plan = twoProfileConvPlan();
  // Force two different conv tactics, whatever the timing chose.
  EngineGraph g = deserializePlan(plan.data(), plan.size());
  auto cpu = getBackend(DeviceType::kCPU, 0);
  int forced = 0;
  for (size_t i = 0; i < g.layers.size(); ++i) {
    std::vector<Tactic> tactics = cpu->tactics(buildTimeDesc(g, i));
    if (g.layers[i].op != "Conv" || tactics.size() < 2) continue;
    g.layers[i].choices[0].tactic = tactics[0].name;
    g.layers[i].choices[1].tactic = tactics[1].name;
    ++forced;
  }
#ifdef KILN_TEST_WITHOUT_ONEDNN
  if (forced == 0) GTEST_SKIP() << "built without oneDNN: the CPU backend has one conv tactic here";
#endif
  ASSERT_EQ(forced, 1);
  plan = serializePlan(g);
  auto engine = Engine::deserialize(plan.data(), plan.size());
  auto check = [&](ExecutionContext& ctx, int profile, int64_t batch) {
    HostTensor in = randomTensor({batch, 3, 8, 8}, static_cast<uint32_t>(100 + batch));
    HostTensor out(DataType::kFLOAT, {batch, 4, 8, 8});
    ctx.setOptimizationProfile(profile);
    ctx.setInputShape("x", in.dims());
    ctx.setTensorAddress("x", in.data());
    ctx.setTensorAddress("y", out.data());
    ctx.enqueue();
    Network ref;
    dynamicConv(ref);
    kiln::test::expectClose(out, kiln::test::evaluateReference(ref, {{"x", in}}).at("y"), 1e-4, 1e-5,
                            "profile " + std::to_string(profile) + " batch " + std::to_string(batch));
  };
  auto ctx = engine->createExecutionContext();
  for (int round = 0; round < 3; ++round) {
    check(*ctx, 0, 1 + round);
    check(*ctx, 1, 8 + 4 * round);
  }
  auto worker = [&](int profile) {
    auto c = engine->createExecutionContext();
    for (int i = 0; i < 5; ++i) check(*c, profile, profile == 0 ? 3 : 12);
  };
  std::thread t0(worker, 0), t1(worker, 1);
  t0.join();
  t1.join();
}

// A plan whose profile leaves a dynamic input out, or changes a static dimension, is refused on
// load (a builder never writes one).
TEST(Runtime, PlanProfilesAreValidatedOnLoad) {
  auto plan = twoProfileConvPlan();
  auto refused = [](EngineGraph g, const std::string& expect) {
    auto bytes = serializePlan(g);
    try {
      Engine::deserialize(bytes.data(), bytes.size());
      ADD_FAILURE() << "accepted a plan that should fail with: " << expect;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  };
  const EngineGraph g = deserializePlan(plan.data(), plan.size());
  EngineGraph missing = g;
  missing.profiles[1].clear();
  refused(missing, "profile 1 has no range for dynamic input 'x'");
  EngineGraph changed = g;
  for (auto& [t, r] : changed.profiles[1]) r.min[1] = r.opt[1] = r.max[1] = 5;
  refused(changed, "profile 1 changes static dimension 1");
  // And the shape error names the profile and the way out.
  auto engine = Engine::deserialize(plan.data(), plan.size());
  auto ctx = engine->createExecutionContext();
  ctx->setInputShape("x", {12, 3, 8, 8});
  try {
    ctx->getTensorShape("y");
    ADD_FAILURE() << "batch 12 accepted in profile 0";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the optimization profile 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("setOptimizationProfile"), std::string::npos) << e.what();
  }
}

// Expand's target shape is an input: getTensorShape follows its current values, as enqueue does,
// so that a caller sizing the output from it gets a buffer that fits.
TEST(Runtime, OutputShapeFollowsShapeInputValues) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {1, 3});
  Tensor* shape = net.addInput("shape", DataType::kINT64, {2});
  Layer* expand = net.addLayer("Expand", {x, shape}, 1);
  net.renameTensor(expand->outputs[0], "y");
  net.markOutput(expand->outputs[0]);
  auto engine = Builder().build(net, BuilderConfig{});
  auto ctx = engine->createExecutionContext();
  float in[3] = {1.f, 2.f, 3.f};
  int64_t target[2] = {2, 3};
  ctx->setTensorAddress("x", in);
  ctx->setTensorAddress("shape", target);
  EXPECT_EQ(ctx->getTensorShape("y"), (Dims{2, 3}));
  for (int64_t rows : {5, 1, 4}) {
    target[0] = rows;  // same address, new value
    ASSERT_EQ(ctx->getTensorShape("y"), (Dims{rows, 3}));
    std::vector<float> out(static_cast<size_t>(rows * 3), -1.f);
    ctx->setTensorAddress("y", out.data());
    ctx->enqueue();
    for (int64_t i = 0; i < rows * 3; ++i) EXPECT_EQ(out[static_cast<size_t>(i)], in[i % 3]);
  }
}

TEST(Runtime, DynamicInputWithoutProfileIsAnError) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {-1, 4});
  net.markOutput(net.addActivation(x, "Relu")->outputs[0]);
  Builder b;
  EXPECT_THROW(b.build(net, BuilderConfig{}), Error);
}

TEST(Runtime, CycleIsAnError) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {2});
  Layer* a = net.addElementWise(x, x, "Add");
  Layer* c = net.addElementWise(a->outputs[0], x, "Mul");
  a->inputs[1] = c->outputs[0];  // a depends on c, c on a
  net.markOutput(c->outputs[0]);
  EXPECT_THROW(net.topoSort(), Error);
}

TEST(Runtime, Float16NetworkOnCpuRoundTripsThroughAPlan) {
  // float16 layers compute in float32 on the CPU through Cast layers; a cast of a constant folds
  // away and the plan must still load.
  Network net;
  Tensor* x = net.addInput("x", DataType::kHALF, {2, 3});
  HostTensor c(DataType::kHALF, {3});
  for (int i = 0; i < 3; ++i) c.as<uint16_t>()[i] = floatToHalf(0.25f * static_cast<float>(i + 1));
  Layer* add = net.addElementWise(x, net.addConstant("c", c), "Add");
  Layer* relu = net.addActivation(add->outputs[0], "Relu");
  net.renameTensor(relu->outputs[0], "y");
  net.markOutput(relu->outputs[0]);
  auto engine = Builder().build(net, BuilderConfig{});
  auto plan = engine->serialize();
  auto loaded = Engine::deserialize(plan.data(), plan.size());
  std::vector<uint16_t> in(6), out(6);
  for (int i = 0; i < 6; ++i) in[i] = floatToHalf(static_cast<float>(i) - 3.f);
  auto ctx = loaded->createExecutionContext();
  ctx->setTensorAddress("x", in.data());
  ctx->setTensorAddress("y", out.data());
  ctx->enqueue();
  EXPECT_EQ(loaded->getTensorDataType("y"), DataType::kHALF);
  for (int i = 0; i < 6; ++i) {
    float expect = std::max(0.f, halfToFloat(in[i]) + 0.25f * static_cast<float>(i % 3 + 1));
    EXPECT_EQ(out[i], floatToHalf(expect)) << i;
  }
}

// Shared weights (ALBERT's export: one initializer behind several Identity nodes) fold to constants
// that share one buffer, and the plan stores that buffer once; the reloaded engine computes the
// same outputs, which match the reference evaluation of the unfolded network.
TEST(Runtime, SharedWeightsAreStoredOnceInThePlan) {
  constexpr int64_t kN = 128;
  const HostTensor w = randomTensor({kN, kN}, 31, -0.1f, 0.1f);
  auto make = [&w] {
    auto net = std::make_unique<Network>();
    Tensor* x = net->addInput("x", DataType::kFLOAT, {1, kN});
    Tensor* shared = net->addConstant("w_shared", w);
    Tensor* h = net->addActivation(net->addMatMul(x, net->addLayer("Identity", {shared}, 1)->outputs[0])->outputs[0], "Relu")->outputs[0];
    Tensor* y = net->addMatMul(h, net->addLayer("Identity", {shared}, 1)->outputs[0])->outputs[0];
    net->renameTensor(y, "y");
    net->markOutput(y);
    return net;
  };
  const HostTensor in = randomTensor({1, kN}, 32);
  auto refNet = make();
  const HostTensor want = kiln::test::evaluateReference(*refNet, {{"x", in}}).at("y");
  auto net = make();
  BuilderConfig cfg;
  cfg.setThreads(1);
  auto engine = Builder().build(*net, cfg);
  auto plan = engine->serialize();
  const size_t weightBytes = static_cast<size_t>(w.bytes());
  EXPECT_LT(plan.size(), weightBytes + weightBytes / 2) << "the shared weights are stored more than once";
  // The shared-buffer reference is bounds-checked like everything else (checksum bypassed).
  std::mt19937 rng(9);
  for (int i = 0; i < 500; ++i) {
    auto bad = plan;
    // The metadata lies before and after the one stored buffer: mutate the first and last 4 KiB.
    for (int k = 0; k < 1 + static_cast<int>(rng() % 3); ++k) {
      const size_t off = rng() % 4096;
      bad[rng() % 2 ? off : bad.size() - 1 - off] = static_cast<uint8_t>(rng());
    }
    try {
      deserializePlan(bad.data(), bad.size(), /*verifyChecksum=*/false);
    } catch (const Error&) {
    }
  }
  auto loaded = Engine::deserialize(plan.data(), plan.size());
  for (Engine* e : {engine.get(), loaded.get()}) {
    auto ctx = e->createExecutionContext();
    std::vector<float> out(kN, -1.f);
    ctx->setTensorAddress("x", const_cast<void*>(in.data()));
    ctx->setTensorAddress("y", out.data());
    ctx->enqueue();
    for (int64_t i = 0; i < kN; ++i) EXPECT_NEAR(out[static_cast<size_t>(i)], want.as<float>()[i], 1e-4f) << i;
  }
}

// Two user-managed contexts share one arena, run one after the other (TensorRT's kUSER_MANAGED +
// setDeviceMemory): each still gives the reference output, alternating; too little memory or none
// is an error, not a wrong result.
TEST(Runtime, UserManagedContextsShareOneArena) {
  auto engine = buildEngine();
  const size_t need = engine->getDeviceMemorySizeForProfile(0);
  EXPECT_GE(need, engine->getDeviceMemorySize());
  ASSERT_GT(need, 0u);
  HostTensor in1 = randomTensor({1, 3, 8, 8}, 21), in2 = randomTensor({1, 3, 8, 8}, 22);
  HostTensor r1 = referenceOutput(in1), r2 = referenceOutput(in2);
  auto a = engine->createExecutionContext(ExecutionContextAllocationStrategy::kUSER_MANAGED);
  auto b = engine->createExecutionContext(ExecutionContextAllocationStrategy::kUSER_MANAGED);
  EXPECT_THROW(run(*a, in1), Error);  // no memory yet
  std::vector<uint8_t> shared(need + 256);
  void* mem = shared.data() + (256 - reinterpret_cast<uintptr_t>(shared.data()) % 256) % 256;
  EXPECT_THROW(a->setDeviceMemory(static_cast<char*>(mem) + 1, need), Error);  // misaligned
  a->setDeviceMemory(mem, need);
  b->setDeviceMemory(mem, need);
  EXPECT_EQ(a->getMemoryUsage().arenaBytes, need);
  for (int i = 0; i < 3; ++i) {
    expectNear(run(*a, in1), r1);
    expectNear(run(*b, in2), r2);
  }
  a->setDeviceMemory(mem, need - 64);
  EXPECT_THROW(run(*a, in1), Error);
  auto s = engine->createExecutionContext();
  EXPECT_THROW(s->setDeviceMemory(mem, need), Error);  // a static context owns its arena
}
