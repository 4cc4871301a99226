// CUDA matmul family (cuBLASLt tactics): MatMul (batching, broadcasting, 1-D operands, fused bias +
// activation), Gemm (transposes, alpha/beta, C broadcast), K = 0 and empty outputs, misaligned
// buffers, TF32 on/off; every tactic against the CPU reference kernel on random data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include <cuda_runtime.h>

#include "backends/cuda/conv_cuda_common.h"
#include "backends/cuda/matmul_lt_run.h"
#include "op_test_util.h"

using namespace kiln;
using kiln::test::OpCase;

namespace {

HostTensor randomTensor(const Dims& d, std::mt19937& rng) {
  HostTensor t(DataType::kFLOAT, d);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t i = 0; i < t.count(); ++i) t.as<float>()[i] = u(rng);
  return t;
}

//! An element type under test: float32 with or without TF32, float16, bfloat16.
struct TypeCfg {
  DataType type;
  bool tf32;
  const char* name;
};
const TypeCfg kF32Tf32{DataType::kFLOAT, true, "f32-tf32"};
const TypeCfg kF32{DataType::kFLOAT, false, "f32"};
const TypeCfg kF16{DataType::kHALF, false, "f16"};
const TypeCfg kBF16{DataType::kBF16, false, "bf16"};
const TypeCfg kAllTypes[] = {kF32Tf32, kF32, kF16, kBF16};

//! |got - ref| <= atol + rtol |ref|, sized for products of K terms in [-1, 1].
void tolerance(const TypeCfg& t, int64_t K, double& rtol, double& atol) {
  double s = std::sqrt(static_cast<double>(std::max<int64_t>(K, 1)));
  if (t.type == DataType::kFLOAT && t.tf32) rtol = 2e-2, atol = 3e-3 * s;
  else if (t.type == DataType::kFLOAT) rtol = 1e-4, atol = 1e-5 * s + 1e-6;
  else if (t.type == DataType::kHALF) rtol = 5e-3, atol = 2e-3 * s;
  else rtol = 2e-2, atol = 1.5e-2 * s;
}

//! A case in the type under test and the same case in float32 (from the rounded inputs) for the
//! reference kernel.
struct TypedCase {
  OpCase gpu, ref;
};

TypedCase makeCase(const std::string& op, const std::vector<HostTensor>& inputs, const std::vector<bool>& constant,
                   const Attributes& attrs, const TypeCfg& t) {
  TypedCase c;
  c.gpu.op = c.ref.op = op;
  c.gpu.attrs = c.ref.attrs = attrs;
  if (!t.tf32) c.gpu.attrs.set("kiln_tf32", int64_t(0));
  c.gpu.constant = c.ref.constant = constant;
  for (const HostTensor& x : inputs) {
    if (!x.valid()) {
      c.gpu.inputs.emplace_back();
      c.ref.inputs.emplace_back();
      continue;
    }
    HostTensor typed = test::convertTo(x, t.type);
    c.gpu.inputs.push_back(typed);
    c.ref.inputs.push_back(test::convertTo(typed, DataType::kFLOAT));
  }
  return c;
}

//! Runs every tactic the GPU offers for the case and compares it with the reference.
void checkAllTactics(const TypedCase& c, const TypeCfg& t, int64_t K, const std::string& what) {
  auto gpu = getBackend(DeviceType::kGPU, 0);
  std::vector<std::string> names = test::tacticNames(*gpu, c.gpu);
  // The four cuBLASLt algorithms always; the fused cuDNN tactics where they apply (checked below).
  for (int i = 0; i < 4; ++i)
    EXPECT_NE(std::find(names.begin(), names.end(), (c.gpu.op == "Gemm" ? "gemm_fp_cublaslt_" : "matmul_fp_cublaslt_") + std::to_string(i)),
              names.end())
        << what;
  HostTensor ref = test::runReference(c.ref)[0];
  double rtol, atol;
  tolerance(t, K, rtol, atol);
  for (const std::string& name : names) {
    std::vector<HostTensor> got;
    try {
      got = test::runTactic(*gpu, name, c.gpu);
    } catch (const Error& e) {
      ADD_FAILURE() << what << " [" << name << ", " << t.name << "]: " << e.what();
      continue;
    }
    test::expectClose(got[0], ref, rtol, atol, what + " [" + name + ", " + t.name + "]");
  }
}

std::string dimsStr(const Dims& d) { return toString(d); }

struct MatMulShape {
  Dims a, b;
  std::optional<Dims> bias;
};

