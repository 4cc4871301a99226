// The GPU runtime: engines built for the GPU agree with the CPU engine; aux streams, CUDA graphs,
// reduced precision and two contexts on two streams. Skips where no GPU exists.
#include <cuda_runtime.h>

#include <thread>

#include "op_test_util.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::randomTensor;

namespace {

// x -> three parallel MatMul+Relu branches (like Q/K/V projections) -> Add -> Add -> Softmax.
void makeBranchy(Network& n) {
  Tensor* x = n.addInput("x", DataType::kFLOAT, {4, 64});
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
  makeBranchy(net);
  return kiln::test::evaluateReference(net, {{"x", in}}).at("y");
}

HostTensor runGpu(ExecutionContext& ctx, const HostTensor& in, cudaStream_t s, bool graph = false) {
  HostTensor out(DataType::kFLOAT, {4, 64});
  DeviceBuffers buf(in, out.bytes());
  ctx.setTensorAddress("x", buf.x);
  ctx.setTensorAddress("y", buf.y);
  if (graph) {
    EXPECT_TRUE(ctx.captureGraph(s));
    cudaMemsetAsync(buf.y, 0, out.bytes(), s);
    ctx.launchGraph(s);
  } else {
    ctx.enqueue(s);
  }
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
  HostTensor out(DataType::kFLOAT, {8, 10});
  DeviceBuffers buf(in, out.bytes());
  cudaStream_t s;
  cudaStreamCreate(&s);
  auto ctx = engine->createExecutionContext();
  ctx->setTensorAddress("x", buf.x);
  ctx->setTensorAddress("y", buf.y);
  ctx->enqueue(s);
  cudaMemcpyAsync(out.data(), buf.y, out.bytes(), cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  kiln::test::expectClose(out, want, 3e-2, 3e-2, "fp16 conv chain, channels-last");
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
  void *dx = nullptr, *dy = nullptr;
  cudaMalloc(&dx, in.bytes());
  cudaMalloc(&dy, ref.bytes());
  cudaMemcpy(dx, in.data(), in.bytes(), cudaMemcpyHostToDevice);
  ctx->setTensorAddress("x", dx);
  ctx->setTensorAddress("y", dy);
  for (int rep = 0; rep < 3; ++rep) {
    cudaMemsetAsync(dy, 0xff, ref.bytes(), s);  // NaNs: stale or unwritten values cannot pass
    ctx->enqueue(s);
    HostTensor out(DataType::kFLOAT, ref.dims());
    cudaMemcpyAsync(out.data(), dy, out.bytes(), cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    kiln::test::expectClose(out, ref, 2e-2, 1e-2, "view on an aux stream, run " + std::to_string(rep));
  }
  cudaFree(dx);
  cudaFree(dy);
  cudaStreamDestroy(s);
}
