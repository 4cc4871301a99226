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