void runMatMul(const MatMulShape& s, const TypeCfg& t, bool constB, const std::string& act = "", float actA = 0.f,
               float actB = 0.f, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::vector<HostTensor> in{randomTensor(s.a, rng), randomTensor(s.b, rng)};
  std::vector<bool> constant{false, constB};
  if (s.bias) {
    in.push_back(randomTensor(*s.bias, rng));
    constant.push_back(constB);
  }
  Attributes attrs;
  if (!act.empty()) {
    attrs.set("kiln_activation", act);
    attrs.set("kiln_act_alpha", actA);
    attrs.set("kiln_act_beta", actB);
  }
  TypedCase c = makeCase("MatMul", in, constant, attrs, t);
  std::string what = "MatMul " + dimsStr(s.a) + " x " + dimsStr(s.b) + (s.bias ? " + " + dimsStr(*s.bias) : "") +
                     (act.empty() ? "" : " " + act) + (constB ? " const B" : "");
  checkAllTactics(c, t, s.a.back(), what);
}

}  // namespace

TEST(CudaMatMul, ShapesAndBatching) {
  KILN_REQUIRE_GPU();
  const MatMulShape shapes[] = {
      {{1, 1}, {1, 1}, {}},
      {{1}, {1}, {}},                        // 1-D x 1-D: a scalar
      {{3, 7}, {7, 5}, {}},                  // odd M/N/K
      {{7}, {7, 5}, {}},                     // 1-D A
      {{3, 7}, {7}, {}},                     // 1-D B
      {{2, 3, 7}, {7}, {}},                  // batched A, 1-D B (folded into M)
      {{7}, {2, 7, 5}, {}},                  // 1-D A broadcast over B's batch
      {{2, 3, 9}, {9, 5}, {}},               // one B: batch folded into M
      {{2, 3, 9}, {2, 9, 5}, {}},            // strided batch
      {{3, 9}, {4, 9, 5}, {}},               // A broadcast (stride 0)
      {{4, 1, 3, 8}, {1, 3, 8, 6}, {}},      // two-sided broadcast: outer launches
      {{2, 1, 5, 17}, {3, 17, 33}, {}},      // A broadcast over an inner dim, B over the outer one
      {{4, 32, 64}, {4, 64, 48}, {}},
      {{2, 64, 768}, {768, 768}, {}},        // 128x768x768 with the batch folded
      {{2, 2, 33, 40}, {2, 2, 40, 24}, {}},  // aligned strides, 4 batches
  };
  for (const MatMulShape& s : shapes)
    for (const TypeCfg& t : kAllTypes)
      for (bool constB : {false, true}) runMatMul(s, t, constB);
}

TEST(CudaMatMul, FusedBiasAndActivations) {
  KILN_REQUIRE_GPU();
  struct Act {
    const char* name;
    float alpha, beta;
  };
  const Act acts[] = {{"", 0, 0},          {"Relu", 0, 0},      {"GeluTanh", 0, 0},    {"Gelu", 0, 0},
                      {"Sigmoid", 0, 0},   {"Tanh", 0, 0},      {"LeakyRelu", 0.1f, 0}, {"Clip", -0.5f, 0.75f},
                      {"HardSwish", 0, 0}, {"HardSigmoid", 0.2f, 0.5f}, {"Elu", 1.f, 0},     {"Softplus", 0, 0},
                      {"Silu", 0, 0},      {"Mish", 0, 0}};
  for (const TypeCfg& t : {kF32, kF16, kBF16, kF32Tf32}) {
    for (const Act& a : acts) {
      runMatMul({{2, 5, 24}, {24, 40}, Dims{40}}, t, true, a.name, a.alpha, a.beta);   // row bias (fused)
      runMatMul({{2, 5, 24}, {24, 40}, std::nullopt}, t, false, a.name, a.alpha, a.beta);  // activation only
    }
    // Bias shapes: odd row, general broadcasts (own epilogue), bias of the output's shape (C).
    runMatMul({{3, 11}, {11, 7}, Dims{7}}, t, false, "Relu");
    runMatMul({{3, 11}, {11, 7}, Dims{1, 7}}, t, true, "GeluTanh");
    runMatMul({{2, 5, 24}, {24, 40}, Dims{5, 1}}, t, false, "Relu");
    runMatMul({{2, 5, 24}, {24, 40}, Dims{1}}, t, false, "Sigmoid");
    runMatMul({{2, 5, 24}, {24, 40}, Dims{2, 1, 40}}, t, true);
    runMatMul({{2, 5, 24}, {24, 40}, Dims{2, 5, 40}}, t, false, "Tanh");
    runMatMul({{2, 5, 24}, {24, 40}, Dims{2, 5, 40}}, t, false, "Relu");
    runMatMul({{4, 1, 3, 8}, {1, 3, 8, 6}, Dims{6}}, t, false, "Relu");
    runMatMul({{3, 11}, {11}, Dims{3}}, t, false, "LeakyRelu", 0.2f);  // 1-D B: the bias runs over M
  }
}

