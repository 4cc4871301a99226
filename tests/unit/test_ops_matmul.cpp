// MatMul / Gemm / Einsum op definitions, their CPU tactics and kiln's own sgemm.
// Expected values: NumPy (small integer-valued cases, computed offline with np.matmul/np.einsum),
// a naive double-precision triple loop (sgemm), and the ops' reference kernels (tactics).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backends/backend.h"
#include "backends/cpu/gemm.h"
#include "core/thread_pool.h"
#include "kiln/network.h"
#include "ops/activation.h"
#include "ops/op_registry.h"
#include "poison.h"

using namespace kiln;

namespace {

// ---- helpers ----

//! The deterministic integer pattern used when generating the NumPy expectations.
HostTensor patternTensor(const Dims& d, int seed) {
  HostTensor t(DataType::kFLOAT, d);
  for (int64_t i = 0; i < t.count(); ++i) t.as<float>()[i] = static_cast<float>(((i * 7 + seed * 3) % 11) - 5);
  return t;
}

HostTensor randomTensor(const Dims& d, std::mt19937& rng) {
  HostTensor t(DataType::kFLOAT, d);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t i = 0; i < t.count(); ++i) t.as<float>()[i] = u(rng);
  return t;
}

struct Input {
  HostTensor value;
  bool constant = false;  // visible to the tactic at create time (weights)
  bool present = true;
};

//! A layer with concrete inputs, inferred outputs, ready to run through any tactic.
struct TestLayer {
  Attributes attrs;
  LayerDesc desc;
  std::vector<Input> inputs;

  TestLayer(const std::string& op, std::vector<Input> in, Attributes a = {}) : attrs(std::move(a)), inputs(std::move(in)) {
    desc.name = "test_" + op;
    desc.op = op;
    desc.attrs = &attrs;
    for (auto& i : inputs) {
      TensorDesc t;
      if (i.present) {
        t.type = i.value.type();
        t.dims = i.value.dims();
        if (i.constant) t.value = i.value;
      }
      desc.inputs.push_back(t);
      desc.inputPresent.push_back(i.present);
    }
    inferLayer(desc);
  }

  HostTensor run(const Tactic& tactic, ThreadPool* pool) {
    LayerDesc d = desc;
    d.attrs = &attrs;
    auto kernel = tactic.create(d);
    std::unique_ptr<KernelState> state;
    size_t ws = kernel->reshape(d, state);
    std::vector<uint8_t> workspace(ws);
    HostTensor out = kiln::test::poisoned(desc.outputs[0].type, desc.outputs[0].dims);
    KernelIO io;
    for (auto& i : inputs)
      io.in.push_back(i.present ? TensorView{const_cast<void*>(i.value.data()), i.value.type(), i.value.dims(), i.value.count()}
                                : TensorView{});
    io.out.push_back(TensorView{out.data(), out.type(), out.dims(), out.count()});
    io.workspace = workspace.data();
    io.workspaceSize = ws;
    io.pool = pool;
    kernel->execute(io, state.get());
    return out;
  }
};

ThreadPool* cpuPool() { return getBackend(DeviceType::kCPU, 2)->pool(); }

void expectClose(const HostTensor& got, const HostTensor& want, float tol, const std::string& what) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  for (int64_t i = 0; i < got.count(); ++i) {
    float g = got.as<float>()[i], w = want.as<float>()[i];
    ASSERT_NEAR(g, w, tol * (1.f + std::fabs(w))) << what << " at element " << i;
  }
}

