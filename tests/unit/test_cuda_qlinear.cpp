// CUDA QLinearMatMul tactics (qlinear_matmul_cuda.cpp: q_linear_matmul_int_cublaslt, _dp4a)
// against the exact integer reference kernel: integer outputs byte for byte, float outputs equal
// (same float operations), on the forms the Q/DQ lowering produces and on the shapes that need
// padding (odd K and N, K < 16, N = 1), batch dims, per-row a_scale, nonzero and per-channel
// weight zero points, uint8 weights, Clip. And the builder: on the GPU, lower_qdq now turns
// DQ -> MatMul -> Q into a QLinearMatMul, whose engine gives the CPU engine's bytes.
// QLinearConv (qlinear_conv_cudnn.cpp: q_linear_conv_int_cudnn_*): symmetric forms against the
// reference in both layouts, within one quantization step (the graph scales before adding the
// bias), with kiln's int8 residual, the refused forms, and a calibrated-style Q/DQ CNN through the
// builder against the CPU.
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

//! Runs `e` (input "x", output "y") on host buffers.
void runOnCpu(Engine& e, const HostTensor& x, HostTensor& y) {
  auto ctx = e.createExecutionContext();
  ctx->setTensorAddress("x", const_cast<void*>(x.data()));
  ctx->setTensorAddress("y", y.data());
  ctx->enqueue();
}

//! Runs GPU engine `e` on a device copy of x; y starts as NaNs, so that an unwritten output cannot pass.
void runOnGpu(Engine& e, const HostTensor& x, HostTensor& y) {
  void *dx = nullptr, *dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, x.bytes()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, y.bytes()), cudaSuccess);
  cudaMemcpy(dx, x.data(), x.bytes(), cudaMemcpyHostToDevice);
  cudaMemset(dy, 0xff, y.bytes());
  auto ctx = e.createExecutionContext();
  ctx->setTensorAddress("x", dx);
  ctx->setTensorAddress("y", dy);
  ctx->enqueue(nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaMemcpy(y.data(), dy, y.bytes(), cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
}

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
  runOnCpu(*buildQdq(DeviceType::kCPU), x, want);
  runOnGpu(*gpuEngine, x, got);
  expectClose(got, want, 0, 0, "GPU vs CPU engine");
  double sum = 0;
  for (int64_t i = 0; i < want.count(); ++i) sum += want.as<float>()[i];
  EXPECT_GT(sum, 0.0) << "the case must not be all zeros after Relu";
}

// ---- QLinearConv on cuDNN's int8 engines --------------------------------------------------------

namespace {

using test::channelsLast;

const Form kSymmetricForms[] = {
    {DataType::kINT8, DataType::kINT8, 0, 0, true, true, false},   // calibrated: per-channel, bias
    {DataType::kINT8, DataType::kINT8, 0, 0, false, true, true},   // per tensor, Relu
    {DataType::kINT8, DataType::kFLOAT, 0, 0, true, true, true},   // float output (no Q after), Relu
    {DataType::kINT8, DataType::kINT8, 0, 0, true, false, false},  // no bias
};

struct ConvShape {
  Dims x, w;
  std::vector<int64_t> pads, strides, dilations;
};
const ConvShape kConvShapes[] = {
    {{2, 16, 9, 11}, {24, 16, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}},
    {{1, 32, 8, 8}, {16, 32, 1, 1}, {0, 0, 0, 0}, {1, 1}, {1, 1}},
    {{2, 16, 10, 10}, {32, 16, 3, 3}, {1, 1, 1, 1}, {2, 2}, {1, 1}},
    {{1, 8, 12, 12}, {8, 8, 3, 3}, {2, 2, 2, 2}, {1, 1}, {2, 2}},
};

OpCase convCase(const ConvShape& s, const Form& f, Attributes a = {}) {
  a.set("pads", s.pads);
  a.set("strides", s.strides);
  a.set("dilations", s.dilations);
  a.set("kernel_shape", std::vector<int64_t>{s.w[2], s.w[3]});
  return qlinearCase("QLinearConv", s.x, s.w, s.w[0], f, std::move(a));
}

//! Every offered tactic (q_linear_conv_int_cudnn_0 must be) in both layouts against the reference:
//! float outputs to float rounding, int8 outputs within one step and exact for >= 99% of values.
void checkQConvTactics(const OpCase& plain, const std::string& what) {
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const std::vector<HostTensor> ref = runReference(plain);
  for (bool last : {false, true}) {
    OpCase dev = plain;
    dev.attrs.set("kiln_layout_in", std::string(last ? "nhwc" : "nchw"));
    dev.attrs.set("kiln_layout_out", std::string(last ? "nhwc" : "nchw"));
    if (last) dev.inputs[0] = channelsLast(dev.inputs[0], true);
    if (last && dev.inputs.size() > kQR) dev.inputs[kQR] = channelsLast(dev.inputs[kQR], true);  // R has Y's layout
    const std::vector<std::string> names = tacticNames(*gpu, dev);
    EXPECT_NE(std::find(names.begin(), names.end(), "q_linear_conv_int_cudnn_0"), names.end()) << what << ": not offered";
    for (const std::string& n : names) {
      const std::string desc = what + (last ? " nhwc " : " nchw ") + n;
      std::vector<HostTensor> got = runTactic(*gpu, n, dev);
      const HostTensor y = last ? channelsLast(got[0], false) : got[0];
      ASSERT_EQ(y.type(), ref[0].type()) << desc;
      if (y.type() == DataType::kFLOAT) {
        expectClose(y, ref[0], 1e-5, 1e-5, desc);
        continue;
      }
      int64_t off = 0;
      for (int64_t i = 0; i < y.count(); ++i) {
        const int d = std::abs(int(y.as<int8_t>()[i]) - int(ref[0].as<int8_t>()[i]));
        ASSERT_LE(d, 1) << desc << " at " << i;
        off += d;
      }
      EXPECT_LE(off * 100, y.count()) << desc << ": " << off << " of " << y.count() << " one step off";
    }
  }
}

}  // namespace