// MatMul + bias + an activation cuBLASLt cannot fuse (erf GELU, SiLU, Sigmoid, Tanh): the cuDNN
// graph tactics are offered for float16 / bfloat16 with constant B and 16-byte rows, and match the
// reference (checkAllTactics runs every offered tactic); elsewhere they are not offered.
TEST(CudaMatMul, CudnnFusedEpilogue) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  auto offered = [&](const MatMulShape& s, const TypeCfg& t, bool constB, const std::string& act) {
    std::mt19937 rng(7);
    std::vector<HostTensor> in{randomTensor(s.a, rng), randomTensor(s.b, rng)};
    std::vector<bool> constant{false, constB};
    if (s.bias) in.push_back(randomTensor(*s.bias, rng)), constant.push_back(true);
    Attributes attrs;
    if (!act.empty()) attrs.set("kiln_activation", act);
    const auto names = test::tacticNames(*gpu, makeCase("MatMul", in, constant, attrs, t).gpu);
    return std::find(names.begin(), names.end(), "matmul_half_cudnn_fused_0") != names.end();
  };
  const MatMulShape convnext{{2, 7, 7, 96}, {96, 384}, Dims{384}};  // ConvNeXt's pwconv1 (channels-last rows)
  const MatMulShape vit{{2, 50, 64}, {64, 256}, Dims{256}};          // a ViT MLP's fc1
  const MatMulShape noBias{{3, 40, 32}, {32, 48}, std::nullopt};
  for (const TypeCfg& t : {kF16, kBF16})
    for (const char* act : {"Gelu", "Silu", "Sigmoid", "Tanh"}) {
      EXPECT_TRUE(offered(convnext, t, true, act)) << t.name << " " << act;
      runMatMul(convnext, t, true, act, 0.f, 0.f, 11);
      runMatMul(vit, t, true, act, 0.f, 0.f, 12);
      runMatMul(noBias, t, true, act, 0.f, 0.f, 13);
    }
  EXPECT_FALSE(offered(vit, kF16, true, "Relu")) << "cuBLASLt fuses ReLU";
  EXPECT_FALSE(offered(vit, kF16, true, "GeluTanh")) << "cuBLASLt fuses the tanh GELU";
  EXPECT_FALSE(offered(vit, kF16, true, "")) << "nothing to fuse";
  EXPECT_FALSE(offered(vit, kF32, true, "Gelu")) << "float32";
  EXPECT_FALSE(offered(vit, kF16, false, "Gelu")) << "B not constant";
  EXPECT_FALSE(offered({{2, 5, 24}, {24, 44}, Dims{44}}, kF16, true, "Gelu")) << "N % 8 != 0";
  EXPECT_FALSE(offered({{2, 5, 20}, {20, 40}, Dims{40}}, kF16, true, "Gelu")) << "K % 8 != 0";
  EXPECT_FALSE(offered({{2, 5, 24}, {24, 40}, Dims{5, 40}}, kF16, true, "Gelu")) << "bias not a row";
}

