// CUDA elementwise family: every tactic compared with the CPU naive reference on random data
// (unary ops, Clip, broadcasting binary ops, variadic ops, Where, Cast/CastLike, Identity,
// PointwiseChain), in float32 / float16 / bfloat16 / float64 and the integer/bool types the ops take.
#include <cmath>
#include <limits>
#include <random>

#include <cuda_runtime.h>

#include "backends/cuda/elementwise_launch.cuh"
#include "op_test_util.h"
#include "ops/activation.h"
#include "reference_eval.h"

using namespace kiln;

namespace {

struct Tol {
  double rtol, atol;
};

Tol tolFor(DataType t) {
  switch (t) {
    case DataType::kFLOAT: return {2e-5, 1e-6};
    case DataType::kHALF: return {2e-3, 2e-3};
    case DataType::kBF16: return {1.6e-2, 1.6e-2};
    case DataType::kDOUBLE: return {1e-12, 1e-14};
    default: return {0, 0};
  }
}

std::shared_ptr<Backend> gpuBackend() { return getBackend(DeviceType::kGPU, 0); }

//! Runs every CUDA tactic of the case and compares all outputs with the reference.
void checkCase(Backend& gpu, const test::OpCase& c, Tol tol, const std::string& what) {
  auto names = test::tacticNames(gpu, c);
  ASSERT_FALSE(names.empty()) << what << ": no CUDA tactic";
  auto ref = test::runReference(c);
  for (const auto& n : names) {
    auto got = test::runTactic(gpu, n, c);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_EQ(got[i].type(), ref[i].type()) << what;
      test::expectClose(got[i], ref[i], tol.rtol, tol.atol, what + " [" + n + "]");
    }
  }
}

test::OpCase makeCase(const std::string& op, std::vector<HostTensor> inputs, Attributes attrs = {}) {
  test::OpCase c;
  c.op = op;
  c.attrs = std::move(attrs);
  c.inputs = std::move(inputs);
  return c;
}

HostTensor randomIn(const Dims& d, uint32_t seed, float lo, float hi, DataType t) {
  return test::convertTo(test::randomTensor(d, seed, lo, hi), t);
}

//! A tensor of any of the 13 types from doubles (integers wrap like a two's complement cast).
HostTensor typed(DataType t, const Dims& d, const std::vector<double>& v) {
  HostTensor o(t, d);
  for (int64_t i = 0; i < o.count(); ++i) {
    double x = v[static_cast<size_t>(i) % v.size()];
    int64_t xi = std::isfinite(x) && std::fabs(x) < 9e18 ? static_cast<int64_t>(x) : 0;
    switch (t) {
      case DataType::kFLOAT: o.as<float>()[i] = static_cast<float>(x); break;
      case DataType::kHALF: o.as<uint16_t>()[i] = floatToHalf(static_cast<float>(x)); break;
      case DataType::kBF16: o.as<uint16_t>()[i] = floatToBf16(static_cast<float>(x)); break;
      case DataType::kDOUBLE: o.as<double>()[i] = x; break;
      case DataType::kINT8: o.as<int8_t>()[i] = static_cast<int8_t>(xi); break;
      case DataType::kINT16: o.as<int16_t>()[i] = static_cast<int16_t>(xi); break;
      case DataType::kINT32: o.as<int32_t>()[i] = static_cast<int32_t>(xi); break;
      case DataType::kINT64: o.as<int64_t>()[i] = xi; break;
      case DataType::kUINT8: o.as<uint8_t>()[i] = static_cast<uint8_t>(xi); break;
      case DataType::kUINT16: o.as<uint16_t>()[i] = static_cast<uint16_t>(xi); break;
      case DataType::kUINT32: o.as<uint32_t>()[i] = static_cast<uint32_t>(xi); break;
      case DataType::kUINT64: o.as<uint64_t>()[i] = static_cast<uint64_t>(xi); break;
      case DataType::kBOOL: o.as<uint8_t>()[i] = x != 0; break;
    }
  }
  return o;
}

HostTensor randomInts(DataType t, const Dims& d, uint32_t seed, int lo, int hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(std::max<int64_t>(volume(d), 1)));
  for (auto& x : v) x = u(rng);
  return typed(t, d, v);
}

const DataType kFloatTypes[] = {DataType::kFLOAT, DataType::kHALF, DataType::kBF16, DataType::kDOUBLE};

std::string tn(DataType t) { return toString(t); }

}  // namespace

// ---------------------------------------------------------------------------------------------