void expectValues(const HostTensor& got, const Dims& dims, const std::vector<float>& want) {
  ASSERT_EQ(got.dims(), dims);
  ASSERT_EQ(got.count(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got.as<float>()[i], want[i]) << "element " << i;
}

//! Runs every optimized CPU tactic of the layer against the reference kernel; returns how many ran.
int compareTactics(TestLayer& l, float tol = 2e-5f) {
  HostTensor ref = l.run(referenceTactic(l.desc.op), cpuPool());
  int optimized = 0;
  for (const Tactic& t : getBackend(DeviceType::kCPU, 2)->tactics(l.desc)) {
    if (t.name == "ref") continue;
    ++optimized;
    expectClose(l.run(t, cpuPool()), ref, tol, l.desc.op + " tactic " + t.name);
  }
  return optimized;
}

bool hasTactic(const LayerDesc& d, const std::string& name) {
  for (auto& t : getBackend(DeviceType::kCPU, 2)->tactics(d))
    if (t.name == name) return true;
  return false;
}

// ---- sgemm ----

void naiveGemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const std::vector<float>& A, int64_t lda,
               const std::vector<float>& B, int64_t ldb, float beta, std::vector<float>& C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += double(ta ? A[k * lda + i] : A[i * lda + k]) * double(tb ? B[j * ldb + k] : B[k * ldb + j]);
      double c = beta == 0.f ? 0.0 : beta * double(C[i * ldc + j]);
      C[i * ldc + j] = static_cast<float>(alpha * acc + c);
    }
}

struct GemmCase {
  int64_t M, N, K;
  bool ta, tb;
  float alpha, beta;
  int64_t pad;  // extra leading-dimension elements
};

void checkSgemm(const GemmCase& c, ThreadPool* pool, bool packed) {
  std::mt19937 rng(static_cast<unsigned>(c.M * 131 + c.N * 17 + c.K));
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  int64_t lda = (c.ta ? c.M : c.K) + c.pad, ldb = (c.tb ? c.K : c.N) + c.pad, ldc = c.N + c.pad;
  std::vector<float> A((c.ta ? c.K : c.M) * lda + 1), B((c.tb ? c.N : c.K) * ldb + 1), C(c.M * ldc + 1);
  for (auto& x : A) x = u(rng);
  for (auto& x : B) x = u(rng);
  for (auto& x : C) x = c.beta == 0.f ? NAN : u(rng);  // beta == 0 must ignore C, NaN included
  std::vector<float> want = C;
  naiveGemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A, lda, B, ldb, c.beta, want, ldc);
  if (packed) {
    cpu::PackedB pb(c.tb, c.K, c.N, B.data(), ldb, pool);
    cpu::sgemmPacked(c.ta, c.M, c.alpha, A.data(), lda, pb, c.beta, C.data(), ldc, pool);
  } else {
    cpu::sgemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A.data(), lda, B.data(), ldb, c.beta, C.data(), ldc, pool);
  }
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      float w = want[i * ldc + j], g = C[i * ldc + j];
      ASSERT_NEAR(g, w, 1e-4f * (1.f + std::sqrt(float(c.K)))) << "M=" << c.M << " N=" << c.N << " K=" << c.K << " ta=" << c.ta
                                                               << " tb=" << c.tb << " at (" << i << "," << j << ")";
    }
  // Padding between rows of C must be untouched.
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = c.N; j < ldc && i * ldc + j < int64_t(C.size()); ++j)
      if (c.beta != 0.f) ASSERT_EQ(C[i * ldc + j], want[i * ldc + j]);
}

std::vector<GemmCase> oddCases() {
  std::vector<GemmCase> v;
  const int64_t sizes[][3] = {{1, 1, 1}, {1, 17, 5}, {7, 1, 9}, {5, 15, 3}, {6, 16, 256}, {13, 33, 257}, {37, 50, 1},
                              {64, 64, 64}, {100, 47, 300}, {193, 130, 70}, {6, 1040, 20}, {250, 31, 513}};
  int n = 0;
  for (auto& s : sizes)
    for (int t = 0; t < 4; ++t) {
      float alpha = (n % 3 == 0) ? 1.f : 0.75f, beta = (n % 4 == 0) ? 0.f : (n % 4 == 1 ? 1.f : -0.5f);
      v.push_back({s[0], s[1], s[2], (t & 1) != 0, (t & 2) != 0, alpha, beta, (n % 2) ? 3 : 0});
      ++n;
    }
  return v;
}

}  // namespace