// MatMul's 4th input G (a gated linear unit, fuse_activation): Y = act(A @ B + bias) * G. Every
// offered tactic (the cuBLASLt ones apply G in their post pass, the cuDNN graph in its epilogue for
// float16 / bfloat16 with any activation cuDNN computes, or none) against the reference, with and
// without a bias, a full-shape bias (cuBLASLt's C), K = 0 (act(bias) * G) and G behind a
// misaligned (odd) output.
TEST(CudaMatMul, GatedMultiplier) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  auto run = [&](const Dims& a, const Dims& b, std::optional<Dims> bias, const std::string& act, const TypeCfg& t,
                 bool expectCudnn) {
    std::mt19937 rng(21);
    std::vector<HostTensor> in{randomTensor(a, rng), randomTensor(b, rng), bias ? randomTensor(*bias, rng) : HostTensor()};
    Dims out(a.begin(), a.end() - 1);
    out.push_back(b.back());
    in.push_back(randomTensor(out, rng));
    Attributes attrs;
    if (!act.empty()) attrs.set("kiln_activation", act);
    TypedCase c = makeCase("MatMul", in, {false, true, true, false}, attrs, t);
    const std::string what = "gated MatMul " + dimsStr(a) + " x " + dimsStr(b) + (bias ? " + " + dimsStr(*bias) : "") + " " + act;
    const auto names = test::tacticNames(*gpu, c.gpu);
    EXPECT_EQ(std::find(names.begin(), names.end(), "matmul_half_cudnn_fused_0") != names.end(), expectCudnn) << what << " " << t.name;
    checkAllTactics(c, t, a.back(), what);
  };
  for (const TypeCfg& t : kAllTypes) {
    const bool half = t.type != DataType::kFLOAT;
    for (const char* act : {"", "Silu", "Relu", "Gelu", "GeluTanh"}) {
      run({2, 5, 24}, {24, 40}, Dims{40}, act, t, half);       // SwiGLU's gate projection with a bias
      run({3, 16, 32}, {32, 48}, std::nullopt, act, t, half);  // LLaMA's: no bias
    }
    run({2, 5, 24}, {24, 40}, Dims{2, 5, 40}, "Silu", t, false);  // a full-shape addend (cuBLASLt's C)
    run({3, 11}, {11, 7}, Dims{7}, "Silu", t, false);             // odd N: element-aligned post pass
    run({2, 5, 0}, {0, 40}, Dims{40}, "Silu", t, false);          // K = 0: act(bias) * G
  }
}

TEST(CudaMatMul, ZeroSizes) {
  KILN_REQUIRE_GPU();
  for (const TypeCfg& t : {kF32, kF16}) {
    runMatMul({{3, 0}, {0, 5}, std::nullopt}, t, false);               // K = 0: zeros
    runMatMul({{2, 3, 0}, {0, 5}, Dims{5}}, t, true, "Sigmoid");         // K = 0: act(bias)
    runMatMul({{3, 0}, {0, 5}, Dims{3, 5}}, t, false, "Relu");
    runMatMul({{0, 4}, {4, 5}, Dims{5}}, t, false, "Relu");            // M = 0: empty
    runMatMul({{3, 4}, {4, 0}, std::nullopt}, t, true);                  // N = 0: empty
    runMatMul({{0, 3, 4}, {4, 5}, std::nullopt}, t, false);            // no batches
  }
}

namespace {

void runGemm(int64_t M, int64_t N, int64_t K, bool transA, bool transB, float alpha, float beta, std::optional<Dims> c,
             const TypeCfg& t, bool constB, const std::string& act = "") {
  std::mt19937 rng(static_cast<uint32_t>(M * 131 + N * 17 + K));
  std::vector<HostTensor> in{randomTensor(transA ? Dims{K, M} : Dims{M, K}, rng), randomTensor(transB ? Dims{N, K} : Dims{K, N}, rng)};
  std::vector<bool> constant{false, constB, constB};
  if (c) in.push_back(randomTensor(*c, rng));
  Attributes attrs;
  attrs.set("transA", int64_t(transA));
  attrs.set("transB", int64_t(transB));
  attrs.set("alpha", alpha);
  attrs.set("beta", beta);
  if (!act.empty()) attrs.set("kiln_activation", act);
  TypedCase tc = makeCase("Gemm", in, constant, attrs, t);
  std::string what = "Gemm " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) + " tA=" + std::to_string(transA) +
                     " tB=" + std::to_string(transB) + " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) +
                     (c ? " C " + dimsStr(*c) : "") + (act.empty() ? "" : " " + act) + (constB ? " const" : "");
  checkAllTactics(tc, t, K, what);
}

}  // namespace

TEST(CudaGemm, TransposesAlphaBetaC) {
  KILN_REQUIRE_GPU();
  for (const TypeCfg& t : kAllTypes)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (bool constB : {false, true}) {
          runGemm(13, 9, 21, ta, tb, 1.f, 1.f, std::nullopt, t, constB);
          runGemm(13, 9, 21, ta, tb, 0.5f, 1.f, Dims{9}, t, constB, "Relu");     // bias epilogue
          runGemm(16, 24, 40, ta, tb, 1.5f, 0.7f, Dims{16, 24}, t, constB);      // C with beta
          runGemm(13, 9, 21, ta, tb, 1.f, 0.5f, Dims{1, 9}, t, constB, "Tanh");  // row C, beta != 1
        }
  for (const TypeCfg& t : kAllTypes) {
    runGemm(7, 5, 3, false, true, 1.f, 2.f, Dims{7, 1}, t, true, "Sigmoid");  // column C
    runGemm(7, 5, 3, true, false, 1.f, 1.f, Dims{1}, t, false, "GeluTanh");   // scalar C
    runGemm(7, 5, 3, false, false, 1.f, 1.f, Dims{1, 1}, t, true, "Gelu");
    runGemm(7, 5, 3, false, false, 1.f, 0.f, Dims{7, 5}, t, true);            // beta = 0: C ignored
    runGemm(1, 1, 1, false, false, 2.f, 1.f, Dims{1}, t, false);
    runGemm(64, 768, 768, false, true, 1.f, 1.f, Dims{768}, t, true, "GeluTanh");
    runGemm(6, 5, 0, false, false, 1.f, 0.5f, Dims{5}, t, false, "Relu");     // K = 0
    runGemm(1, 8, 4, false, false, 1.f, 1.f, Dims{1, 8}, t, false, "Relu");   // M = 1
  }
}

