// CUDA QLinearMatMul tactics (qlinear_matmul_cuda.cpp: q_linear_matmul_int_cublaslt, _dp4a)
// against the exact integer reference kernel: integer outputs byte for byte, float outputs equal
// (same float operations), on the forms the Q/DQ lowering produces and on the shapes that need
// padding (odd K and N, K < 16, N = 1), batch dims, per-row a_scale, nonzero and per-channel
// weight zero points, uint8 weights, Clip. And the builder: on the GPU, lower_qdq now turns
// DQ -> MatMul -> Q into a QLinearMatMul, whose engine gives the CPU engine's bytes.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>

#include "kiln/kiln.h"
#include "op_test_util.h"
#include "qlinear_cases.h"

using namespace kiln;
using namespace kiln::test;

namespace {

const char* const kCudaTactics[] = {"q_linear_matmul_int_cublaslt", "q_linear_matmul_int_dp4a"};

//! Runs every offered tactic (both must be offered) against the reference, exactly.
void checkBothTactics(Backend& gpu, const OpCase& c, const std::string& what) {
  const std::vector<std::string> names = tacticNames(gpu, c);
  for (const char* t : kCudaTactics) EXPECT_NE(std::find(names.begin(), names.end(), t), names.end()) << what << ": " << t << " not offered";
  checkAllTactics(gpu, c, what, 0, 0);
}

struct Shape {
  Dims a, w;
};
const Shape kShapes[] = {
    {{2, 5, 40}, {40, 24}},   // batch dims fold into rows
    {{3, 64}, {64, 10}},      // Gemm-like, K a multiple of 16
    {{7, 33}, {33, 17}},      // odd K and N: padded
    {{4, 3, 5}, {5, 1}},      // K < 16, N = 1
    {{130, 96}, {96, 130}},   // several tiles each way
    {{64, 32}, {32, 48}},     // int8 A read in place by cuBLASLt (K == Kp)
};

}  // namespace

TEST(CudaQLinear, MatMulTacticsMatchReference) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (const Shape& s : kShapes)
    for (const Form& f : kForms) {
      const int64_t N = s.w[1];
      checkBothTactics(*gpu, qlinearCase("QLinearMatMul", s.a, s.w, N, f, {}), toString(s.a) + "x" + toString(s.w) + " " + formName(f));
    }
}

TEST(CudaQLinear, MatMulZeroPointsScalesAndClip) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const Form u8 = kForms[0], i8 = kForms[3];
  {  // per-channel nonzero int8 weight zero points: the row-sum correction
    OpCase c = qlinearCase("QLinearMatMul", {2, 9, 37}, {37, 19}, 19, u8, {});
    c.inputs[5] = uniformOfType({19}, DataType::kINT8, 7, -9, 9);
    checkBothTactics(*gpu, c, "per-channel w_zero_point");
  }
  {  // uint8 weights with a per-tensor zero point
    OpCase c = qlinearCase("QLinearMatMul", {6, 48}, {48, 20}, 20, i8, {});
    c.inputs[3] = uniformOfType({48, 20}, DataType::kUINT8, 8, 0, 256);
    c.inputs[4] = scalarF(0.003f);
    c.inputs[5] = scalarOf(DataType::kUINT8, 121);
    checkBothTactics(*gpu, c, "uint8 weights");
  }
  {  // per-row a_scale (QLinearMatMul allows M values)
    OpCase c = qlinearCase("QLinearMatMul", {3, 5, 40}, {40, 12}, 12, u8, {});
    c.inputs[1] = uniformOfType({5}, DataType::kFLOAT, 9, 0.01, 0.03);
    checkBothTactics(*gpu, c, "per-row a_scale");
  }
  for (DataType y : {DataType::kUINT8, DataType::kFLOAT}) {  // Clip(0, 6) before the Q, and on a float output
    Form f = u8;
    f.y = y;
    f.relu = false;
    Attributes a;
    setFusedActivation(a, Activation{ActKind::kClip, 0.f, 6.f});
    OpCase c = qlinearCase("QLinearMatMul", {10, 50}, {50, 30}, 30, f, a);
    checkBothTactics(*gpu, c, std::string("clip, ") + toString(y) + " output");
  }
}

// A non-Relu/Clip activation would round differently on the device: the tactics refuse it (the
// layer then stays in float Q/DQ form), rather than differ from the reference.
TEST(CudaQLinear, MatMulRefusesInexactActivations) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  Attributes a;
  setFusedActivation(a, Activation{ActKind::kGelu, 0.f, 0.f});
  EXPECT_TRUE(tacticNames(*gpu, qlinearCase("QLinearMatMul", {3, 64}, {64, 10}, 10, kForms[0], a)).empty());
}