TEST(CudaElementwise, UnaryFloatOps) {
  KILN_REQUIRE_GPU();
  auto gpu = gpuBackend();
  struct U {
    const char* op;
    float lo, hi;
    Attributes attrs;
  };
  auto attr = [](std::initializer_list<std::pair<const char*, float>> kv) {
    Attributes a;
    for (auto& [k, v] : kv) a.set(k, v);
    return a;
  };
  Attributes geluTanh;
  geluTanh.set("approximate", std::string("tanh"));
  std::vector<U> ops = {
      {"Relu", -2, 2, {}}, {"LeakyRelu", -2, 2, attr({{"alpha", 0.2f}})}, {"Elu", -3, 2, attr({{"alpha", 0.7f}})},
      {"Selu", -3, 2, {}}, {"Celu", -3, 2, attr({{"alpha", 1.5f}})}, {"Sigmoid", -6, 6, {}},
      {"HardSigmoid", -4, 4, attr({{"alpha", 0.3f}, {"beta", 0.4f}})}, {"HardSwish", -5, 5, {}}, {"Tanh", -3, 3, {}},
      {"Softplus", -8, 8, {}}, {"Softsign", -4, 4, {}}, {"Gelu", -4, 4, {}}, {"Gelu", -4, 4, geluTanh}, {"Erf", -2, 2, {}},
      {"Sqrt", 0.01f, 9, {}}, {"Exp", -4, 4, {}}, {"Log", 0.05f, 20, {}}, {"Neg", -2, 2, {}}, {"Abs", -2, 2, {}},
      {"Reciprocal", 0.5f, 4, {}}, {"Floor", -9, 9, {}}, {"Ceil", -9, 9, {}}, {"Sign", -2, 2, {}}, {"Sin", -3, 3, {}},
      {"Cos", -3, 3, {}}, {"Tan", -1.2f, 1.2f, {}}, {"Asin", -0.95f, 0.95f, {}}, {"Acos", -0.95f, 0.95f, {}},
      {"Atan", -4, 4, {}}, {"Sinh", -3, 3, {}}, {"Cosh", -3, 3, {}}, {"Asinh", -4, 4, {}}, {"Acosh", 1.05f, 6, {}},
      {"Atanh", -0.9f, 0.9f, {}}, {"Mish", -5, 5, {}}, {"ThresholdedRelu", -2, 2, attr({{"alpha", 0.3f}})},
      {"Shrink", -2, 2, attr({{"bias", 0.1f}, {"lambd", 0.4f}})}};
  const Dims shapes[] = {{5, 131}, {4, 256}};
  uint32_t seed = 1;
  for (const auto& u : ops)
    for (DataType t : kFloatTypes)
      for (const Dims& d : shapes) {
        auto c = makeCase(u.op, {randomIn(d, seed++, u.lo, u.hi, t)}, u.attrs);
        checkCase(*gpu, c, tolFor(t), std::string(u.op) + " " + tn(t) + " " + toString(d));
      }
}

TEST(CudaElementwise, UnarySpecialValues) {
  KILN_REQUIRE_GPU();
  auto gpu = gpuBackend();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> v = {0.5, -0.5, 1.5, 2.5, -2.5, 0.0, -0.0, inf, -inf, nan, 3.25, -7.0, 1e30, -1e-30, 4.5};
  Attributes negOnly;
  negOnly.set("detect_positive", int64_t(0));
  for (DataType t : kFloatTypes) {
    HostTensor x = typed(t, {3, 37}, v);
    checkCase(*gpu, makeCase("IsNaN", {x}), {0, 0}, "IsNaN " + tn(t));
    checkCase(*gpu, makeCase("IsInf", {x}), {0, 0}, "IsInf " + tn(t));
    checkCase(*gpu, makeCase("IsInf", {x}, negOnly), {0, 0}, "IsInf neg " + tn(t));
    checkCase(*gpu, makeCase("Round", {x}), {0, 0}, "Round " + tn(t));
    checkCase(*gpu, makeCase("Sign", {x}), {0, 0}, "Sign " + tn(t));
    checkCase(*gpu, makeCase("Relu", {x}), {0, 0}, "Relu " + tn(t));
  }
}

TEST(CudaElementwise, UnaryIntegerAndBoolOps) {
  KILN_REQUIRE_GPU();
  auto gpu = gpuBackend();
  const DataType sints[] = {DataType::kINT8, DataType::kINT16, DataType::kINT32, DataType::kINT64};
  const DataType uints[] = {DataType::kUINT8, DataType::kUINT16, DataType::kUINT32, DataType::kUINT64};
  Attributes shrink;
  shrink.set("bias", 1.5f);
  shrink.set("lambd", 2.f);
  uint32_t seed = 100;
  for (DataType t : sints) {
    HostTensor x = randomInts(t, {7, 33}, seed++, -128, 127);
    for (const char* op : {"Relu", "Neg", "Abs", "Sign", "Erf", "BitwiseNot"}) checkCase(*gpu, makeCase(op, {x}), {0, 0}, op + (" " + tn(t)));
    checkCase(*gpu, makeCase("Shrink", {x}, shrink), {0, 0}, "Shrink " + tn(t));
  }
  for (DataType t : uints) {
    HostTensor x = randomInts(t, {7, 33}, seed++, 0, 255);
    for (const char* op : {"Abs", "Sign", "BitwiseNot"}) checkCase(*gpu, makeCase(op, {x}), {0, 0}, op + (" " + tn(t)));
  }
  checkCase(*gpu, makeCase("Not", {randomInts(DataType::kBOOL, {3, 71}, 7, 0, 1)}), {0, 0}, "Not");
}