TEST(CudaMatMul, Tf32OffIsFullPrecision) {
  KILN_REQUIRE_GPU();
  // With kiln_tf32 = 0 the float32 result must match to ~1e-5: TF32 (10-bit mantissa) would not.
  std::mt19937 rng(7);
  HostTensor a = randomTensor({64, 512}, rng), b = randomTensor({512, 64}, rng);
  TypedCase c = makeCase("MatMul", {a, b}, {false, true}, {}, kF32);
  auto gpu = getBackend(DeviceType::kGPU, 0);
  HostTensor ref = test::runReference(c.ref)[0];
  for (const std::string& name : test::tacticNames(*gpu, c.gpu))
    test::expectClose(test::runTactic(*gpu, name, c.gpu)[0], ref, 1e-5, 2e-5, "fp32 " + name);
}

TEST(CudaMatMul, MisalignedBuffers) {
  KILN_REQUIRE_GPU();
  // Buffers offset by one element (as a user's pointer may be): the element-aligned algorithm and
  // the own epilogue run instead of the fused 16-byte-aligned one.
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (const TypeCfg& t : {kF32, kF16, kBF16}) {
    std::mt19937 rng(3);
    std::vector<HostTensor> in{randomTensor({2, 9, 16}, rng), randomTensor({16, 24}, rng), randomTensor({24}, rng)};
    Attributes attrs;
    attrs.set("kiln_activation", std::string("Relu"));
    TypedCase c = makeCase("MatMul", in, {false, false, false}, attrs, t);
    HostTensor ref = test::runReference(c.ref)[0];
    LayerDesc build = test::describe(c.gpu, false), concrete = test::describe(c.gpu, true);
    for (auto& tactic : gpu->tactics(build)) {
      auto k = tactic.create(build);
      std::unique_ptr<KernelState> state;
      size_t ws = k->reshape(concrete, state);
      const size_t es = elementSize(t.type);
      std::vector<void*> owned;
      auto devCopy = [&](const HostTensor& h) {
        char* p = static_cast<char*>(gpu->allocate(h.bytes() + 64));
        owned.push_back(p);
        gpu->copyToDevice(p + es, h.data(), h.bytes(), nullptr);
        return p + es;
      };
      KernelIO io;
      for (const HostTensor& h : c.gpu.inputs) io.in.push_back(TensorView{devCopy(h), h.type(), h.dims(), h.count()});
      HostTensor out(concrete.outputs[0].type, concrete.outputs[0].dims);
      io.out.push_back(TensorView{devCopy(out), out.type(), out.dims(), out.count()});
      io.workspace = ws ? gpu->allocate(ws) : nullptr;
      if (ws) owned.push_back(io.workspace);
      io.workspaceSize = ws;
      EXPECT_NO_THROW(k->execute(io, state.get())) << tactic.name;
      gpu->synchronize(nullptr);
      gpu->copyToHost(out.data(), io.out[0].data, out.bytes(), nullptr);
      for (void* p : owned) gpu->release(p);
      double rtol, atol;
      tolerance(t, 16, rtol, atol);
      test::expectClose(out, ref, rtol, atol, std::string("misaligned ") + t.name + " " + tactic.name);
    }
  }
}

