// The GPU runtime: engines built for the GPU agree with the CPU engine; aux streams, CUDA graphs,
// reduced precision and two contexts on two streams. Skips where no GPU exists.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "op_test_util.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::randomTensor;

namespace {

// x -> three parallel MatMul+Relu branches (like Q/K/V projections) -> Add -> Add -> Softmax.
void makeBranchy(Network& n, int64_t batch = 4) {
  Tensor* x = n.addInput("x", DataType::kFLOAT, {batch, 64});
  std::vector<Tensor*> br;
  for (int b = 0; b < 3; ++b) {
    Layer* mm = n.addMatMul(x, n.addConstant("w" + std::to_string(b), randomTensor({64, 64}, 10 + b, -0.2f, 0.2f)));
    br.push_back(n.addActivation(mm->outputs[0], "Relu")->outputs[0]);
  }
  Layer* a1 = n.addElementWise(br[0], br[1], "Add");
  Layer* a2 = n.addElementWise(a1->outputs[0], br[2], "Add");
  Layer* sm = n.addSoftmax(a2->outputs[0], -1);
  n.renameTensor(sm->outputs[0], "y");
  n.markOutput(sm->outputs[0]);
}

struct DeviceBuffers {
  void* x = nullptr;
  void* y = nullptr;
  DeviceBuffers(const HostTensor& in, size_t outBytes) {
    cudaMalloc(&x, in.bytes());
    cudaMalloc(&y, outBytes);
    cudaMemcpy(x, in.data(), in.bytes(), cudaMemcpyHostToDevice);
  }
  ~DeviceBuffers() {
    cudaFree(x);
    cudaFree(y);
  }
};

std::unique_ptr<Engine> buildGpu(int maxAux, bool fp16 = false) {
  Network net;
  makeBranchy(net);
  BuilderConfig cfg;
  cfg.setDevice(DeviceType::kGPU);
  cfg.setMaxAuxStreams(maxAux);
  if (fp16) cfg.setFlag(BuilderFlag::kFP16);
  return Builder().build(net, cfg);
}

HostTensor reference(const HostTensor& in) {
  Network net;
  makeBranchy(net, in.dims()[0]);
  return kiln::test::evaluateReference(net, {{"x", in}}).at("y");
}

//! One run of `ctx` on `s` (an enqueue, or a captured graph's replay) with input "x" = `in` and
//! output "y" of `outDims` (float32), the output filled with NaNs first so that unwritten values
//! cannot pass.
HostTensor runGpu(ExecutionContext& ctx, const HostTensor& in, cudaStream_t s, bool graph = false, const Dims& outDims = {4, 64}) {
  HostTensor out(DataType::kFLOAT, outDims);
  DeviceBuffers buf(in, out.bytes());
  ctx.setTensorAddress("x", buf.x);
  ctx.setTensorAddress("y", buf.y);
  if (graph) EXPECT_TRUE(ctx.captureGraph(s));
  cudaMemsetAsync(buf.y, 0xff, out.bytes(), s);
  if (graph) ctx.launchGraph(s);
  else ctx.enqueue(s);
  cudaMemcpyAsync(out.data(), buf.y, out.bytes(), cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  return out;
}

}  // namespace

TEST(CudaRuntime, AuxStreamsAreUsedAndResultsMatch) {
  KILN_REQUIRE_GPU();
  auto withAux = buildGpu(2);
  auto without = buildGpu(0);
  EXPECT_GT(withAux->getNbAuxStreams(), 0);
  EXPECT_LE(withAux->getNbAuxStreams(), 2);
  EXPECT_EQ(without->getNbAuxStreams(), 0);
  HostTensor in = randomTensor({4, 64}, 3);
  HostTensor ref = reference(in);
  cudaStream_t s;
  cudaStreamCreate(&s);
  auto c1 = withAux->createExecutionContext();
  auto c2 = without->createExecutionContext();
  kiln::test::expectClose(runGpu(*c1, in, s), ref, 2e-2, 1e-4, "aux streams");
  kiln::test::expectClose(runGpu(*c2, in, s), ref, 2e-2, 1e-4, "no aux streams");
  // Plans keep the stream assignment.
  auto plan = withAux->serialize();
  auto loaded = Engine::deserialize(plan.data(), plan.size());
  EXPECT_EQ(loaded->getNbAuxStreams(), withAux->getNbAuxStreams());
  cudaStreamDestroy(s);
}

TEST(CudaRuntime, CudaGraphReplayMatchesEnqueue) {
  KILN_REQUIRE_GPU();
  auto engine = buildGpu(2);
  HostTensor in = randomTensor({4, 64}, 4);
  cudaStream_t s;
  cudaStreamCreate(&s);
  auto ctx = engine->createExecutionContext();
  HostTensor a = runGpu(*ctx, in, s, false);
  HostTensor b = runGpu(*ctx, in, s, true);
  kiln::test::expectClose(b, a, 0, 0, "graph vs enqueue");
  cudaStreamDestroy(s);
}

TEST(CudaRuntime, Fp16EngineIsCloseToFp32Reference) {
  KILN_REQUIRE_GPU();
  auto engine = buildGpu(0, true);
  EXPECT_NE(engine->getLayerInformation().find("float16"), std::string::npos);
  HostTensor in = randomTensor({4, 64}, 5);
  cudaStream_t s;
  cudaStreamCreate(&s);
  auto ctx = engine->createExecutionContext();
  kiln::test::expectClose(runGpu(*ctx, in, s), reference(in), 2e-2, 2e-3, "fp16");
  cudaStreamDestroy(s);
}

TEST(CudaRuntime, TwoContextsOnTwoStreamsFromTwoThreads) {
  KILN_REQUIRE_GPU();
  auto engine = buildGpu(1);
  HostTensor in1 = randomTensor({4, 64}, 6), in2 = randomTensor({4, 64}, 7);
  HostTensor r1 = reference(in1), r2 = reference(in2);
  auto worker = [&](const HostTensor& in, const HostTensor& ref) {
    cudaStream_t s;
    cudaStreamCreate(&s);
    auto ctx = engine->createExecutionContext();
    for (int i = 0; i < 20; ++i) kiln::test::expectClose(runGpu(*ctx, in, s), ref, 2e-2, 1e-4, "thread");
    cudaStreamDestroy(s);
  };
  std::thread t1(worker, std::cref(in1), std::cref(r1)), t2(worker, std::cref(in2), std::cref(r2));
  t1.join();
  t2.join();
}

// Two optimization profiles (batch 1-8 and 16-64) in one GPU engine: a context switches between
// them, re-plans once, and a CUDA graph captured under one profile is not replayed under the other.
TEST(CudaRuntime, MultipleProfilesWithGraphs) {
  KILN_REQUIRE_GPU();
  Network net;
  makeBranchy(net, -1);
  BuilderConfig cfg;
  cfg.setDevice(DeviceType::kGPU);
  cfg.addOptimizationProfile(kiln::test::profileFor("x", {1, 64}, {4, 64}, {8, 64}));
  cfg.addOptimizationProfile(kiln::test::profileFor("x", {16, 64}, {32, 64}, {64, 64}));
  auto built = Builder().build(net, cfg);
  auto plan = built->serialize();
  auto engine = Engine::deserialize(plan.data(), plan.size());
  ASSERT_EQ(engine->getNbOptimizationProfiles(), 2);
  cudaStream_t s;
  cudaStreamCreate(&s);
  auto ctx = engine->createExecutionContext();
  for (int round = 0; round < 2; ++round)
    for (int profile : {0, 1}) {
      const int64_t batch = profile == 0 ? 4 + round : 32 + 16 * round;
      ctx->setOptimizationProfile(profile);
      ctx->setInputShape("x", {batch, 64});
      HostTensor in = randomTensor({batch, 64}, static_cast<uint32_t>(40 + batch));
      const std::string what = "profile " + std::to_string(profile) + " batch " + std::to_string(batch);
      kiln::test::expectClose(runGpu(*ctx, in, s, false, {batch, 64}), reference(in), 2e-2, 1e-4, what + " enqueue");
      kiln::test::expectClose(runGpu(*ctx, in, s, true, {batch, 64}), reference(in), 2e-2, 1e-4, what + " graph");
    }
  // A graph captured under profile 0, then a switch to profile 1 with no new capture: launchGraph
  // must not replay the stale graph (it runs a plain enqueue of profile 1's kernels).
  HostTensor big = randomTensor({48, 64}, 77);
  HostTensor small(DataType::kFLOAT, {4, 64});
  std::memcpy(small.data(), big.data(), small.bytes());
  HostTensor out(DataType::kFLOAT, {48, 64});
  DeviceBuffers buf(big, out.bytes());
  auto run = [&](int profile, const HostTensor& in, bool capture) {
    ctx->setOptimizationProfile(profile);
    ctx->setInputShape("x", in.dims());
    ctx->setTensorAddress("x", buf.x);
    ctx->setTensorAddress("y", buf.y);
    if (capture) EXPECT_TRUE(ctx->captureGraph(s));
    cudaMemsetAsync(buf.y, 0xff, out.bytes(), s);
    ctx->launchGraph(s);
    HostTensor got(DataType::kFLOAT, {in.dims()[0], 64});
    cudaMemcpyAsync(got.data(), buf.y, got.bytes(), cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    kiln::test::expectClose(got, reference(in), 2e-2, 1e-4, "stale graph, profile " + std::to_string(profile));
  };
  run(0, small, true);
  run(1, big, false);
  run(0, small, false);
  ctx->setOptimizationProfile(0);
  ctx->setInputShape("x", {32, 64});
  EXPECT_THROW(ctx->enqueue(s), Error);  // outside profile 0
  cudaStreamDestroy(s);
}

// Dynamic batching keeps graph replay: graphs captured at two batch sizes stay with their
// shapes' plans, so alternating between the shapes replays each one's own graph (new input
// values in the same buffers each time) and a third, never captured shape runs a plain enqueue.
TEST(CudaRuntime, GraphsAreKeptPerShape) {
  KILN_REQUIRE_GPU();
  Network net;
  makeBranchy(net, -1);
  BuilderConfig cfg;
  cfg.setDevice(DeviceType::kGPU);
  cfg.addOptimizationProfile(kiln::test::profileFor("x", {1, 64}, {4, 64}, {8, 64}));
  auto engine = Builder().build(net, cfg);
  cudaStream_t s;
  cudaStreamCreate(&s);
  auto ctx = engine->createExecutionContext();
  HostTensor out(DataType::kFLOAT, {8, 64});
  DeviceBuffers buf(randomTensor({8, 64}, 5), out.bytes());
  auto run = [&](int64_t batch, bool capture, uint32_t seed) {
    HostTensor in = randomTensor({batch, 64}, seed);
    ctx->setInputShape("x", {batch, 64});
    ctx->setTensorAddress("x", buf.x);
    ctx->setTensorAddress("y", buf.y);
    cudaMemcpyAsync(buf.x, in.data(), in.bytes(), cudaMemcpyHostToDevice, s);
    if (capture) EXPECT_TRUE(ctx->captureGraph(s));
    cudaMemsetAsync(buf.y, 0xff, out.bytes(), s);
    ctx->launchGraph(s);
    HostTensor got(DataType::kFLOAT, {batch, 64});
    cudaMemcpyAsync(got.data(), buf.y, got.bytes(), cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    kiln::test::expectClose(got, reference(in), 2e-2, 1e-4, "batch " + std::to_string(batch) + " seed " + std::to_string(seed));
  };
  run(8, true, 1);  // the largest arena first
  run(2, true, 2);
  run(6, true, 3);
  for (uint32_t round = 0; round < 3; ++round) {
    run(2, false, 10 + round);
    run(8, false, 20 + round);
    run(6, false, 30 + round);
    run(5, false, 40 + round);  // never captured
  }
  cudaStreamDestroy(s);
}

namespace {

// x[8,16,16,16] -> Conv 3x3 (32) + Relu -> MaxPool 2x2 -> Conv 3x3 (32) + residual Add + Relu ->
// GlobalAveragePool -> Flatten -> MatMul: at batch 8 in FP16 the GPU layout pass keeps the conv
// chain channels-last.
void makeConvChain(Network& n) {
  Tensor* x = n.addInput("x", DataType::kFLOAT, {8, 16, 16, 16});
  Layer* c1 = n.addConvolution(x, randomTensor({32, 16, 3, 3}, 30, -0.15f, 0.15f), randomTensor({32}, 31), {1, 1}, {1, 1, 1, 1});
  Layer* r1 = n.addActivation(c1->outputs[0], "Relu");
  Attributes mp;
  mp.set("kernel_shape", std::vector<int64_t>{2, 2});
  mp.set("strides", std::vector<int64_t>{2, 2});
  Layer* pool = n.addLayer("MaxPool", {r1->outputs[0]}, 1, mp);
  Layer* c2 = n.addConvolution(pool->outputs[0], randomTensor({32, 32, 3, 3}, 32, -0.1f, 0.1f), randomTensor({32}, 33), {1, 1},
                               {1, 1, 1, 1});
  Layer* add = n.addElementWise(c2->outputs[0], pool->outputs[0], "Add");
  Layer* r2 = n.addActivation(add->outputs[0], "Relu");
  Layer* gap = n.addLayer("GlobalAveragePool", {r2->outputs[0]}, 1);
  Attributes fa;
  fa.set("axis", int64_t(1));
  Layer* flat = n.addLayer("Flatten", {gap->outputs[0]}, 1, fa);
  Layer* mm = n.addMatMul(flat->outputs[0], n.addConstant("fc", randomTensor({32, 10}, 34)));
  n.renameTensor(mm->outputs[0], "y");
  n.markOutput(mm->outputs[0]);
}

}  // namespace

TEST(CudaRuntime, Fp16ConvChainRunsChannelsLast) {
  KILN_REQUIRE_GPU();
  Network net;
  makeConvChain(net);
  BuilderConfig cfg;
  cfg.setDevice(DeviceType::kGPU);
  cfg.setFlag(BuilderFlag::kFP16);
  auto engine = Builder().build(net, cfg);
  const std::string info = engine->getLayerInformation();
  // conv1 -> pool -> conv2 -> GlobalAveragePool exchange nhwc; the cast input and [N, C, 1, 1] stay NCHW.
  EXPECT_NE(info.find("\"layouts\":{\"in\":\"nhwc\",\"out\":\"nhwc\"}"), std::string::npos) << info;
  HostTensor in = randomTensor({8, 16, 16, 16}, 35);
  Network ref;
  makeConvChain(ref);
  HostTensor want = kiln::test::evaluateReference(ref, {{"x", in}}).at("y");
  cudaStream_t s;
  cudaStreamCreate(&s);
  auto ctx = engine->createExecutionContext();
  HostTensor out = runGpu(*ctx, in, s, false, {8, 10});
  cudaStreamDestroy(s);
  kiln::test::expectClose(out, want, 3e-2, 3e-2, "fp16 conv chain, channels-last");
}

namespace {

using kiln::test::addPermute;
using kiln::test::addReshape;

Layer* layerNormLast(Network& n, Tensor* x, int64_t c, uint32_t seed) {
  Attributes a;
  a.set("axis", int64_t(-1));
  return n.addLayer("LayerNormalization",
                    {x, n.addConstant("", randomTensor({c}, seed, 0.5f, 1.5f)), n.addConstant("", randomTensor({c}, seed + 1))}, 1, a);
}

// A ConvNeXt block (dwconv 7x7 -> permute to channels last -> LayerNorm -> MLP -> permute back ->
// residual) then a SegFormer token view (Reshape [N, C, H*W] -> Transpose -> LayerNorm -> back),
// then a 1x1 conv, GAP and a classifier: in FP16 at batch 8 the permutes are byte copies between
// channels-last convs (gpu_layout.cpp, ops/layout_transpose.h).
void makeConvNextTokens(Network& n) {
  Tensor* x = n.addInput("x", DataType::kFLOAT, {8, 16, 8, 8});
  Layer* stem = n.addConvolution(x, randomTensor({32, 16, 3, 3}, 40, -0.15f, 0.15f), randomTensor({32}, 41), {1, 1}, {1, 1, 1, 1});
  Layer* dw = n.addConvolution(stem->outputs[0], randomTensor({32, 1, 7, 7}, 42, -0.2f, 0.2f), randomTensor({32}, 43), {1, 1},
                               {3, 3, 3, 3}, 32);
  Layer* last = addPermute(n, dw->outputs[0], {0, 2, 3, 1});
  Layer* ln = layerNormLast(n, last->outputs[0], 32, 44);
  Layer* up = n.addMatMul(ln->outputs[0], n.addConstant("", randomTensor({32, 64}, 46, -0.2f, 0.2f)));
  Layer* act = n.addActivation(up->outputs[0], "Relu");
  Layer* down = n.addMatMul(act->outputs[0], n.addConstant("", randomTensor({64, 32}, 47, -0.2f, 0.2f)));
  Layer* first = addPermute(n, down->outputs[0], {0, 3, 1, 2});
  Layer* res = n.addElementWise(first->outputs[0], stem->outputs[0], "Add");
  Layer* pw = n.addConvolution(res->outputs[0], randomTensor({32, 32, 1, 1}, 48, -0.2f, 0.2f), randomTensor({32}, 49), {1, 1},
                               {0, 0, 0, 0});
  Layer* flat = addReshape(n, pw->outputs[0], {8, 32, 64});
  Layer* tokens = addPermute(n, flat->outputs[0], {0, 2, 1});
  Layer* ln2 = layerNormLast(n, tokens->outputs[0], 32, 50);
  Layer* untok = addPermute(n, ln2->outputs[0], {0, 2, 1});
  Layer* unflat = addReshape(n, untok->outputs[0], {8, 32, 8, 8});
  Layer* head = n.addConvolution(unflat->outputs[0], randomTensor({16, 32, 1, 1}, 51, -0.2f, 0.2f), randomTensor({16}, 52), {1, 1},
                                 {0, 0, 0, 0});
  Layer* gap = n.addLayer("GlobalAveragePool", {head->outputs[0]}, 1);
  Attributes fa;
  fa.set("axis", int64_t(1));
  Layer* f = n.addLayer("Flatten", {gap->outputs[0]}, 1, fa);
  Layer* mm = n.addMatMul(f->outputs[0], n.addConstant("fc", randomTensor({16, 10}, 53)));
  n.renameTensor(mm->outputs[0], "y");
  n.markOutput(mm->outputs[0]);
}

}  // namespace

TEST(CudaRuntime, Fp16PermutesBetweenChannelsLastConvsAreCopies) {
  KILN_REQUIRE_GPU();
  Network net;
  makeConvNextTokens(net);
  BuilderConfig cfg;
  cfg.setDevice(DeviceType::kGPU);
  cfg.setFlag(BuilderFlag::kFP16);
  auto engine = Builder().build(net, cfg);
  const std::string info = engine->getLayerInformation();
  EXPECT_EQ(info.find("LayoutConvert"), std::string::npos) << info;
  size_t permutes = 0;
  for (size_t at = info.find("\"op\":\"Transpose\""); at != std::string::npos; at = info.find("\"op\":\"Transpose\"", at + 1)) {
    ++permutes;
    const size_t end = info.find('\n', at);
    EXPECT_NE(info.substr(at, end - at).find("nhwc"), std::string::npos) << "a permute without layouts: " << info.substr(at, end - at);
  }
  EXPECT_EQ(permutes, 4u) << info;
  HostTensor in = randomTensor({8, 16, 8, 8}, 54);
  Network ref;
  makeConvNextTokens(ref);
  HostTensor want = kiln::test::evaluateReference(ref, {{"x", in}}).at("y");
  cudaStream_t s;
  cudaStreamCreate(&s);
  auto ctx = engine->createExecutionContext();
  kiln::test::expectClose(runGpu(*ctx, in, s, false, {8, 10}), want, 3e-2, 3e-2, "fp16 ConvNeXt block + token view");
  kiln::test::expectClose(runGpu(*ctx, in, s, true, {8, 10}), want, 3e-2, 3e-2, "the same as a CUDA graph");
  cudaStreamDestroy(s);
}

// A view layer (a Reshape that aliases its input, so nothing runs) on an aux stream between a slow
// producer and a reader on the main stream: the reader must still wait for the producer. (GPT-2's
// FP16 engine read half-written attention inputs before view layers passed readiness on.)
TEST(CudaRuntime, ViewOnAuxStreamPassesReadinessOn) {
  KILN_REQUIRE_GPU();
  constexpr int64_t n = 1024;
  auto shape = [](Network& net, std::vector<int64_t> d) {
    HostTensor t(DataType::kINT64, {static_cast<int64_t>(d.size())});
    for (size_t i = 0; i < d.size(); ++i) t.as<int64_t>()[i] = d[i];
    return net.addConstant("", t);
  };
  auto make = [&](Network& net) {
    Tensor* x = net.addInput("x", DataType::kFLOAT, {n, n});
    Tensor* r = net.addActivation(net.addLayer("Reshape", {x, shape(net, {2 * n, n / 2})}, 1)->outputs[0], "Relu")->outputs[0];
    Tensor* m = x;  // the aux branch: three large MatMuls, then a view
    for (int k = 0; k < 3; ++k) m = net.addMatMul(m, net.addConstant("w" + std::to_string(k), randomTensor({n, n}, 40 + k, -0.05f, 0.05f)))->outputs[0];
    Tensor* v = net.addLayer("Reshape", {m, shape(net, {2 * n, n / 2})}, 1)->outputs[0];
    Tensor* y = net.addElementWise(r, v, "Add")->outputs[0];
    net.renameTensor(y, "y");
    net.markOutput(y);
  };
  Network net;
  make(net);
  BuilderConfig cfg;
  cfg.setDevice(DeviceType::kGPU);
  cfg.setMaxAuxStreams(1);
  auto engine = Builder().build(net, cfg);
  ASSERT_EQ(engine->getNbAuxStreams(), 1);
  HostTensor in = randomTensor({n, n}, 7);
  Network refNet;
  make(refNet);
  HostTensor ref = kiln::test::evaluateReference(refNet, {{"x", in}}).at("y");
  cudaStream_t s;
  cudaStreamCreate(&s);
  auto ctx = engine->createExecutionContext();
  for (int rep = 0; rep < 3; ++rep)
    kiln::test::expectClose(runGpu(*ctx, in, s, false, ref.dims()), ref, 2e-2, 1e-2, "view on an aux stream, run " + std::to_string(rep));
  cudaStreamDestroy(s);
}

// A post-LN transformer block as PyTorch exports it (packed QKV projection split in three, head
// split/merge, SDPA decomposition with split scales, a causal -inf mask and the NaN guard, residual
// Add + LayerNorm, tanh-GELU MLP), built for the GPU in FP16: the fusions leave no Split,
// Transpose, Softmax, Tanh or residual Add, and the engine agrees with the float32 reference.
TEST(CudaRuntime, TransformerBlockFusesAndMatchesReference) {
  KILN_REQUIRE_GPU();
  constexpr int64_t b = 2, s = 64, h = 2, d = 64, e = h * d;
  auto ints = [](Network& n, std::vector<int64_t> v) {
    HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
    return n.addConstant("", t);
  };
  auto scalar = [](Network& n, float v) {
    HostTensor t(DataType::kFLOAT, {});
    *t.as<float>() = v;
    return n.addConstant("", t);
  };
  auto make = [&](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {b, s, e});
    auto linear = [&](Tensor* in, int64_t k, int64_t m, uint32_t seed) {
      Tensor* y = n.addMatMul(in, n.addConstant("", randomTensor({k, m}, seed, -0.08f, 0.08f)))->outputs[0];
      return n.addElementWise(y, n.addConstant("", randomTensor({m}, seed + 1, -0.1f, 0.1f)), "Add")->outputs[0];
    };
    auto layerNorm = [&](Tensor* in, uint32_t seed) {
      Attributes a;
      a.set("epsilon", 1e-5f);
      return n.addLayer("LayerNormalization", {in, n.addConstant("", randomTensor({e}, seed, 0.5f, 1.5f)), n.addConstant("", randomTensor({e}, seed + 1))}, 1, a)
          ->outputs[0];
    };
    auto reshape = [&](Tensor* in, std::vector<int64_t> shape) { return n.addLayer("Reshape", {in, ints(n, shape)}, 1)->outputs[0]; };
    auto transpose = [&](Tensor* in, std::vector<int64_t> perm) {
      Attributes a;
      a.set("perm", perm);
      return n.addLayer("Transpose", {in}, 1, a)->outputs[0];
    };
    Attributes sa;
    sa.set("axis", int64_t(2));
    Layer* split = n.addLayer("Split", {linear(x, e, 3 * e, 10), ints(n, {e, e, e})}, 3, sa);
    Tensor* qh[3];
    for (int i = 0; i < 3; ++i) qh[i] = transpose(reshape(split->outputs[i], {b, s, h, d}), {0, 2, 1, 3});
    const float r = std::sqrt(1 / std::sqrt(static_cast<float>(d)));
    Tensor* q = n.addElementWise(qh[0], scalar(n, r), "Mul")->outputs[0];
    Tensor* kt = n.addElementWise(transpose(qh[1], {0, 1, 3, 2}), scalar(n, r), "Mul")->outputs[0];
    HostTensor causal(DataType::kFLOAT, {s, s});
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j) causal.as<float>()[i * s + j] = j <= i ? 0.f : -std::numeric_limits<float>::infinity();
    Tensor* sc = n.addElementWise(n.addMatMul(q, kt)->outputs[0], n.addConstant("causal", causal), "Add")->outputs[0];
    Tensor* pr = n.addSoftmax(sc, -1)->outputs[0];
    Tensor* nan = n.addLayer("IsNaN", {pr}, 1)->outputs[0];
    pr = n.addLayer("Where", {nan, scalar(n, 0.f), pr}, 1)->outputs[0];
    Tensor* att = reshape(transpose(n.addMatMul(pr, qh[2])->outputs[0], {0, 2, 1, 3}), {b, s, e});
    Tensor* y1 = layerNorm(n.addElementWise(linear(att, e, e, 20), x, "Add")->outputs[0], 30);
    Tensor* f = linear(y1, e, 2 * e, 40);  // tanh GELU, written out as GPT-2 does
    Tensor* cube = n.addElementWise(f, scalar(n, 3.f), "Pow")->outputs[0];
    Tensor* inner = n.addElementWise(f, n.addElementWise(scalar(n, 0.044715f), cube, "Mul")->outputs[0], "Add")->outputs[0];
    Tensor* th = n.addLayer("Tanh", {n.addElementWise(scalar(n, std::sqrt(2.f / 3.14159265f)), inner, "Mul")->outputs[0]}, 1)->outputs[0];
    Tensor* g = n.addElementWise(n.addElementWise(scalar(n, 0.5f), f, "Mul")->outputs[0],
                                 n.addElementWise(scalar(n, 1.f), th, "Add")->outputs[0], "Mul")->outputs[0];
    Tensor* y = layerNorm(n.addElementWise(linear(g, 2 * e, e, 50), y1, "Add")->outputs[0], 60);
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  Network net;
  make(net);
  BuilderConfig cfg;
  cfg.setDevice(DeviceType::kGPU);
  cfg.setFlag(BuilderFlag::kFP16);
  auto engine = Builder().build(net, cfg);
  const std::string info = engine->getLayerInformation();
  for (const char* gone : {"\"op\":\"Split\"", "\"op\":\"Transpose\"", "\"op\":\"Softmax\"", "\"op\":\"Tanh\"", "\"op\":\"Add\""})
    EXPECT_EQ(info.find(gone), std::string::npos) << gone << " left in " << info;
  EXPECT_NE(info.find("\"op\":\"Attention\""), std::string::npos) << info;
  HostTensor in = randomTensor({b, s, e}, 77);
  Network refNet;
  make(refNet);
  HostTensor ref = kiln::test::evaluateReference(refNet, {{"x", in}}).at("y");
  cudaStream_t st;
  cudaStreamCreate(&st);
  auto ctx = engine->createExecutionContext();
  kiln::test::expectClose(runGpu(*ctx, in, st, false, ref.dims()), ref, 3e-2, 3e-2, "FP16 transformer block");
  cudaStreamDestroy(st);
}