TEST(Sgemm, MatchesNaiveLoopForOddSizesAndTransposes) {
  for (const GemmCase& c : oddCases()) checkSgemm(c, cpuPool(), false);
}

TEST(Sgemm, SingleThreadedWithoutPool) {
  for (const GemmCase& c : oddCases()) checkSgemm(c, nullptr, false);
}

TEST(Sgemm, PrePackedBMatchesNaiveLoop) {
  for (const GemmCase& c : oddCases()) checkSgemm(c, cpuPool(), true);
}

TEST(Sgemm, ZeroKScalesC) {
  std::vector<float> C = {1.f, 2.f, 3.f, 4.f};
  cpu::sgemm(false, false, 2, 2, 0, 1.f, nullptr, 1, nullptr, 2, 0.5f, C.data(), 2, cpuPool());
  EXPECT_EQ(C, (std::vector<float>{0.5f, 1.f, 1.5f, 2.f}));
}

TEST(Sgemm, EpilogueAddsBiasesThenActivation) {
  const int64_t M = 9, N = 21, K = 11;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> A(M * K), B(K * N), colBias(N), rowBias(M), C(M * N), want(M * N);
  for (auto* v : {&A, &B, &colBias, &rowBias})
    for (auto& x : *v) x = u(rng);
  naiveGemm(false, false, M, N, K, 1.f, A, K, B, N, 0.f, want, N);
  for (ActKind kind : {ActKind::kRelu, ActKind::kGelu, ActKind::kGeluTanh, ActKind::kSigmoid, ActKind::kTanh, ActKind::kHardSigmoid}) {
    cpu::GemmEpilogue ep;
    ep.colBias = colBias.data();
    ep.rowBias = rowBias.data();
    ep.act.kind = kind;
    ep.act.alpha = 0.2f;
    ep.act.beta = 0.5f;
    cpu::sgemm(false, false, M, N, K, 1.f, A.data(), K, B.data(), N, 0.f, C.data(), N, cpuPool(), ep);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        ASSERT_NEAR(C[i * N + j], ep.act(want[i * N + j] + colBias[j] + rowBias[i]), 2e-6f) << int(kind);
  }
}

TEST(Sgemm, RejectsBadArguments) {
  float x = 0;
  EXPECT_THROW(cpu::sgemm(false, false, -1, 2, 2, 1.f, &x, 2, &x, 2, 0.f, &x, 2, nullptr), Error);
  EXPECT_THROW(cpu::sgemm(false, false, 2, 4, 3, 1.f, &x, 2, &x, 4, 0.f, &x, 4, nullptr), Error);  // lda < K
  EXPECT_THROW(cpu::sgemm(false, false, int64_t(1) << 40, int64_t(1) << 40, 2, 1.f, &x, 2, &x, int64_t(1) << 40, 0.f, &x,
                          int64_t(1) << 40, nullptr),
               Error);
}

// ---- MatMul ----

TEST(MatMulRef, BroadcastBatchesMatchNumpy) {
  TestLayer l("MatMul", {{patternTensor({2, 1, 2, 3}, 1)}, {patternTensor({3, 3, 2}, 2)}});
  HostTensor y = l.run(referenceTactic("MatMul"), cpuPool());
  expectValues(y, {2, 3, 2, 2}, {14, 9, 13, 9, 17, 1, 11, 7, 9, -29, 9, -28, 12, 9, 11, 9, 5, 13, -1, 19, 9, -27, 9, -26});
}

TEST(MatMulRef, OneDimensionalAMatchesNumpy) {
  TestLayer l("MatMul", {{patternTensor({3}, 1)}, {patternTensor({2, 3, 2}, 2)}});
  expectValues(l.run(referenceTactic("MatMul"), cpuPool()), {2, 2}, {14, 9, 17, 1});
}