TEST(CudaMatMul, SupportsRefusesOtherTypes) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  std::mt19937 rng(5);
  for (DataType t : {DataType::kDOUBLE, DataType::kINT32, DataType::kINT64}) {
    OpCase mm{"MatMul", {}, {test::convertTo(randomTensor({3, 4}, rng), t), test::convertTo(randomTensor({4, 5}, rng), t)}};
    EXPECT_TRUE(test::tacticNames(*gpu, mm).empty()) << toString(t);
    OpCase gemm{"Gemm", {}, {test::convertTo(randomTensor({3, 4}, rng), t), test::convertTo(randomTensor({4, 5}, rng), t)}};
    EXPECT_TRUE(test::tacticNames(*gpu, gemm).empty()) << toString(t);
  }
  OpCase ok{"MatMul", {}, {randomTensor({3, 4}, rng), randomTensor({4, 5}, rng)}};
  std::vector<std::string> names = test::tacticNames(*gpu, ok);
  EXPECT_EQ(names, (std::vector<std::string>{"matmul_fp_cublaslt_0", "matmul_fp_cublaslt_1", "matmul_fp_cublaslt_2", "matmul_fp_cublaslt_3"}));
  // An unknown fused activation (never produced by a valid builder pass) is refused, not crashed on.
  LayerDesc d = test::describe(ok, false);
  Attributes bogus;
  bogus.set("kiln_activation", std::string("NoSuchActivation"));
  d.attrs = &bogus;
  EXPECT_TRUE(gpu->tactics(d).empty());
  // Mixed types (A float, B half) are refused too.
  LayerDesc mixed = test::describe(ok, false);
  mixed.inputs[1].type = DataType::kHALF;
  EXPECT_TRUE(gpu->tactics(mixed).empty());
}