TEST(CudaQLinear, ConvCudnnMatchesReference) {
  KILN_REQUIRE_GPU();
  for (const ConvShape& s : kConvShapes)
    for (const Form& f : kSymmetricForms) checkQConvTactics(convCase(s, f), toString(s.x) + "*" + toString(s.w) + " " + formName(f));
  Attributes a;  // Clip(-1, 2) before requantizing
  setFusedActivation(a, Activation{ActKind::kClip, -1.f, 2.f});
  checkQConvTactics(convCase(kConvShapes[0], kSymmetricForms[0], a), "clip");
}

// kiln's residual form (a ResNet block's conv + Add(R) + Relu + Q): R * r_scale added in the graph,
// R staged with Y when the tactic runs NCHW. int8 and float outputs, with and without Relu.
TEST(CudaQLinear, ConvCudnnResidualMatchesReference) {
  KILN_REQUIRE_GPU();
  for (const ConvShape& s : {kConvShapes[0], kConvShapes[1]})
    for (const Form& f : kSymmetricForms) {
      const OpCase plain = convCase(s, f);
      const Dims y = runReference(plain)[0].dims();
      checkQConvTactics(withResidual(plain, y, 0.04f, 0), "residual " + toString(s.x) + "*" + toString(s.w) + " " + formName(f));
    }
  // Refused: a residual zero point the graph does not subtract.
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const OpCase plain = convCase(kConvShapes[0], kSymmetricForms[0]);
  for (const std::string& n : tacticNames(*gpu, withResidual(plain, runReference(plain)[0].dims(), 0.04f, 3)))
    EXPECT_NE(n.rfind("q_linear_conv_int_cudnn", 0), 0u) << n << " offered for r_zero_point 3";
}

// What the int8 engines cannot compute exactly is refused (the layer then stays float Q/DQ):
// asymmetric zero points (cuDNN pads with integer 0), uint8, groups, channel counts off 8.
TEST(CudaQLinear, ConvCudnnRefusesWhatItCannotRun) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  auto offered = [&](const OpCase& c) {
    for (const std::string& n : tacticNames(*gpu, c))
      if (n.rfind("q_linear_conv_int_cudnn", 0) == 0) return true;
    return false;
  };
  EXPECT_TRUE(offered(convCase(kConvShapes[0], kSymmetricForms[0])));
  EXPECT_FALSE(offered(convCase(kConvShapes[0], kForms[0]))) << "uint8 x with zero point 130";
  EXPECT_FALSE(offered(convCase(kConvShapes[0], kForms[3]))) << "x zero point 5";
  Attributes g;
  g.set("group", int64_t(2));
  EXPECT_FALSE(offered(convCase({{2, 16, 9, 11}, {24, 8, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}}, kSymmetricForms[0], g))) << "group 2";
  EXPECT_FALSE(offered(convCase({{2, 12, 9, 11}, {24, 12, 3, 3}, {1, 1, 1, 1}, {1, 1}, {1, 1}}, kSymmetricForms[0]))) << "C = 12";
}