TEST(CudaElementwise, Clip) {
  KILN_REQUIRE_GPU();
  auto gpu = gpuBackend();
  for (DataType t : kFloatTypes) {
    HostTensor x = randomIn({6, 77}, 11, -3, 3, t);
    HostTensor lo = typed(t, {}, {-0.75}), hi = typed(t, {}, {1.25});
    checkCase(*gpu, makeCase("Clip", {x, lo, hi}), tolFor(t), "Clip " + tn(t));
    checkCase(*gpu, makeCase("Clip", {x, lo}), tolFor(t), "Clip min " + tn(t));
    checkCase(*gpu, makeCase("Clip", {x, HostTensor(), hi}), tolFor(t), "Clip max " + tn(t));
    checkCase(*gpu, makeCase("Clip", {x}), tolFor(t), "Clip none " + tn(t));
    // Bounds of another type than x.
    checkCase(*gpu, makeCase("Clip", {x, typed(DataType::kFLOAT, {1}, {-0.5}), typed(DataType::kINT64, {}, {2})}),
              tolFor(t), "Clip mixed " + tn(t));
  }
  for (DataType t : {DataType::kINT32, DataType::kINT64, DataType::kUINT8, DataType::kINT8}) {
    HostTensor x = randomInts(t, {5, 41}, 12, -100, 100);
    checkCase(*gpu, makeCase("Clip", {x, typed(t, {}, {-20}), typed(t, {}, {30})}), {0, 0}, "Clip " + tn(t));
    checkCase(*gpu, makeCase("Clip", {x, typed(DataType::kFLOAT, {}, {-7.5}), HostTensor()}), {0, 0}, "Clip f-bound " + tn(t));
  }
}

// ---------------------------------------------------------------------------------------------

namespace {

const std::vector<std::pair<Dims, Dims>>& broadcastShapes() {
  static const std::vector<std::pair<Dims, Dims>> s = {
      {{3, 37}, {3, 37}},             // same shape, odd size
      {{4, 64}, {4, 64}},             // same shape, vectorized
      {{5, 7, 9}, {}},                // scalar
      {{1}, {4, 6, 33}},              // scalar first
      {{4, 6, 32}, {32}},             // last-dim broadcast, vectorized
      {{3, 5, 31}, {31}},             // last-dim broadcast, odd
      {{2, 16, 7, 7}, {16, 1, 1}},    // channel broadcast, odd plane
      {{2, 16, 8, 8}, {16, 1, 1}},    // channel broadcast, vectorized
      {{4, 1, 5}, {1, 3, 1}},         // both sides broadcast
      {{2, 1, 3, 1, 2, 1}, {1, 2, 1, 3, 1, 2}},  // rank 6, nothing merges
      {{0, 3}, {3}},                  // empty
  };
  return s;
}

}  // namespace

TEST(CudaElementwise, BinaryArithmeticFloat) {
  KILN_REQUIRE_GPU();
  auto gpu = gpuBackend();
  Attributes fmod1;
  fmod1.set("fmod", int64_t(1));
  uint32_t seed = 200;
  for (DataType t : kFloatTypes)
    for (const auto& [da, db] : broadcastShapes()) {
      HostTensor a = randomIn(da, seed++, -4, 4, t), b = randomIn(db, seed++, 0.5f, 3, t), bs = randomIn(db, seed++, -3, 3, t);
      std::string sh = " " + tn(t) + " " + toString(da) + "x" + toString(db);
      for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "PRelu"})
        checkCase(*gpu, makeCase(op, {a, bs}), tolFor(t), op + sh);
      checkCase(*gpu, makeCase("Mod", {a, bs}), tolFor(t), "Mod" + sh);
      checkCase(*gpu, makeCase("Mod", {a, bs}, fmod1), tolFor(t), "Fmod" + sh);
      HostTensor base = randomIn(da, seed++, 0.25f, 3, t);
      checkCase(*gpu, makeCase("Pow", {base, bs}), tolFor(t), "Pow" + sh);
      checkCase(*gpu, makeCase("Div", {a, b}), tolFor(t), "Div pos" + sh);
    }
}

TEST(CudaElementwise, BinaryArithmeticInteger) {
  KILN_REQUIRE_GPU();
  auto gpu = gpuBackend();
  const DataType types[] = {DataType::kINT8, DataType::kINT16, DataType::kINT32, DataType::kINT64,
                            DataType::kUINT8, DataType::kUINT16, DataType::kUINT32, DataType::kUINT64};
  Attributes fmod1;
  fmod1.set("fmod", int64_t(1));
  uint32_t seed = 300;
  for (DataType t : types)
    for (size_t s : {size_t(0), size_t(2), size_t(4), size_t(6), size_t(8)}) {
      const auto& [da, db] = broadcastShapes()[s];
      HostTensor a = randomInts(t, da, seed++, -120, 120), b = randomInts(t, db, seed++, -3, 3);
      std::string sh = " " + tn(t) + " " + toString(da) + "x" + toString(db);
      for (const char* op : {"Add", "Sub", "Mul", "Div", "Mod", "Max", "Min", "PRelu"})
        checkCase(*gpu, makeCase(op, {a, b}), {0, 0}, op + sh);
      checkCase(*gpu, makeCase("Mod", {a, b}, fmod1), {0, 0}, "Fmod" + sh);
      HostTensor base = randomInts(t, da, seed++, -3, 3), e = randomInts(t, db, seed++, -2, 9);
      checkCase(*gpu, makeCase("Pow", {base, e}), {0, 0}, "Pow" + sh);
    }
  // Wrapping at the type's limits.
  HostTensor big = typed(DataType::kINT32, {8}, {2147483647.0, -2147483648.0, 7, -7, 100000, -1, 0, 3});
  HostTensor other = typed(DataType::kINT32, {8}, {1, -1, 0, -1, 100000, -2147483648.0, 5, -3});
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Mod"}) checkCase(*gpu, makeCase(op, {big, other}), {0, 0}, std::string(op) + " limits");
}