// Weights that share one host buffer (ALBERT's layers; plans store a shared buffer once) share one
// device copy; other buffers, other packings and a buffer rewritten in place get their own, with
// the right contents.
TEST(CudaMatMul, SharedWeightsShareOneDeviceCopy) {
  KILN_REQUIRE_GPU();
  const int64_t K = 48, N = 20;
  std::mt19937 rng(91);
  HostTensor w = randomTensor({K, N}, rng);
  cuda::DeviceWeights a(w, 1, K, N, false);
  cuda::DeviceWeights b(w.reshaped({K, N}), 1, K, N, false);  // another tensor, the same buffer
  EXPECT_EQ(a.data(), b.data());
  cuda::DeviceWeights c(w.clone(), 1, K, N, false);  // same values, another buffer
  EXPECT_NE(a.data(), c.data());
  cuda::DeviceWeights d(w, 1, N, K, true);  // the same buffer read as [N, K]: no repacking
  EXPECT_NE(a.data(), d.data());
  // a's device copy is W repacked to [N, K].
  std::vector<float> got(static_cast<size_t>(K * N));
  ASSERT_EQ(cudaMemcpy(got.data(), a.data(), got.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) ASSERT_EQ(got[n * K + k], w.as<float>()[k * N + n]) << k << "," << n;
  // d's is W as it is.
  ASSERT_EQ(cudaMemcpy(got.data(), d.data(), got.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int64_t i = 0; i < K * N; ++i) ASSERT_EQ(got[i], w.as<float>()[i]) << i;
  // The same buffer rewritten (a user's constant changed between two builds): a new copy of the new values.
  w.as<float>()[0] += 1.f;
  cuda::DeviceWeights e(w, 1, K, N, false);
  EXPECT_NE(a.data(), e.data());
  ASSERT_EQ(cudaMemcpy(got.data(), e.data(), sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got[0], w.as<float>()[0]);
}

// Conv constants (cuda::DeviceConstant) share the same registry: kernels that upload one constant
// with one packing (the cuDNN engine configs timed for a layer, several optimization profiles)
// share a copy; another packing of the same buffer is another copy, holding the repacked values.
TEST(CudaMatMul, ConvConstantsShareOneDeviceCopyPerPacking) {
  KILN_REQUIRE_GPU();
  std::mt19937 rng(92);
  HostTensor w = randomTensor({6, 10}, rng);
  auto reversed = [](const HostTensor& t) {
    HostTensor r(t.type(), t.dims());
    const int64_t n = volume(t.dims());
    for (int64_t i = 0; i < n; ++i) r.as<float>()[i] = t.as<float>()[n - 1 - i];
    return r;
  };
  cuda::DeviceConstant a(w), b(w);
  EXPECT_EQ(a.get(), b.get());
  cuda::DeviceConstant c(w, "reversed", reversed), d(w, "reversed", reversed);
  EXPECT_EQ(c.get(), d.get());
  EXPECT_NE(a.get(), c.get());
  EXPECT_NE(a.get(), cuda::DeviceConstant(w.clone()).get());
  EXPECT_NE(a.get(), cuda::DeviceWeights(w, 1, 6, 10, true).data());  // a matmul's packing is its own
  std::vector<float> got(60);
  ASSERT_EQ(cudaMemcpy(got.data(), c.get(), got.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int64_t i = 0; i < 60; ++i) ASSERT_EQ(got[i], w.as<float>()[59 - i]) << i;
  ASSERT_EQ(cudaMemcpy(got.data(), a.get(), got.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  for (int64_t i = 0; i < 60; ++i) ASSERT_EQ(got[i], w.as<float>()[i]) << i;
  EXPECT_EQ(cuda::DeviceConstant(HostTensor()).get(), nullptr);  // no constant: the kernel reads its input
}

// Fp8MatMul (an FP8 Q/DQ MatMul, lower_qdq_fp8.cpp) on the FP8 tensor cores against the reference
// kernel (float32 quantization of X, double accumulation): X in float32 / float16 / bfloat16, batch
// dims folded into rows, with and without the bias (epilogue for 16-bit outputs, post pass for
// float32), and values beyond +-448 steps that saturate. K % 16 != 0 is not offered.
TEST(CudaFp8MatMul, AgreesWithTheReference) {
  KILN_REQUIRE_GPU();
  int major = 0, minor = 0, dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (major * 10 + minor < 89) GTEST_SKIP() << "no FP8 tensor cores";
  auto gpu = getBackend(DeviceType::kGPU, 0);
  struct Shape { Dims x; int64_t n; bool bias; };
  const Shape shapes[] = {{{2, 7, 64}, 48, true}, {{33, 128}, 40, false}, {{5, 48}, 24, true}, {{64, 256}, 96, true}};
  uint32_t seed = 90;
  for (const Shape& s : shapes)
    for (const TypeCfg& t : {kF32, kF16, kBF16}) {
      std::mt19937 rng(seed++);
      const int64_t K = s.x.back();
      HostTensor x = randomTensor(s.x, rng);
      for (int64_t i = 0; i < x.count(); i += 11) x.as<float>()[i] *= 12.f;  // beyond 448 * x_scale: saturates
      HostTensor w(DataType::kFP8E4M3FN, {K, s.n});
      std::uniform_real_distribution<float> u(-300.f, 300.f);
      for (int64_t i = 0; i < w.count(); ++i) w.as<uint8_t>()[i] = floatToNarrow(DataType::kFP8E4M3FN, u(rng), true);
      OpCase c;
      c.op = "Fp8MatMul";
      c.attrs.set("x_scale", 0.0125f);
      c.attrs.set("w_scale", 0.004f);
      c.inputs = {test::convertTo(x, t.type), w};
      c.constant = {false, true};
      if (s.bias) {
        c.inputs.push_back(test::convertTo(randomTensor({s.n}, rng), t.type));
        c.constant.push_back(true);
      }
      const std::string what = "Fp8MatMul " + toString(s.x) + " x [" + std::to_string(K) + ", " + std::to_string(s.n) + "] " + t.name;
      std::vector<std::string> names = test::tacticNames(*gpu, c);
      ASSERT_EQ(names.size(), 2u) << what;
      HostTensor ref = test::runReference(c)[0];
      // FP8 tensor cores with fast accumulation keep partial sums at ~2^-8 relative (seen on the
      // H100: 0.3% on K = 128 for a float32 output): a wrong scale, layout or rounding is >> this.
      const double rtol = 1e-2, atol = 3e-3 * std::sqrt(double(K));
      for (const std::string& name : names)
        test::expectClose(test::runTactic(*gpu, name, c)[0], ref, rtol, atol, what + " [" + name + "]");
    }
  OpCase odd;
  odd.op = "Fp8MatMul";
  odd.attrs.set("x_scale", 0.5f);
  odd.attrs.set("w_scale", 0.5f);
  odd.inputs = {HostTensor(DataType::kHALF, {4, 40}), HostTensor(DataType::kFP8E4M3FN, {40, 8})};
  odd.constant = {false, true};
  EXPECT_TRUE(test::tacticNames(*gpu, odd).empty()) << "K = 40 is not a multiple of 16";
}

namespace {

//! float8e4m3fn codes as float32 values (times `scale`).
HostTensor decodeE4M3(const HostTensor& codes, float scale) {
  HostTensor f(DataType::kFLOAT, codes.dims());
  for (int64_t i = 0; i < codes.count(); ++i) f.as<float>()[i] = narrowToFloat(DataType::kFP8E4M3FN, codes.as<uint8_t>()[i]) * scale;
  return f;
}

bool deviceHasFp8ForTests() {
  int major = 0, minor = 0, dev = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return major * 10 + minor >= 89;
}

}  // namespace

// The forms fuse_fp8_quantize.cpp makes: X as codes (dtype), a fused activation (cuBLASLt's
// epilogue for ReLU / tanh-GELU, the post pass for erf-GELU), and Y as codes (y_scale: cuBLASLt's
// FP8 D, or staged and quantized after for erf-GELU and a float32 dtype).
TEST(CudaFp8MatMul, CodesInCodesOutAndActivations) {
  KILN_REQUIRE_GPU();
  if (!deviceHasFp8ForTests()) GTEST_SKIP() << "no FP8 tensor cores";
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const Dims xDims{3, 21, 64};
  const int64_t K = 64, N = 48;
  uint32_t seed = 300;
  for (const TypeCfg& t : {kF32, kF16, kBF16})
    for (const char* act : {"", "Relu", "GeluTanh", "Gelu"})
      for (bool codesIn : {false, true})
        for (bool codesOut : {false, true}) {
          std::mt19937 rng(seed++);
          HostTensor x = randomTensor(xDims, rng);
          const float xScale = 0.004f, wScale = 0.003f, yScale = 0.02f;  // |Y| / y_scale within E4M3's range
          HostTensor xIn = test::convertTo(x, t.type);
          if (codesIn) {
            xIn = HostTensor(DataType::kFP8E4M3FN, xDims);
            for (int64_t i = 0; i < x.count(); ++i) xIn.as<uint8_t>()[i] = floatToNarrow(DataType::kFP8E4M3FN, x.as<float>()[i] / xScale, true);
          }
          HostTensor w(DataType::kFP8E4M3FN, {K, N});
          std::uniform_real_distribution<float> u(-300.f, 300.f);
          for (int64_t i = 0; i < w.count(); ++i) w.as<uint8_t>()[i] = floatToNarrow(DataType::kFP8E4M3FN, u(rng), true);
          OpCase c;
          c.op = "Fp8MatMul";
          c.attrs.set("x_scale", xScale);
          c.attrs.set("w_scale", wScale);
          if (codesIn) c.attrs.set("dtype", static_cast<int64_t>(t.type));
          if (codesOut) c.attrs.set("y_scale", yScale);
          if (*act) c.attrs.set("kiln_activation", std::string(act));
          c.inputs = {xIn, w, test::convertTo(randomTensor({N}, rng), t.type)};
          c.constant = {false, true, true};
          const std::string what = std::string("Fp8MatMul ") + t.name + (codesIn ? " codes in" : "") + (codesOut ? " codes out" : "") + " " + act;
          std::vector<std::string> names = test::tacticNames(*gpu, c);
          ASSERT_EQ(names.size(), 2u) << what;
          HostTensor ref = test::runReference(c)[0];
          for (const std::string& name : names) {
            HostTensor got = test::runTactic(*gpu, name, c)[0];
            if (codesOut) {
              // One E4M3 step is 2^-3 relative: the GPU's product (fast accumulation, D scale as a
              // multiplication) may round to the neighbouring code; a wrong scale is far beyond.
              test::expectClose(decodeE4M3(got, yScale), decodeE4M3(ref, yScale), 0.13, 3e-3 * std::sqrt(double(K)), what + " [" + name + "]");
            } else {
              test::expectClose(got, ref, 1e-2, 3e-3 * std::sqrt(double(K)), what + " [" + name + "]");
            }
          }
        }
}

// Fp8Quantize: the hardware's saturating conversion equals the reference's code for code (both
// divide once in IEEE float and round to nearest even), on the vectorized and the scalar path.
TEST(CudaFp8Quantize, EqualsTheReference) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  uint32_t seed = 7;
  for (const TypeCfg& t : {kF32, kF16, kBF16})
    for (const Dims& d : {Dims{4, 64}, Dims{3, 7, 5}}) {
      std::mt19937 rng(seed++);
      HostTensor x = randomTensor(d, rng);
      for (int64_t i = 0; i < x.count(); i += 9) x.as<float>()[i] *= 40.f;  // saturates at scale 0.05
      OpCase c;
      c.op = "Fp8Quantize";
      c.attrs.set("scale", 0.05f);
      c.inputs = {test::convertTo(x, t.type)};
      const std::string what = std::string("Fp8Quantize ") + toString(d) + " " + t.name;
      std::vector<std::string> names = test::tacticNames(*gpu, c);
      ASSERT_EQ(names.size(), 1u) << what;
      test::expectClose(test::runTactic(*gpu, names[0], c)[0], test::runReference(c)[0], 0, 0, what);
    }
}