namespace {

//! Symmetric Q/DQ pieces: an int8 Q -> DQ pair (zero point 0), and Conv(DQ(int8 W, per-channel
//! scales), float bias) with "same" padding.
struct QdqPieces {
  Network& n;
  Tensor* constant(const std::string& name, const HostTensor& v) { return n.addConstant(name, v); }
  Tensor* qdq(Tensor* t, float s, const std::string& tag) {
    Layer* q = n.addLayer("QuantizeLinear", {t, constant(tag + "_s", scalarF(s)), constant(tag + "_z", scalarOf(DataType::kINT8, 0))}, 1);
    return n.addLayer("DequantizeLinear", {q->outputs[0], constant(tag + "_s2", scalarF(s)), constant(tag + "_z2", scalarOf(DataType::kINT8, 0))}, 1)
        ->outputs[0];
  }
  Tensor* conv(Tensor* in, int64_t k, int64_t cin, int64_t r, const std::string& tag, unsigned seed) {
    Attributes axis;
    axis.set("axis", int64_t(0));
    Tensor* w = n.addLayer("DequantizeLinear",
                           {constant(tag + "_w", uniformOfType({k, cin, r, r}, DataType::kINT8, seed, -127, 128)),
                            constant(tag + "_ws", uniformOfType({k}, DataType::kFLOAT, seed + 1, 0.002, 0.006))},
                           1, axis)->outputs[0];
    Attributes a;
    a.set("pads", std::vector<int64_t>(4, r / 2));
    a.set("kernel_shape", std::vector<int64_t>{r, r});
    return n.addLayer("Conv", {in, w, constant(tag + "_b", uniformOfType({k}, DataType::kFLOAT, seed + 2, -0.5, 0.5))}, 1, a)->outputs[0];
  }
};

std::unique_ptr<Engine> buildOn(Network& net, DeviceType device, bool fp16) {
  BuilderConfig cfg;
  cfg.setDevice(device);
  if (fp16) cfg.setFlag(BuilderFlag::kFP16);
  if (device == DeviceType::kCPU) cfg.setThreads(2);
  return Builder().build(net, cfg);
}

//! x -> Q -> DQ -> Conv(DQ(int8 W, per-channel), bias) -> Relu -> Q -> DQ -> MaxPool -> Q -> DQ ->
//! Conv(DQ(W2)) -> y (float): the symmetric Q/DQ CNN that calibration (or a ModelOpt-style export)
//! makes. On the GPU both convs become QLinearConv on cuDNN, channels last in between.
std::unique_ptr<Engine> buildQdqCnn(DeviceType device, bool fp16 = false) {
  Network n;
  QdqPieces p{n};
  Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 16, 12, 12});
  Tensor* h = n.addActivation(p.conv(p.qdq(x, 0.02f, "qx"), 32, 16, 3, "c1", 31), "Relu")->outputs[0];
  Attributes pool;
  pool.set("kernel_shape", std::vector<int64_t>{2, 2});
  pool.set("strides", std::vector<int64_t>{2, 2});
  h = n.addLayer("MaxPool", {p.qdq(h, 0.04f, "q1")}, 1, pool)->outputs[0];
  Tensor* y = p.conv(p.qdq(h, 0.04f, "q2"), 16, 32, 3, "c2", 41);
  n.renameTensor(y, "y");
  n.markOutput(y);
  return buildOn(n, device, fp16);
}

//! x -> Q -> DQ (xq) -> Conv + Relu -> Q -> DQ -> Conv -> Add(., xq) -> Relu -> Q -> DQ -> y: a ResNet
//! basic block in explicit symmetric Q/DQ form. Its second conv, Add, Relu and Q become one
//! QLinearConv with the int8 residual (inputs 9..11) where a kernel takes that form.
std::unique_ptr<Engine> buildQdqResidualBlock(DeviceType device, bool fp16 = false) {
  Network n;
  QdqPieces p{n};
  Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 16, 12, 12});
  Tensor* xq = p.qdq(x, 0.02f, "qx");
  Tensor* h = n.addActivation(p.conv(xq, 16, 16, 3, "c1", 51), "Relu")->outputs[0];
  h = p.conv(p.qdq(h, 0.04f, "q1"), 16, 16, 3, "c2", 61);
  h = n.addActivation(n.addLayer("Add", {h, xq}, 1)->outputs[0], "Relu")->outputs[0];
  Tensor* y = p.qdq(h, 0.05f, "qy");
  n.renameTensor(y, "y");
  n.markOutput(y);
  return buildOn(n, device, fp16);
}