TEST(CudaElementwise, BroadcastAgainstDenseOperand) {
  KILN_REQUIRE_GPU();
  // Inner extents that are no multiple of the vector width (7x7 planes, 13 channels), so units of
  // 16 bytes span rows: the dense operand goes by vectors, the broadcast one element by element.
  // Squeeze-excitation scales in NCHW and NHWC, per-channel biases, the dense operand first or
  // second, the last unit partial.
  auto gpu = gpuBackend();
  const std::vector<std::pair<Dims, Dims>> shapes = {
      {{3, 24, 7, 7}, {3, 24, 1, 1}}, {{2, 7, 7, 13}, {2, 1, 1, 13}}, {{2, 5, 3, 3}, {1, 5, 1, 1}},
      {{5, 1000, 3}, {5, 1, 3}},      {{64, 320, 14, 14}, {64, 320, 1, 1}}};
  uint32_t seed = 700;
  for (const auto& [dx, ds] : shapes)
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16, DataType::kDOUBLE, DataType::kINT32, DataType::kINT8}) {
      const bool isInt = t == DataType::kINT32 || t == DataType::kINT8;
      HostTensor x = isInt ? randomInts(t, dx, seed++, -9, 9) : randomIn(dx, seed++, -4, 4, t);
      HostTensor s = isInt ? randomInts(t, ds, seed++, -9, 9) : randomIn(ds, seed++, 0.5f, 2, t);
      const std::string sh = " " + tn(t) + " " + toString(dx) + "x" + toString(ds);
      for (const char* op : {"Mul", "Add", "Sub"}) {
        checkCase(*gpu, makeCase(op, {x, s}), tolFor(t), op + sh);
        checkCase(*gpu, makeCase(op, {s, x}), tolFor(t), std::string(op) + " swapped" + sh);
      }
      if (!isInt) checkCase(*gpu, makeCase("Div", {x, s}), tolFor(t), "Div" + sh);
      checkCase(*gpu, makeCase("Less", {s, x}), {0, 0}, "Less" + sh);
      HostTensor cond = randomInts(DataType::kBOOL, ds, seed++, 0, 1);
      checkCase(*gpu, makeCase("Where", {cond, x, x}), {0, 0}, "Where" + sh);
    }
}

TEST(CudaElementwise, PowMixedTypesAndScalarExponent) {
  KILN_REQUIRE_GPU();
  auto gpu = gpuBackend();
  for (DataType t : kFloatTypes) {
    HostTensor x = randomIn({3, 45}, 400, 0.2f, 3, t);
    for (DataType e : {DataType::kFLOAT, DataType::kINT64, DataType::kINT32, DataType::kDOUBLE, t})
      for (double v : {2.0, 3.0, -1.0, 0.5})
        checkCase(*gpu, makeCase("Pow", {x, typed(e, {}, {v})}), tolFor(t), "Pow " + tn(t) + "^" + tn(e) + " " + std::to_string(v));
  }
  HostTensor xi = randomInts(DataType::kINT32, {4, 33}, 401, -5, 5);
  checkCase(*gpu, makeCase("Pow", {xi, typed(DataType::kINT64, {1}, {3})}), {0, 0}, "Pow int32^int64");
  checkCase(*gpu, makeCase("Pow", {xi, typed(DataType::kFLOAT, {}, {2.0})}), {0, 0}, "Pow int32^float");
  checkCase(*gpu, makeCase("Pow", {xi, typed(DataType::kINT32, {}, {-1})}), {0, 0}, "Pow int32^-1");
  // Non-scalar exponents of another type, broadcast (ONNX's test_pow_types_*): float bases with
  // integer/double exponents, integer bases with float and other integer exponents.
  for (DataType t : kFloatTypes) {
    HostTensor x = randomIn({3, 1, 5}, 402, 0.2f, 3, t);
    for (DataType e : {DataType::kINT32, DataType::kINT64, DataType::kUINT32, DataType::kUINT64, DataType::kDOUBLE})
      if (e != t)
        checkCase(*gpu, makeCase("Pow", {x, randomInts(e, {4, 1}, 403, 0, 4)}), tolFor(t), "Pow " + tn(t) + "^" + tn(e) + " tensor");
  }
  for (DataType b : {DataType::kINT32, DataType::kINT64}) {
    HostTensor xb = randomInts(b, {2, 7}, 404, -4, 5);
    checkCase(*gpu, makeCase("Pow", {xb, typed(DataType::kFLOAT, {7}, {0, 1, 2, 3, 4, 1, 2})}), {0, 0}, "Pow " + tn(b) + "^float tensor");
    const DataType other = b == DataType::kINT32 ? DataType::kINT64 : DataType::kINT32;
    checkCase(*gpu, makeCase("Pow", {xb, randomInts(other, {2, 7}, 405, -1, 4)}), {0, 0}, "Pow " + tn(b) + "^" + tn(other) + " tensor");
  }
}