TEST(MatMulInfer, OutputShapes) {
  auto shape = [](Dims a, Dims b) {
    TestLayer l("MatMul", {{HostTensor(DataType::kFLOAT, a)}, {HostTensor(DataType::kFLOAT, b)}});
    return l.desc.outputs[0].dims;
  };
  EXPECT_EQ(shape({3}, {3}), Dims{});
  EXPECT_EQ(shape({3}, {3, 4}), (Dims{4}));
  EXPECT_EQ(shape({2, 3}, {3}), (Dims{2}));
  EXPECT_EQ(shape({5, 1, 2, 3}, {4, 3, 6}), (Dims{5, 4, 2, 6}));
  EXPECT_EQ(shape({3}, {7, 3, 2}), (Dims{7, 2}));
}

TEST(MatMulInfer, DynamicDims) {
  LayerDesc d;
  Attributes a;
  d.name = "dyn";
  d.op = "MatMul";
  d.attrs = &a;
  d.inputs = {TensorDesc{DataType::kFLOAT, {-1, 128, 768}, {}}, TensorDesc{DataType::kFLOAT, {768, -1}, {}}};
  d.inputPresent = {true, true};
  inferLayer(d);
  EXPECT_EQ(d.outputs[0].dims, (Dims{-1, 128, -1}));
}

TEST(MatMulInfer, RejectsBadInputs) {
  auto infer = [](Dims a, Dims b, DataType ta = DataType::kFLOAT, DataType tb = DataType::kFLOAT) {
    TestLayer l("MatMul", {{HostTensor(ta, a)}, {HostTensor(tb, b)}});
  };
  EXPECT_THROW(infer({2, 3}, {4, 5}), Error);              // K mismatch
  EXPECT_THROW(infer({}, {3}), Error);                     // rank 0
  EXPECT_THROW(infer({2, 2, 3}, {3, 3, 4}), Error);        // batch not broadcastable
  EXPECT_THROW(infer({2, 3}, {3, 4}, DataType::kFLOAT, DataType::kDOUBLE), Error);
  EXPECT_THROW(infer({2, 3}, {3, 4}, DataType::kBOOL, DataType::kBOOL), Error);
  Attributes bad;
  bad.set("kiln_activation", std::string("Swishy"));
  EXPECT_THROW(TestLayer("MatMul", {{HostTensor(DataType::kFLOAT, {2, 3})}, {HostTensor(DataType::kFLOAT, {3, 4})}}, bad), Error);
  // Fused bias that does not broadcast over the output.
  EXPECT_THROW(TestLayer("MatMul", {{HostTensor(DataType::kFLOAT, {2, 3})}, {HostTensor(DataType::kFLOAT, {3, 4})},
                                    {HostTensor(DataType::kFLOAT, {5})}}),
               Error);
}

TEST(MatMulTactics, MatchReferenceOnRandomData) {
  std::mt19937 rng(1);
  struct Case { Dims a, b; bool constB; };
  const Case cases[] = {
      {{128, 768}, {768, 96}, true},   {{1, 37, 65}, {65, 33}, true},   {{1, 37, 65}, {65, 33}, false},
      {{2, 1, 5, 7}, {3, 7, 4}, false}, {{2, 1, 5, 7}, {3, 7, 4}, true}, {{12, 20, 16}, {12, 16, 20}, false},
      {{3, 9}, {9}, true},              {{9}, {9, 5}, false},            {{9}, {9}, true},
      {{4, 6, 10}, {10, 3}, false},     {{3, 10}, {2, 10, 4}, true},     {{2, 0, 5}, {5, 3}, true},
  };
  for (const Case& c : cases) {
    TestLayer l("MatMul", {{randomTensor(c.a, rng)}, {randomTensor(c.b, rng), c.constB}});
    EXPECT_GE(compareTactics(l), 1) << toString(c.a) << " x " << toString(c.b);
  }
}