size_t countOf(const std::string& text, const std::string& what) {
  size_t k = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++k;
  return k;
}

//! Runs GPU engine `gpu` and CPU engine `cpu` on x; y (dims `y`) within `rel` of the CPU output's
//! range, which must exceed `minRange` (a constant case proves nothing).
void expectGpuNearCpu(Engine& gpu, Engine& cpu, const HostTensor& x, const Dims& y, double minRange, double rel, const std::string& what) {
  HostTensor want(DataType::kFLOAT, y), got(DataType::kFLOAT, y);
  runOnCpu(cpu, x, want);
  runOnGpu(gpu, x, got);
  double lo = 1e30, hi = -1e30;
  for (int64_t i = 0; i < want.count(); ++i) lo = std::min(lo, double(want.as<float>()[i])), hi = std::max(hi, double(want.as<float>()[i]));
  ASSERT_GT(hi - lo, minRange) << what << ": the case must not be constant";
  expectClose(got, want, 0, rel * (hi - lo), what);
}

}  // namespace

// The GPU residual test's block, where no GPU exists: the CPU fuses the Add too (oneDNN's sum post-op).
TEST(QLinear, GpuResidualCaseLowersOnTheCpu) {
  const std::string info = buildQdqResidualBlock(DeviceType::kCPU)->getLayerInformation();
  EXPECT_EQ(countOf(info, "\"QLinearConv\""), 2u) << info;
  EXPECT_EQ(countOf(info, "\"Add\""), 0u) << info;
}

TEST(CudaQLinear, ResidualBlockRunsAsTwoInt8ConvsOnTheGpu) {
  KILN_REQUIRE_GPU();
  for (bool fp16 : {false, true}) {
    auto gpuEngine = buildQdqResidualBlock(DeviceType::kGPU, fp16);
    const std::string info = gpuEngine->getLayerInformation();
    EXPECT_EQ(countOf(info, "q_linear_conv_int_cudnn"), 2u) << info;
    EXPECT_EQ(countOf(info, "\"Add\""), 0u) << info;
    // y is quantized in steps of 0.05: the graph's rounding (scale, then bias) may move a value one
    // step, and that step the next conv; a wrong residual scale or layout moves it by the range.
    expectGpuNearCpu(*gpuEngine, *buildQdqResidualBlock(DeviceType::kCPU), uniformOfType({2, 16, 12, 12}, DataType::kFLOAT, 53, -2.0, 2.0),
                     {2, 16, 12, 12}, 1.0, 0.03, fp16 ? "float16 GPU vs CPU engine" : "GPU vs CPU engine");
  }
}

TEST(QLinear, GpuConvCaseLowersOnTheCpu) {
  const std::string info = buildQdqCnn(DeviceType::kCPU)->getLayerInformation();
  EXPECT_NE(info.find("QLinearConv"), std::string::npos) << info;
  EXPECT_EQ(info.find("\"Conv\""), std::string::npos) << info;
}

// Also in a float16 engine: the last conv's float output is written as float16 by its epilogue
// (kiln_float_out_type), so the only Casts are the network input's and output's.
class CudaQLinearConvEngine : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(CudaQLinear, CudaQLinearConvEngine, ::testing::Values(false, true));

TEST_P(CudaQLinearConvEngine, LowerQdqLowersConvOnTheGpu) {
  KILN_REQUIRE_GPU();
  const bool fp16 = GetParam();
  auto gpuEngine = buildQdqCnn(DeviceType::kGPU, fp16);
  const std::string info = gpuEngine->getLayerInformation();
  EXPECT_GE(countOf(info, "q_linear_conv_int_cudnn"), 2u) << info;
  EXPECT_EQ(info.find("\"Conv\""), std::string::npos) << info;
  // Channels last from the first Q to the last conv: conversions only at the network's edges.
  EXPECT_LE(countOf(info, "LayoutConvert"), 2u) << info;
  EXPECT_LE(countOf(info, "cast_any_cuda"), fp16 ? 2u : 0u) << info;
  // One step of the first conv's int8 output moves y by at most 0.04 * max|w2 * s2| per tap; a few
  // such steps stay far below 2% of y's range, while a wrong layout or scale is of the range.
  expectGpuNearCpu(*gpuEngine, *buildQdqCnn(DeviceType::kCPU), uniformOfType({2, 16, 12, 12}, DataType::kFLOAT, 43, -2.0, 2.0), {2, 16, 6, 6},
                   0.1, fp16 ? 0.03 : 0.02, fp16 ? "float16 GPU vs CPU engine" : "GPU vs CPU engine");
}