TEST(CudaElementwise, ComparisonLogicBitwise) {
  KILN_REQUIRE_GPU();
  auto gpu = gpuBackend();
  const DataType cmpTypes[] = {DataType::kFLOAT, DataType::kHALF, DataType::kBF16, DataType::kDOUBLE, DataType::kINT32,
                               DataType::kINT64, DataType::kUINT8, DataType::kINT8, DataType::kBOOL};
  uint32_t seed = 500;
  for (DataType t : cmpTypes)
    for (size_t s : {size_t(0), size_t(2), size_t(4), size_t(6)}) {
      const auto& [da, db] = broadcastShapes()[s];
      HostTensor a = randomInts(t, da, seed++, 0, 4), b = randomInts(t, db, seed++, 0, 4);
      for (const char* op : {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"})
        checkCase(*gpu, makeCase(op, {a, b}), {0, 0}, op + (" " + tn(t) + " " + toString(da)));
    }
  for (size_t s : {size_t(0), size_t(1), size_t(4), size_t(8)}) {
    const auto& [da, db] = broadcastShapes()[s];
    HostTensor a = randomInts(DataType::kBOOL, da, seed++, 0, 1), b = randomInts(DataType::kBOOL, db, seed++, 0, 1);
    for (const char* op : {"And", "Or", "Xor"}) checkCase(*gpu, makeCase(op, {a, b}), {0, 0}, op + (" " + toString(da)));
  }
  Attributes left, right;
  left.set("direction", std::string("LEFT"));
  right.set("direction", std::string("RIGHT"));
  for (DataType t : {DataType::kUINT8, DataType::kUINT16, DataType::kUINT32, DataType::kUINT64, DataType::kINT8,
                     DataType::kINT32, DataType::kINT64})
    for (size_t s : {size_t(0), size_t(4), size_t(7)}) {
      const auto& [da, db] = broadcastShapes()[s];
      HostTensor a = randomInts(t, da, seed++, -100, 255), b = randomInts(t, db, seed++, -2, 70);
      for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"})
        checkCase(*gpu, makeCase(op, {a, b}), {0, 0}, op + (" " + tn(t)));
      checkCase(*gpu, makeCase("BitShift", {a, b}, left), {0, 0}, "BitShift left " + tn(t));
      checkCase(*gpu, makeCase("BitShift", {a, b}, right), {0, 0}, "BitShift right " + tn(t));
    }
}

TEST(CudaElementwise, VariadicAndNaN) {
  KILN_REQUIRE_GPU();
  auto gpu = gpuBackend();
  const Dims shapes[] = {{3, 8, 16}, {8, 16}, {3, 1, 16}, {1}};
  for (DataType t : kFloatTypes)
    for (size_t n = 1; n <= 4; ++n) {
      std::vector<HostTensor> ins;
      for (size_t i = 0; i < n; ++i) ins.push_back(randomIn(shapes[i], static_cast<uint32_t>(600 + i), -2, 2, t));
      for (const char* op : {"Sum", "Mean", "Max", "Min"})
        checkCase(*gpu, makeCase(op, ins), tolFor(t), op + (" " + tn(t) + " n=" + std::to_string(n)));
    }
  for (DataType t : {DataType::kINT32, DataType::kUINT8, DataType::kINT64})
    for (size_t n = 1; n <= 4; ++n) {
      std::vector<HostTensor> ins;
      for (size_t i = 0; i < n; ++i) ins.push_back(randomInts(t, shapes[i], static_cast<uint32_t>(650 + i), 0, 200));
      for (const char* op : {"Max", "Min"}) checkCase(*gpu, makeCase(op, ins), {0, 0}, op + (" " + tn(t) + " n=" + std::to_string(n)));
    }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  HostTensor a = typed(DataType::kFLOAT, {6}, {nan, 1, 2, nan, -1, 0}), b = typed(DataType::kFLOAT, {6}, {1, nan, 3, nan, -2, 0});
  for (const char* op : {"Max", "Min"}) {
    checkCase(*gpu, makeCase(op, {a, b}), {0, 0}, std::string(op) + " NaN");
    checkCase(*gpu, makeCase(op, {a, b, a}), {0, 0}, std::string(op) + " NaN 3");
  }
}

TEST(CudaElementwise, Where) {
  KILN_REQUIRE_GPU();
  auto gpu = gpuBackend();
  const DataType types[] = {DataType::kFLOAT, DataType::kHALF, DataType::kINT64, DataType::kUINT8, DataType::kBOOL, DataType::kBF16};
  uint32_t seed = 700;
  for (DataType t : types) {
    checkCase(*gpu,
              makeCase("Where", {randomInts(DataType::kBOOL, {4, 1, 32}, seed++, 0, 1), randomInts(t, {4, 5, 32}, seed++, 0, 9),
                                 randomInts(t, {32}, seed++, 0, 9)}),
              {0, 0}, "Where " + tn(t));
    checkCase(*gpu,
              makeCase("Where", {randomInts(DataType::kBOOL, {3, 7, 1}, seed++, 0, 1), randomInts(t, {1}, seed++, 0, 9),
                                 randomInts(t, {3, 7, 5}, seed++, 0, 9)}),
              {0, 0}, "Where odd " + tn(t));
  }
}

TEST(CudaElementwise, CastEveryPair) {
  KILN_REQUIRE_GPU();
  auto gpu = gpuBackend();
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> floats = {0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.7, -0.7, 127.9, -128.6, 255.5, 300.7, -300.7,
                                      65504.0, 65519.9, 65520.0, -70000.0, 1e10, -1e10, 3e38, 1e300, -1e300, 1e-8,
                                      16777217.0, 33554435.0, 4294967296.5, 9.3e18, 2e19, -9.3e18, inf, -inf, nan,
                                      1.00048828125, 1.0009765625, 257.0, 0.1};
  const std::vector<double> ints = {0, 1, -1, 127, -128, 255, 256, -129, 32767, -32768, 65535, 65536, 2147483647.0,
                                    -2147483648.0, 16777217.0, 33554435.0, 4294967295.0, 2049, 2051, 4097, 12345678, 7, -7};
  const int kNumTypes = 13;
  for (int fi = 0; fi < kNumTypes; ++fi) {
    DataType from = static_cast<DataType>(fi);
    HostTensor x = typed(from, {1027}, isFloat(from) ? floats : ints);
    if (from == DataType::kINT64) {  // values beyond double precision
      x.as<int64_t>()[0] = INT64_MAX;
      x.as<int64_t>()[1] = INT64_MIN;
      x.as<int64_t>()[2] = (int64_t(1) << 53) + 1;
      x.as<int64_t>()[3] = (int64_t(1) << 24) + 3;
    }
    if (from == DataType::kUINT64) {
      x.as<uint64_t>()[0] = UINT64_MAX;
      x.as<uint64_t>()[1] = (uint64_t(1) << 63) + 1025;
    }
    for (int ti = 0; ti < kNumTypes; ++ti) {
      DataType to = static_cast<DataType>(ti);
      Attributes a;
      a.set("to", test::onnxTypeCode(to));
      auto c = makeCase("Cast", {x}, a);
      auto ref = test::runReference(c);
      auto got = test::runTactic(*gpu, "cast_any_cuda", c);
      ASSERT_EQ(got[0].bytes(), ref[0].bytes());
      // Bit-exact except NaN payloads.
      int64_t bad = 0;
      for (int64_t i = 0; i < ref[0].count(); ++i) {
        double g = got[0].getDouble(i), r = ref[0].getDouble(i);
        bool same = (std::isnan(g) && std::isnan(r)) ||
                    std::memcmp(static_cast<const uint8_t*>(got[0].data()) + i * elementSize(to),
                                static_cast<const uint8_t*>(ref[0].data()) + i * elementSize(to), elementSize(to)) == 0;
        if (!same && bad++ < 3)
          ADD_FAILURE() << "Cast " << tn(from) << "->" << tn(to) << " element " << i << " got " << g << " expected " << r;
      }
    }
  }
  HostTensor x = randomIn({5, 19}, 800, -100, 100, DataType::kFLOAT);
  checkCase(*gpu, makeCase("CastLike", {x, typed(DataType::kHALF, {1}, {0})}), {0, 0}, "CastLike half");
  checkCase(*gpu, makeCase("CastLike", {x, typed(DataType::kINT32, {2}, {0})}), {0, 0}, "CastLike int32");
}

TEST(CudaElementwise, Identity) {
  KILN_REQUIRE_GPU();
  auto gpu = gpuBackend();
  checkCase(*gpu, makeCase("Identity", {randomInts(DataType::kINT64, {3, 17}, 900, -9, 9)}), {0, 0}, "Identity int64");
  checkCase(*gpu, makeCase("Identity", {randomIn({2, 33}, 901, -1, 1, DataType::kHALF)}), {0, 0}, "Identity half");
}

TEST(CudaElementwise, LargeTensorGridStride) {
  KILN_REQUIRE_GPU();
  auto gpu = gpuBackend();
  HostTensor a = test::randomTensor({3, 1 << 20}, 950), b = test::randomTensor({1 << 20}, 951);
  checkCase(*gpu, makeCase("Add", {a, b}), tolFor(DataType::kFLOAT), "Add large");
  checkCase(*gpu, makeCase("Sigmoid", {a}), tolFor(DataType::kFLOAT), "Sigmoid large");
  HostTensor h = test::convertTo(a, DataType::kHALF);
  checkCase(*gpu, makeCase("Cast", {h}, [] { Attributes at; at.set("to", int64_t(1)); return at; }()), {0, 0}, "Cast large");
}

TEST(CudaElementwise, PointwiseChain) {
  KILN_REQUIRE_GPU();
  auto gpu = gpuBackend();
  auto chain = [](std::vector<std::string> steps, std::vector<int64_t> operand, std::vector<int64_t> swapped,
                  std::vector<float> alpha, std::vector<float> beta) {
    Attributes a;
    a.set("steps", steps);
    a.set("operand", operand);
    a.set("swapped", swapped);
    a.set("alpha", alpha);
    a.set("beta", beta);
    return a;
  };
  Attributes a1 = chain({"Mul", "Add", "Relu", "Sub", "Sigmoid", "Div", "Max", "Clip", "Gelu", "Abs", "Pow", "Min", "Tanh"},
                        {1, 2, -1, 3, -1, 4, 3, -1, -1, -1, 2, 1, -1}, {0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0},
                        {0, 0, 0, 0, 0, 0, 0, -0.8f, 1.f, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0.9f, 0, 0, 0, 0, 0});
  Attributes a2 = chain({"Add", "HardSwish", "Mul", "LeakyRelu", "Exp", "Log", "Abs", "Sqrt", "Neg", "Elu", "Erf", "Softplus",
                         "HardSigmoid", "Reciprocal", "Floor", "Ceil", "Gelu", "Sub", "Pow"},
                        {1, -1, 2, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 1, 2},
                        {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1},
                        {0, 0, 0, 0.1f, 0, 0, 0, 0, 0, 0.5f, 0, 0, 0.2f, 0, 0, 0, 0, 0, 0},
                        {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.5f, 0, 0, 0, 0, 0, 0});
  struct S {
    Dims x;
    std::vector<Dims> ops;
  };
  const S shapes[] = {{{2, 8, 6, 8}, {{8, 1, 1}, {1}, {2, 8, 6, 8}, {8}}},
                      {{3, 5, 7}, {{5, 1}, {}, {3, 5, 7}, {7}}},
                      {{4, 64}, {{64}, {4, 1}, {1, 64}, {4, 64}}}};
  uint32_t seed = 1000;
  for (const auto& s : shapes) {
    std::vector<HostTensor> in1 = {test::randomTensor(s.x, seed++, -2, 2)};
    for (const auto& d : s.ops) in1.push_back(test::randomTensor(d, seed++, 0.5f, 1.5f));
    auto c1 = makeCase("PointwiseChain", in1, a1);
    checkCase(*gpu, c1, {2e-4, 2e-5}, "chain1 " + toString(s.x));
    std::vector<HostTensor> in2 = {test::randomTensor(s.x, seed++, -2, 2), test::randomTensor(s.ops[0], seed++, 0.5f, 1.5f),
                                   test::randomTensor(s.ops[2], seed++, 0.5f, 1.5f)};
    auto c2 = makeCase("PointwiseChain", in2, a2);
    checkCase(*gpu, c2, {2e-4, 2e-5}, "chain2 " + toString(s.x));
    // float16 / bfloat16 tensors (a reduced-precision engine's chains): the math is float32, so the
    // result is the float32 reference on the same (rounded) inputs, rounded once.
    for (DataType t : {DataType::kHALF, DataType::kBF16}) {
      for (const auto* c : {&c1, &c2}) {
        test::OpCase reduced = *c, widened = *c;
        for (size_t i = 0; i < c->inputs.size(); ++i) {
          reduced.inputs[i] = test::convertTo(c->inputs[i], t);
          widened.inputs[i] = test::convertTo(reduced.inputs[i], DataType::kFLOAT);
        }
        auto names = test::tacticNames(*gpu, reduced);
        ASSERT_EQ(names.size(), 1u) << "no CUDA chain for " << toString(t);
        auto ref = test::runReference(widened);
        auto got = test::runTactic(*gpu, names[0], reduced);
        ASSERT_EQ(got[0].type(), t);
        const Tol tol = tolFor(t);
        test::expectClose(test::convertTo(got[0], DataType::kFLOAT), ref[0], tol.rtol, tol.atol,
                          std::string("chain ") + toString(t) + " " + toString(s.x));
      }
    }
  }
}

//! The chain kernel's paths: whole 16-byte vectors with one operand offset (inner dim a multiple
//! of the vector), offsets stepped along rows that end inside a vector (NCHW 7x7 planes times a
//! per-channel scale), tails shorter than a vector, totals below one vector; float32 / float16 /
//! bfloat16; Softplus, Tanh, HardSwish, Sigmoid and Clip steps between a per-channel scale, a
//! swapped Sub by it, and full-shape (residual-like) Add / Mul operands.
TEST(CudaElementwise, PointwiseChainVectorsRowsAndTails) {
  KILN_REQUIRE_GPU();
  auto gpu = gpuBackend();
  Attributes a;  // clip(sigmoid(s - hardswish(tanh(softplus(x * s + r)) * z)) * z)
  a.set("steps", std::vector<std::string>{"Mul", "Add", "Softplus", "Tanh", "Mul", "HardSwish", "Sub", "Sigmoid", "Mul", "Clip"});
  a.set("operand", std::vector<int64_t>{1, 2, -1, -1, 3, -1, 1, -1, 3, -1});
  a.set("swapped", std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 0, 0, 0});
  a.set("alpha", std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, 0, -0.3f});
  a.set("beta", std::vector<float>{0, 0, 0, 0, 0, 0, 0, 0, 0, 0.7f});
  struct S {
    Dims x, scale;
  };
  const S shapes[] = {{{3, 24, 7, 7}, {1, 24, 1, 1}},  // rows of 49: stepped offsets
                      {{2, 16, 8, 8}, {16, 1, 1}},     // rows of 64: whole vectors
                      {{4, 12, 5, 3}, {4, 12, 1, 1}},  // per-sample, per-channel, rows of 15
                      {{5, 13}, {13}},                 // 65 elements: a tail
                      {{1, 3}, {1}},                   // fewer than one vector
                      {{1, 8003}, {8003}}};            // many vectors and a tail of 3
  uint32_t seed = 1100;
  for (const S& s : shapes) {
    const test::OpCase c = makeCase("PointwiseChain",
                                    {test::randomTensor(s.x, seed, -4, 4), test::randomTensor(s.scale, seed + 1, 0.5f, 1.5f),
                                     test::randomTensor(s.x, seed + 2, -1, 1), test::randomTensor(s.x, seed + 3, -2, 2)},
                                    a);
    seed += 4;
    checkCase(*gpu, c, {2e-4, 2e-5}, "chain " + toString(s.x));
    for (DataType t : {DataType::kHALF, DataType::kBF16}) {
      test::OpCase reduced = c, widened = c;
      for (size_t i = 0; i < c.inputs.size(); ++i) {
        reduced.inputs[i] = test::convertTo(c.inputs[i], t);
        widened.inputs[i] = test::convertTo(reduced.inputs[i], DataType::kFLOAT);
      }
      const auto names = test::tacticNames(*gpu, reduced);
      ASSERT_EQ(names.size(), 1u);
      const auto ref = test::runReference(widened);
      const auto got = test::runTactic(*gpu, names[0], reduced);
      const Tol tol = tolFor(t);
      test::expectClose(test::convertTo(got[0], DataType::kFLOAT), test::convertTo(test::convertTo(ref[0], t), DataType::kFLOAT),
                        tol.rtol, tol.atol, std::string("chain ") + toString(t) + " " + toString(s.x));
    }
  }
}