TEST(MatMulTactics, FusedBiasAndActivation) {
  std::mt19937 rng(2);
  for (const char* act : {"Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSwish", "HardSigmoid", "Gelu", "GeluTanh", "Elu", "Softplus", "Silu", "Mish"}) {
    Attributes a;
    a.set("kiln_activation", std::string(act));
    a.set("kiln_act_alpha", 0.1f);
    a.set("kiln_act_beta", 0.6f);
    TestLayer l("MatMul", {{randomTensor({2, 19, 40}, rng)}, {randomTensor({40, 35}, rng), true}, {randomTensor({35}, rng), true}}, a);
    EXPECT_TRUE(hasTactic(l.desc, "matmul_f32_gemm_avx2"));
    EXPECT_GE(compareTactics(l, 1e-5f), 1) << act;
  }
}

TEST(MatMulTactics, FusedBiasReferenceMatchesSeparateOps) {
  // act(A@B + bias) computed by hand from the unfused reference product.
  std::mt19937 rng(3);
  HostTensor A = randomTensor({4, 6}, rng), B = randomTensor({6, 5}, rng), bias = randomTensor({5}, rng);
  TestLayer plain("MatMul", {{A}, {B}});
  HostTensor y = plain.run(referenceTactic("MatMul"), cpuPool());
  Attributes a;
  a.set("kiln_activation", std::string("Relu"));
  TestLayer fused("MatMul", {{A}, {B}, {bias}}, a);
  HostTensor f = fused.run(referenceTactic("MatMul"), cpuPool());
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j)
      EXPECT_FLOAT_EQ(f.as<float>()[i * 5 + j], std::max(0.f, y.as<float>()[i * 5 + j] + bias.as<float>()[j]));
}

TEST(MatMulTactics, OnednnRunsWeightsAndBatchedCases) {
  std::mt19937 rng(4);
  TestLayer w("MatMul", {{randomTensor({1, 128, 64}, rng)}, {randomTensor({64, 48}, rng), true}});
  // The onednn tactic exists only in builds with oneDNN (the test binary cannot see the define).
  if (!hasTactic(w.desc, "matmul_f32_onednn")) GTEST_SKIP() << "built without oneDNN";
  compareTactics(w);
  TestLayer bt("MatMul", {{randomTensor({2, 3, 16, 8}, rng)}, {randomTensor({2, 3, 8, 16}, rng)}});
  EXPECT_TRUE(hasTactic(bt.desc, "matmul_f32_onednn"));
  compareTactics(bt);
  Attributes a;
  a.set("kiln_activation", std::string("Gelu"));
  TestLayer fused("MatMul", {{randomTensor({7, 30}, rng)}, {randomTensor({30, 20}, rng), true}, {randomTensor({20}, rng), true}}, a);
  EXPECT_TRUE(hasTactic(fused.desc, "matmul_f32_onednn"));
  compareTactics(fused);
}

TEST(MatMulTactics, IntegerTypesUseReference) {
  HostTensor a(DataType::kINT32, {2, 2}), b(DataType::kINT32, {2, 2});
  int32_t av[] = {1, 2, 3, 4}, bv[] = {5, 6, 7, 8};
  std::memcpy(a.data(), av, sizeof av);
  std::memcpy(b.data(), bv, sizeof bv);
  TestLayer l("MatMul", {{a}, {b}});
  EXPECT_FALSE(hasTactic(l.desc, "matmul_f32_gemm_avx2"));
  HostTensor y = l.run(referenceTactic("MatMul"), cpuPool());
  const int32_t want[] = {19, 22, 43, 50};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.as<int32_t>()[i], want[i]);
}

// ---- Gemm ----