namespace {

//! x (uint8 input) -> DequantizeLinear -> MatMul(DequantizeLinear(int8 W, per-channel)) + Relu ->
//! QuantizeLinear -> DequantizeLinear -> y (float): quantize_static's QDQ form of a linear layer.
void makeQdqLinear(Network& n) {
  const int64_t K = 72, N = 40;
  Tensor* x = n.addInput("x", DataType::kUINT8, {8, K});
  auto scalar = [&](const std::string& name, const HostTensor& v) { return n.addConstant(name, v); };
  Layer* dqx = n.addLayer("DequantizeLinear", {x, scalar("xs", scalarF(0.02f)), scalar("xz", scalarOf(DataType::kUINT8, 131))}, 1);
  HostTensor wz(DataType::kINT8, {N});
  Attributes axis;
  axis.set("axis", int64_t(1));
  Layer* dqw = n.addLayer("DequantizeLinear",
                          {scalar("w", uniformOfType({K, N}, DataType::kINT8, 21, -127, 128)),
                           scalar("ws", uniformOfType({N}, DataType::kFLOAT, 22, 0.001, 0.01)), scalar("wz", wz)},
                          1, axis);
  Layer* mm = n.addMatMul(dqx->outputs[0], dqw->outputs[0]);
  Layer* relu = n.addActivation(mm->outputs[0], "Relu");
  Layer* q = n.addLayer("QuantizeLinear", {relu->outputs[0], scalar("ys", scalarF(0.03f)), scalar("yz", scalarOf(DataType::kUINT8, 0))}, 1);
  Layer* dqy = n.addLayer("DequantizeLinear", {q->outputs[0], scalar("ys2", scalarF(0.03f)), scalar("yz2", scalarOf(DataType::kUINT8, 0))}, 1);
  n.renameTensor(dqy->outputs[0], "y");
  n.markOutput(dqy->outputs[0]);
}

std::unique_ptr<Engine> buildQdq(DeviceType device) {
  Network net;
  makeQdqLinear(net);
  BuilderConfig cfg;
  cfg.setDevice(device);
  if (device == DeviceType::kCPU) cfg.setThreads(2);
  return Builder().build(net, cfg);
}

}  // namespace

// The GPU test's network and CPU engine, checked where no GPU exists: the CPU lowers it too.
TEST(QLinear, GpuLoweringCaseLowersOnTheCpu) {
  auto engine = buildQdq(DeviceType::kCPU);
  const std::string info = engine->getLayerInformation();
  EXPECT_NE(info.find("QLinearMatMul"), std::string::npos) << info;
  EXPECT_EQ(info.find("\"MatMul\""), std::string::npos) << info;
}

TEST(CudaQLinear, LowerQdqLowersMatMulOnTheGpu) {
  KILN_REQUIRE_GPU();
  auto gpuEngine = buildQdq(DeviceType::kGPU);
  const std::string info = gpuEngine->getLayerInformation();
  EXPECT_NE(info.find("QLinearMatMul"), std::string::npos) << info;
  EXPECT_NE(info.find("q_linear_matmul_int_"), std::string::npos) << info;
  EXPECT_EQ(info.find("\"MatMul\""), std::string::npos) << info;
  // The same network on the CPU (integer reference or oneDNN: exact) gives the same float bytes.
  const HostTensor x = uniformOfType({8, 72}, DataType::kUINT8, 23, 0, 256);
  HostTensor want(DataType::kFLOAT, {8, 40}), got(DataType::kFLOAT, {8, 40});
  {
    auto cpuEngine = buildQdq(DeviceType::kCPU);
    auto ctx = cpuEngine->createExecutionContext();
    ctx->setTensorAddress("x", const_cast<void*>(x.data()));
    ctx->setTensorAddress("y", want.data());
    ctx->enqueue();
  }
  void *dx = nullptr, *dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, x.bytes()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, got.bytes()), cudaSuccess);
  cudaMemcpy(dx, x.data(), x.bytes(), cudaMemcpyHostToDevice);
  cudaMemset(dy, 0xff, got.bytes());  // NaNs: an unwritten output cannot pass
  auto ctx = gpuEngine->createExecutionContext();
  ctx->setTensorAddress("x", dx);
  ctx->setTensorAddress("y", dy);
  ctx->enqueue(nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaMemcpy(got.data(), dy, got.bytes(), cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
  expectClose(got, want, 0, 0, "GPU vs CPU engine");
  double sum = 0;
  for (int64_t i = 0; i < want.count(); ++i) sum += want.as<float>()[i];
  EXPECT_GT(sum, 0.0) << "the case must not be all zeros after Relu";
}