//! The one-element path: x and y off the 16-byte alignment (launchChain directly), float16.
TEST(CudaElementwise, PointwiseChainUnaligned) {
  KILN_REQUIRE_GPU();
  const Dims x{2, 8, 4, 4}, scale{1, 8, 1, 1};
  const HostTensor hx = test::convertTo(test::randomTensor(x, 1200, -3, 3), DataType::kHALF);
  const HostTensor hs = test::convertTo(test::randomTensor(scale, 1201, 0.5f, 1.5f), DataType::kHALF);
  cuda::ew::ChainProgram prog;
  prog.nSteps = 2;
  prog.steps[0].op = static_cast<int>(cuda::ew::ChainOp::kMul);
  prog.steps[0].operand = 1;
  prog.steps[1].op = static_cast<int>(cuda::ew::ChainOp::kMish);
  const cuda::ew::Geom g = cuda::ew::makeGeom(x, {x, scale});
  char *dx = nullptr, *ds = nullptr, *dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, hx.bytes() + 16), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ds, hs.bytes()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, hx.bytes() + 16), cudaSuccess);
  cudaMemcpy(dx + 2, hx.data(), hx.bytes(), cudaMemcpyHostToDevice);
  cudaMemcpy(ds, hs.data(), hs.bytes(), cudaMemcpyHostToDevice);
  const void* in[2] = {dx + 2, ds};
  cuda::ew::launchChain(prog, g, in, dy + 2, DataType::kHALF, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  HostTensor got(DataType::kHALF, x);
  cudaMemcpy(got.data(), dy + 2, got.bytes(), cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(ds);
  cudaFree(dy);
  HostTensor want(DataType::kFLOAT, x);
  const Activation mish{ActKind::kMish, 0.f, 0.f};
  for (int64_t i = 0; i < want.count(); ++i)
    want.as<float>()[i] = mish(static_cast<float>(hx.getDouble(i)) * static_cast<float>(hs.getDouble((i / 16) % 8)));
  test::expectClose(test::convertTo(got, DataType::kFLOAT), test::convertTo(test::convertTo(want, DataType::kHALF), DataType::kFLOAT),
                    1e-3, 1e-3, "unaligned chain");
}

TEST(CudaElementwise, SupportsRefusesWhatItCannotRun) {
  KILN_REQUIRE_GPU();
  auto gpu = gpuBackend();
  // A non-scalar exponent of another type than the base, outside the mixed pairs (uint8 base).
  auto pow = makeCase("Pow", {randomInts(DataType::kUINT8, {3, 4}, 1, 0, 5), randomInts(DataType::kINT64, {3, 4}, 2, 0, 3)});
  EXPECT_TRUE(test::tacticNames(*gpu, pow).empty());
  // More than 4 inputs of a variadic op.
  std::vector<HostTensor> five;
  for (int i = 0; i < 5; ++i) five.push_back(test::randomTensor({4}, static_cast<uint32_t>(i)));
  EXPECT_TRUE(test::tacticNames(*gpu, makeCase("Sum", five)).empty());
  // A broadcast that stays of rank 9 after merging dims.
  auto where = makeCase("Where", {randomInts(DataType::kBOOL, {2, 1, 2, 1, 2, 1, 2, 1, 2}, 3, 0, 1),
                                  test::randomTensor({1, 2, 1, 2, 1, 2, 1, 2, 1}, 4), test::randomTensor({1}, 5)});
  EXPECT_TRUE(test::tacticNames(*gpu, where).empty());
  // And the ordinary cases are offered.
  EXPECT_EQ(test::tacticNames(*gpu, makeCase("Relu", {test::randomTensor({4}, 6)})), std::vector<std::string>{"relu_num_cuda"});
  EXPECT_FALSE(test::tacticNames(*gpu, makeCase("Sum", {five[0], five[1], five[2], five[3]})).empty());
}