TEST(GemmRef, TransAAlphaBetaMatchNumpy) {
  Attributes a;
  a.set("transA", int64_t(1));
  a.set("alpha", 0.5f);
  a.set("beta", 2.f);
  TestLayer l("Gemm", {{patternTensor({2, 3}, 1)}, {patternTensor({2, 4}, 2)}, {patternTensor({4}, 3)}}, a);
  expectValues(l.run(referenceTactic("Gemm"), cpuPool()), {3, 4}, {13, -1.5, -10.5, 13.5, 2.5, -1.5, 0, -4, 8.5, -1.5, -6, 6});
}

TEST(GemmInfer, RejectsBadInputs) {
  auto make = [](Dims a, Dims b, Dims c, Attributes at = {}) {
    std::vector<Input> in = {{HostTensor(DataType::kFLOAT, a)}, {HostTensor(DataType::kFLOAT, b)}};
    if (!c.empty()) in.push_back({HostTensor(DataType::kFLOAT, c)});
    TestLayer l("Gemm", in, at);
  };
  EXPECT_THROW(make({2, 3, 1}, {3, 4}, {}), Error);
  EXPECT_THROW(make({2, 3}, {4, 4}, {}), Error);
  EXPECT_THROW(make({2, 3}, {3, 4}, {3, 4}), Error);  // C does not broadcast to [2,4]
  EXPECT_THROW(make({2, 3}, {3, 4}, {1, 2, 4}), Error);
  Attributes t;
  t.set("transA", int64_t(2));
  EXPECT_THROW(make({2, 3}, {3, 4}, {}, t), Error);
  EXPECT_NO_THROW(make({2, 3}, {3, 4}, {2, 1}));
}

TEST(GemmTactics, MatchReferenceOnRandomData) {
  std::mt19937 rng(6);
  struct Case { int64_t M, N, K; int ta, tb; float alpha, beta; Dims c; bool constB, constC; const char* act; };
  const Case cases[] = {
      {1, 1000, 512, 0, 1, 1.f, 1.f, {1000}, true, true, ""},
      {33, 70, 41, 1, 0, 0.7f, 1.3f, {33, 70}, true, false, "Relu"},
      {33, 70, 41, 1, 1, 1.f, 0.5f, {33, 1}, false, false, "Sigmoid"},
      {8, 17, 9, 0, 0, 2.f, 1.f, {}, true, false, "Gelu"},
      {8, 17, 9, 0, 0, 1.f, -1.f, {1}, true, true, "Clip"},
      {5, 16, 64, 0, 1, 1.f, 1.f, {1, 16}, true, true, "Tanh"},
  };
  for (const Case& c : cases) {
    Attributes a;
    a.set("transA", int64_t(c.ta));
    a.set("transB", int64_t(c.tb));
    a.set("alpha", c.alpha);
    a.set("beta", c.beta);
    if (*c.act) a.set("kiln_activation", std::string(c.act));
    a.set("kiln_act_alpha", -0.5f);
    a.set("kiln_act_beta", 0.5f);
    std::vector<Input> in = {{randomTensor(c.ta ? Dims{c.K, c.M} : Dims{c.M, c.K}, rng)},
                             {randomTensor(c.tb ? Dims{c.N, c.K} : Dims{c.K, c.N}, rng), c.constB}};
    if (!c.c.empty()) in.push_back({randomTensor(c.c, rng), c.constC});
    TestLayer l("Gemm", in, a);
    EXPECT_GE(compareTactics(l, 3e-5f), 1) << c.M << "x" << c.N << "x" << c.K;
  }
}

// ---- Einsum ----

namespace {
struct EinsumCase {
  const char* equation;
  std::vector<Dims> inputs;
  Dims out;
  std::vector<float> want;  // np.einsum on patternTensor inputs (seed = input index + 1)
};
}  // namespace

TEST(EinsumRef, MatchesNumpyEinsum) {
  const EinsumCase cases[] = {
      {"ij,jk->ik", {{2, 3}, {3, 4}}, {2, 4}, {-20, 19, -8, -24, -19, 21, -16, -20}},
      {"ij->ji", {{2, 3}}, {3, 2}, {-2, -3, 5, 4, 1, 0}},
      {"ii->i", {{3, 3}}, {3}, {-2, 4, -1}},
      {"ii", {{3, 3}}, {}, {1}},
      {"bij,bjk->bik", {{2, 2, 3}, {2, 3, 2}}, {2, 2, 2}, {14, 9, 13, 9, 5, 13, -1, 19}},
      {"...ij,...jk->...ik", {{2, 1, 2, 3}, {3, 3, 2}}, {2, 3, 2, 2},
       {14, 9, 13, 9, 17, 1, 11, 7, 9, -29, 9, -28, 12, 9, 11, 9, 5, 13, -1, 19, 9, -27, 9, -26}},
      {"i,i", {{4}, {4}}, {}, {-13}},
      {"i,j->ij", {{2}, {3}}, {2, 3}, {-2, 6, -8, 5, -15, 20}},
      {"ij,jk", {{2, 3}, {3, 2}}, {2, 2}, {14, 9, 13, 9}},
      {"ba", {{2, 3}}, {3, 2}, {-2, -3, 5, 4, 1, 0}},
      {"bii->bi", {{2, 3, 3}}, {2, 3}, {-2, 4, -1, -5, 1, -4}},
      {"ij->", {{2, 3}}, {}, {5}},
      {"...ii->...i", {{2, 3, 3}}, {2, 3}, {-2, 4, -1, -5, 1, -4}},
      {"ij,ij->ij", {{2, 1}, {2, 3}}, {2, 3}, {-2, 6, -8, 0, -20, 15}},
      {"abc,cd,be->ade", {{2, 2, 3}, {3, 2}, {2, 2}}, {2, 2, 2}, {4, 39, 0, 27, 4, 33, 0, 27}},
      {"Ab,bA", {{2, 3}, {3, 2}}, {}, {23}},
  };
  for (const EinsumCase& c : cases) {
    Attributes a;
    a.set("equation", std::string(c.equation));
    std::vector<Input> in;
    for (size_t i = 0; i < c.inputs.size(); ++i) in.push_back({patternTensor(c.inputs[i], int(i) + 1)});
    TestLayer l("Einsum", in, a);
    EXPECT_EQ(l.desc.outputs[0].dims, c.out) << c.equation;
    HostTensor y = l.run(referenceTactic("Einsum"), cpuPool());
    SCOPED_TRACE(c.equation);
    expectValues(y, c.out, c.want);
  }
}

TEST(EinsumInfer, RejectsBadEquations) {
  auto make = [](const std::string& eq, std::vector<Dims> dims) {
    Attributes a;
    a.set("equation", eq);
    std::vector<Input> in;
    for (auto& d : dims) in.push_back({HostTensor(DataType::kFLOAT, d)});
    TestLayer l("Einsum", in, a);
  };
  EXPECT_THROW(make("ij,jk->ik", {{2, 3}}), Error);             // term count
  EXPECT_THROW(make("ijk->i", {{2, 3}}), Error);                // rank mismatch
  EXPECT_THROW(make("ij->k", {{2, 3}}), Error);                 // output label not in inputs
  EXPECT_THROW(make("ij->ii", {{2, 3}}), Error);                // repeated output label
  EXPECT_THROW(make("ij,jk->ik", {{2, 3}, {4, 2}}), Error);     // j: 3 vs 4
  EXPECT_THROW(make("i1->i", {{2, 3}}), Error);                 // bad character
  EXPECT_THROW(make("..i->i", {{2}}), Error);                   // malformed ellipsis
  EXPECT_THROW(make("...i->i", {{2, 3}}), Error);               // ellipsis dims dropped
  EXPECT_THROW(make("", {{2, 3}}), Error);
}
