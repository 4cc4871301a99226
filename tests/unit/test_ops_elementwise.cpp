// Elementwise op family: shape inference, reference semantics (expected values from numpy/ONNX
// rules), Cast over all type pairs, ONNX normalization, and the AVX2 tactics against the
// reference kernels on random data.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "backends/backend.h"
#include "backends/cpu/elementwise_simd.h"
#include "core/thread_pool.h"
#include "kiln/network.h"
#include "ops/activation.h"
#include "ops/op_registry.h"
#include "ops/shape_propagation.h"
#include "poison.h"
#include "tactic_names.h"

using namespace kiln;

namespace {

const DataType kAllTypes[] = {DataType::kFLOAT, DataType::kHALF,  DataType::kBF16,   DataType::kINT64, DataType::kINT32,
                              DataType::kINT8,  DataType::kUINT8, DataType::kBOOL,   DataType::kDOUBLE, DataType::kINT16,
                              DataType::kUINT16, DataType::kUINT32, DataType::kUINT64};

//! ONNX TensorProto codes of kAllTypes (same order).
const int64_t kOnnxCodes[] = {1, 10, 16, 7, 6, 3, 2, 9, 11, 5, 4, 12, 13};

template <typename T>
HostTensor tensor(DataType t, Dims d, std::vector<T> v) {
  HostTensor h(t, d);
  if (static_cast<int64_t>(v.size()) != h.count()) throw std::runtime_error("test tensor size mismatch");
  for (size_t i = 0; i < v.size(); ++i) h.as<T>()[i] = v[i];
  return h;
}
HostTensor f32(Dims d, std::vector<float> v) { return tensor<float>(DataType::kFLOAT, d, v); }
HostTensor i64(Dims d, std::vector<int64_t> v) { return tensor<int64_t>(DataType::kINT64, d, v); }
HostTensor i32(Dims d, std::vector<int32_t> v) { return tensor<int32_t>(DataType::kINT32, d, v); }
HostTensor boolT(Dims d, std::vector<uint8_t> v) { return tensor<uint8_t>(DataType::kBOOL, d, v); }

//! A layer description with inputs of the given types/dims (values attached when `withValues`).
LayerDesc describe(const std::string& op, const std::vector<HostTensor>& ins, const Attributes& attrs, bool withValues = true) {
  LayerDesc d;
  d.name = "test_" + op;
  d.op = op;
  d.attrs = &attrs;
  for (const HostTensor& t : ins) {
    d.inputPresent.push_back(t.valid());
    TensorDesc td;
    if (t.valid()) {
      td.type = t.type();
      td.dims = t.dims();
      if (withValues) td.value = t;
    }
    d.inputs.push_back(td);
  }
  return d;
}

LayerDesc inferOnly(const std::string& op, std::vector<std::pair<DataType, Dims>> ins, const Attributes& attrs = {}) {
  LayerDesc d;
  d.name = "infer_" + op;
  d.op = op;
  d.attrs = &attrs;
  for (auto& [t, dims] : ins) {
    d.inputPresent.push_back(true);
    d.inputs.push_back(TensorDesc{t, dims, {}});
  }
  inferLayer(d);
  return d;
}

//! Runs the op's reference kernel on the host (the constant-folding path).
HostTensor evalRef(const std::string& op, const std::vector<HostTensor>& ins, const Attributes& attrs = {}) {
  LayerDesc d = describe(op, ins, attrs);
  inferLayer(d);
  evaluateOnHost(d);
  return d.outputs[0].value;
}

//! Runs a tactic through its full lifecycle (create -> reshape -> execute) on the CPU pool.
HostTensor runTactic(const Tactic& tactic, const std::string& op, const std::vector<HostTensor>& ins, const Attributes& attrs) {
  LayerDesc d = describe(op, ins, attrs, false);
  inferLayer(d);
  auto kernel = tactic.create(d);
  std::unique_ptr<KernelState> state;
  size_t ws = kernel->reshape(d, state);
  std::vector<uint8_t> workspace(ws);
  KernelIO io;
  io.pool = getBackend(DeviceType::kCPU, 4)->pool();
  io.workspace = workspace.data();
  io.workspaceSize = ws;
  for (const HostTensor& t : ins)
    io.in.push_back(t.valid() ? TensorView{const_cast<void*>(t.data()), t.type(), t.dims(), t.count()} : TensorView{});
  HostTensor out = kiln::test::poisoned(d.outputs[0].type, d.outputs[0].dims);
  io.out.push_back(TensorView{out.data(), out.type(), out.dims(), out.count()});
  kernel->execute(io, state.get());
  return out;
}

std::vector<float> values(const HostTensor& t) {
  std::vector<float> v(static_cast<size_t>(t.count()));
  for (int64_t i = 0; i < t.count(); ++i) v[i] = static_cast<float>(t.getDouble(i));
  return v;
}

void expectClose(const HostTensor& got, const HostTensor& want, double atol, double rtol, const std::string& what) {
  ASSERT_EQ(got.type(), want.type()) << what;
  ASSERT_EQ(got.dims(), want.dims()) << what;
  int bad = 0;
  for (int64_t i = 0; i < got.count() && bad < 5; ++i) {
    double g = got.getDouble(i), w = want.getDouble(i);
    bool ok = (std::isnan(g) && std::isnan(w)) || g == w || std::fabs(g - w) <= atol + rtol * std::fabs(w);
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << " element " << i << ": got " << g << ", want " << w;
    }
  }
}

HostTensor randomFloats(Dims d, float lo, float hi, uint32_t seed) {
  HostTensor t(DataType::kFLOAT, d);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.count(); ++i) t.as<float>()[i] = u(rng);
  return t;
}

const Tactic* findTactic(const std::vector<Tactic>& ts, const std::string& name) {
  for (auto& t : ts)
    if (t.name == name) return &t;
  return nullptr;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Shape inference.

TEST(ElementwiseInfer, UnaryKeepsShapeAndType) {
  auto d = inferOnly("Relu", {{DataType::kFLOAT, {2, -1, 5}}});
  EXPECT_EQ(d.outputs[0].dims, (Dims{2, -1, 5}));
  EXPECT_EQ(d.outputs[0].type, DataType::kFLOAT);
  EXPECT_EQ(inferOnly("Sigmoid", {{DataType::kHALF, {3}}}).outputs[0].type, DataType::kHALF);
  EXPECT_EQ(inferOnly("IsNaN", {{DataType::kFLOAT, {3}}}).outputs[0].type, DataType::kBOOL);
  EXPECT_EQ(inferOnly("Abs", {{DataType::kUINT16, {}}}).outputs[0].dims, Dims{});
}

TEST(ElementwiseInfer, BinaryBroadcasts) {
  EXPECT_EQ(inferOnly("Add", {{DataType::kFLOAT, {2, 3, 4}}, {DataType::kFLOAT, {4}}}).outputs[0].dims, (Dims{2, 3, 4}));
  EXPECT_EQ(inferOnly("Mul", {{DataType::kFLOAT, {5, 1, 4}}, {DataType::kFLOAT, {3, 1}}}).outputs[0].dims, (Dims{5, 3, 4}));
  EXPECT_EQ(inferOnly("Sub", {{DataType::kINT64, {-1, 3}}, {DataType::kINT64, {1, 3}}}).outputs[0].dims, (Dims{-1, 3}));
  EXPECT_EQ(inferOnly("Div", {{DataType::kFLOAT, {}}, {DataType::kFLOAT, {0, 2}}}).outputs[0].dims, (Dims{0, 2}));
  auto eq = inferOnly("Less", {{DataType::kINT32, {2, 1}}, {DataType::kINT32, {1, 7}}});
  EXPECT_EQ(eq.outputs[0].type, DataType::kBOOL);
  EXPECT_EQ(eq.outputs[0].dims, (Dims{2, 7}));
  EXPECT_EQ(inferOnly("Pow", {{DataType::kINT64, {3}}, {DataType::kFLOAT, {}}}).outputs[0].type, DataType::kINT64);
}

TEST(ElementwiseInfer, VariadicWhereClipCast) {
  auto m = inferOnly("Max", {{DataType::kFLOAT, {3, 1}}, {DataType::kFLOAT, {1, 4}}, {DataType::kFLOAT, {2, 1, 1}}});
  EXPECT_EQ(m.outputs[0].dims, (Dims{2, 3, 4}));
  auto w = inferOnly("Where", {{DataType::kBOOL, {2, 1}}, {DataType::kHALF, {3}}, {DataType::kHALF, {1}}});
  EXPECT_EQ(w.outputs[0].dims, (Dims{2, 3}));
  EXPECT_EQ(w.outputs[0].type, DataType::kHALF);
  EXPECT_EQ(inferOnly("Clip", {{DataType::kFLOAT, {4, 4}}, {DataType::kFLOAT, {}}, {DataType::kFLOAT, {}}}).outputs[0].dims, (Dims{4, 4}));
  Attributes to;
  to.set("to", int64_t(10));
  auto c = inferOnly("Cast", {{DataType::kINT32, {2, 3}}}, to);
  EXPECT_EQ(c.outputs[0].type, DataType::kHALF);
  EXPECT_EQ(inferOnly("CastLike", {{DataType::kINT32, {5}}, {DataType::kBF16, {1}}}).outputs[0].type, DataType::kBF16);
  EXPECT_EQ(inferOnly("Identity", {{DataType::kUINT64, {1, 2}}}).outputs[0].type, DataType::kUINT64);
}

TEST(ElementwiseInfer, InvalidInputsThrow) {
  EXPECT_THROW(inferOnly("Add", {{DataType::kFLOAT, {2, 3}}, {DataType::kFLOAT, {4}}}), Error);    // not broadcastable
  EXPECT_THROW(inferOnly("Add", {{DataType::kFLOAT, {2}}, {DataType::kINT64, {2}}}), Error);       // mixed types
  EXPECT_THROW(inferOnly("Add", {{DataType::kFLOAT, {2}}}), Error);                                // one input
  EXPECT_THROW(inferOnly("Relu", {{DataType::kUINT8, {2}}}), Error);                               // type not allowed
  EXPECT_THROW(inferOnly("Sqrt", {{DataType::kINT32, {2}}}), Error);
  EXPECT_THROW(inferOnly("And", {{DataType::kFLOAT, {2}}, {DataType::kFLOAT, {2}}}), Error);
  EXPECT_THROW(inferOnly("BitShift", {{DataType::kFLOAT, {2}}, {DataType::kFLOAT, {2}}}), Error);
  EXPECT_THROW(inferOnly("Where", {{DataType::kFLOAT, {2}}, {DataType::kFLOAT, {2}}, {DataType::kFLOAT, {2}}}), Error);
  EXPECT_THROW(inferOnly("Clip", {{DataType::kFLOAT, {2}}, {DataType::kFLOAT, {2}}}), Error);      // non-scalar min
  EXPECT_THROW(inferOnly("Cast", {{DataType::kFLOAT, {2}}}), Error);                               // no 'to'
  Attributes bad;
  bad.set("approximate", std::string("sigmoid"));
  EXPECT_THROW(inferOnly("Gelu", {{DataType::kFLOAT, {2}}}, bad), Error);
  Attributes fmod;
  fmod.set("fmod", int64_t(2));
  EXPECT_THROW(inferOnly("Mod", {{DataType::kINT32, {2}}, {DataType::kINT32, {2}}}, fmod), Error);
  Attributes dir;
  dir.set("direction", std::string("UP"));
  EXPECT_THROW(inferOnly("BitShift", {{DataType::kUINT8, {2}}, {DataType::kUINT8, {2}}}, dir), Error);
  Attributes to;
  to.set("to", int64_t(99));
  EXPECT_THROW(inferOnly("Cast", {{DataType::kFLOAT, {2}}}, to), Error);
  to.set("to", int64_t(8));  // string: valid ONNX, unsupported by kiln
  EXPECT_THROW(inferOnly("Cast", {{DataType::kFLOAT, {2}}}, to), UnsupportedError);
  EXPECT_THROW(evalRef("Add", {f32({int64_t(1) << 40}, {}), f32({int64_t(1) << 40}, {})}), Error);  // absurd size
}

// ---------------------------------------------------------------------------------------------
// Reference semantics. Expected values follow numpy (C division for integer Div, as ONNX's tests).

TEST(ElementwiseRef, BroadcastArithmetic) {
  auto y = evalRef("Add", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3}, {10, 20, 30})});
  EXPECT_EQ(values(y), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  y = evalRef("Sub", {f32({2, 1}, {1, 2}), f32({1, 3}, {1, 2, 3})});
  EXPECT_EQ(values(y), (std::vector<float>{0, -1, -2, 1, 0, -1}));
  y = evalRef("Mul", {f32({}, {2}), f32({2, 2}, {1, 2, 3, 4})});
  EXPECT_EQ(values(y), (std::vector<float>{2, 4, 6, 8}));
}

TEST(ElementwiseRef, IntegerDivModPowShift) {
  auto div = evalRef("Div", {i32({5}, {7, -7, 7, -7, 5}), i32({5}, {2, 2, -2, -2, 0})});
  EXPECT_EQ(div.toInts(), (std::vector<int64_t>{3, -3, -3, 3, 0}));  // truncation; x/0 -> 0 (no trap)
  auto mn = evalRef("Div", {i32({1}, {std::numeric_limits<int32_t>::min()}), i32({1}, {-1})});
  EXPECT_EQ(mn.toInts()[0], std::numeric_limits<int32_t>::min());  // wraps like numpy
  auto mod = evalRef("Mod", {i64({4}, {7, -7, 7, -7}), i64({4}, {3, 3, -3, -3})});
  EXPECT_EQ(mod.toInts(), (std::vector<int64_t>{1, 2, -2, -1}));  // numpy.mod (sign of divisor)
  Attributes fm;
  fm.set("fmod", int64_t(1));
  auto fmod = evalRef("Mod", {i64({4}, {7, -7, 7, -7}), i64({4}, {3, 3, -3, -3})}, fm);
  EXPECT_EQ(fmod.toInts(), (std::vector<int64_t>{1, -1, 1, -1}));  // C fmod (sign of dividend)
  auto fmodF = evalRef("Mod", {f32({2}, {5.5f, -5.5f}), f32({2}, {2.f, 2.f})}, fm);
  EXPECT_EQ(values(fmodF), (std::vector<float>{1.5f, -1.5f}));
  auto pw = evalRef("Pow", {i64({4}, {2, 3, -2, 2}), i64({4}, {10, 3, 3, -1})});
  EXPECT_EQ(pw.toInts(), (std::vector<int64_t>{1024, 27, -8, 0}));
  auto pwf = evalRef("Pow", {i64({3}, {1, 2, 3}), f32({3}, {4.f, 5.f, 0.5f})});
  EXPECT_EQ(pwf.toInts(), (std::vector<int64_t>{1, 32, 1}));  // pow in double, truncated to int64
  auto pff = evalRef("Pow", {f32({2}, {2.f, 9.f}), i32({2}, {-1, 2})});
  EXPECT_EQ(values(pff), (std::vector<float>{0.5f, 81.f}));
  Attributes left;
  left.set("direction", std::string("LEFT"));
  auto sh = evalRef("BitShift", {tensor<uint8_t>(DataType::kUINT8, {3}, {1, 0x81, 3}), tensor<uint8_t>(DataType::kUINT8, {3}, {3, 1, 8})}, left);
  EXPECT_EQ(sh.toInts(), (std::vector<int64_t>{8, 2, 0}));
  Attributes right;
  right.set("direction", std::string("RIGHT"));
  auto sr = evalRef("BitShift", {i32({4}, {-8, -1, 64, -5}), i32({4}, {1, 40, 2, -1})}, right);
  EXPECT_EQ(sr.toInts(), (std::vector<int64_t>{-4, -1, 16, -1}));  // arithmetic; out of range -> sign fill
  auto add8 = evalRef("Add", {tensor<int8_t>(DataType::kINT8, {1}, {127}), tensor<int8_t>(DataType::kINT8, {1}, {1})});
  EXPECT_EQ(add8.toInts()[0], -128);
  auto mul16 = evalRef("Mul", {tensor<uint16_t>(DataType::kUINT16, {1}, {65535}), tensor<uint16_t>(DataType::kUINT16, {1}, {65535})});
  EXPECT_EQ(mul16.toInts()[0], 1);  // 65535^2 mod 2^16
}

TEST(ElementwiseRef, ComparisonLogicWhere) {
  auto lt = evalRef("Less", {f32({3}, {1, 2, 3}), f32({}, {2})});
  EXPECT_EQ(lt.type(), DataType::kBOOL);
  EXPECT_EQ(lt.toInts(), (std::vector<int64_t>{1, 0, 0}));
  auto ge = evalRef("GreaterOrEqual", {i64({3}, {1, 2, 3}), i64({}, {2})});
  EXPECT_EQ(ge.toInts(), (std::vector<int64_t>{0, 1, 1}));
  auto x = evalRef("Xor", {boolT({2, 2}, {0, 0, 1, 1}), boolT({2}, {0, 1})});
  EXPECT_EQ(x.toInts(), (std::vector<int64_t>{0, 1, 1, 0}));
  auto w = evalRef("Where", {boolT({2, 1}, {1, 0}), i64({3}, {1, 2, 3}), i64({}, {-1})});
  EXPECT_EQ(w.toInts(), (std::vector<int64_t>{1, 2, 3, -1, -1, -1}));
  auto n = evalRef("Not", {boolT({2}, {0, 1})});
  EXPECT_EQ(n.toInts(), (std::vector<int64_t>{1, 0}));
  auto bw = evalRef("BitwiseXor", {i32({2}, {0b1100, -1}), i32({2}, {0b1010, 5})});
  EXPECT_EQ(bw.toInts(), (std::vector<int64_t>{0b0110, -6}));
  auto bn = evalRef("BitwiseNot", {tensor<uint8_t>(DataType::kUINT8, {2}, {0, 0x0f})});
  EXPECT_EQ(bn.toInts(), (std::vector<int64_t>{255, 0xf0}));
}

TEST(ElementwiseRef, VariadicAndClip) {
  auto mx = evalRef("Max", {f32({3}, {1, 5, NAN}), f32({3}, {4, 2, 0}), f32({}, {3})});
  auto v = values(mx);
  EXPECT_EQ(v[0], 4.f);
  EXPECT_EQ(v[1], 5.f);
  EXPECT_TRUE(std::isnan(v[2]));  // numpy.maximum propagates NaN
  auto mean = evalRef("Mean", {f32({2}, {1, 2}), f32({2}, {3, 4}), f32({1}, {5})});
  EXPECT_EQ(values(mean), (std::vector<float>{3.f, 11.f / 3.f}));
  auto mn = evalRef("Min", {i32({2}, {1, -5})});
  EXPECT_EQ(mn.toInts(), (std::vector<int64_t>{1, -5}));
  auto clip = evalRef("Clip", {f32({4}, {-2, 0.5f, 3, 9}), f32({}, {0}), f32({}, {2})});
  EXPECT_EQ(values(clip), (std::vector<float>{0, 0.5f, 2, 2}));
  auto clipMax = evalRef("Clip", {i64({3}, {-5, 0, 5}), HostTensor(), i64({}, {1})});
  EXPECT_EQ(clipMax.toInts(), (std::vector<int64_t>{-5, 0, 1}));
}

TEST(ElementwiseRef, ActivationValues) {
  // Values from numpy / the ONNX operator definitions.
  auto x = f32({5}, {-2.f, -0.5f, 0.f, 0.5f, 2.f});
  expectClose(evalRef("Sigmoid", {x}), f32({5}, {0.11920292f, 0.37754067f, 0.5f, 0.62245933f, 0.88079708f}), 1e-7, 1e-6, "Sigmoid");
  expectClose(evalRef("Gelu", {x}), f32({5}, {-0.04550026f, -0.15426877f, 0.f, 0.34573123f, 1.95449974f}), 1e-7, 1e-6, "Gelu");
  Attributes tanhApprox;
  tanhApprox.set("approximate", std::string("tanh"));
  expectClose(evalRef("Gelu", {x}, tanhApprox), f32({5}, {-0.04540231f, -0.15428599f, 0.f, 0.34571401f, 1.95459769f}), 1e-7, 1e-6,
              "GeluTanh");
  expectClose(evalRef("Softplus", {x}), f32({5}, {0.12692801f, 0.47407698f, 0.69314718f, 0.97407698f, 2.12692801f}), 1e-7, 1e-6,
              "Softplus");
  expectClose(evalRef("Selu", {x}), f32({5}, {-1.52016647f, -0.69175819f, 0.f, 0.52535051f, 2.10140204f}), 1e-7, 1e-6, "Selu");
  expectClose(evalRef("HardSwish", {x}), f32({5}, {-0.33333333f, -0.20833333f, 0.f, 0.29166667f, 1.66666667f}), 1e-7, 1e-6,
              "HardSwish");
  expectClose(evalRef("Mish", {x}), f32({5}, {-0.25250148f, -0.22074377f, 0.f, 0.37524521f, 1.94395896f}), 1e-7, 1e-6, "Mish");
  Attributes shrink;
  shrink.set("lambd", 1.f);
  shrink.set("bias", 0.5f);
  EXPECT_EQ(values(evalRef("Shrink", {x}, shrink)), (std::vector<float>{-1.5f, 0, 0, 0, 1.5f}));
  EXPECT_EQ(values(evalRef("Round", {f32({5}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f})})), (std::vector<float>{0, 2, 2, -0.f, -2}));
  EXPECT_EQ(values(evalRef("Sign", {i32({3}, {-7, 0, 3})})), (std::vector<float>{-1, 0, 1}));
  Attributes posOnly;
  posOnly.set("detect_negative", int64_t(0));
  auto inf = evalRef("IsInf", {f32({3}, {INFINITY, -INFINITY, 1.f})}, posOnly);
  EXPECT_EQ(inf.toInts(), (std::vector<int64_t>{1, 0, 0}));
}

TEST(ElementwiseRef, HalfInputsAreComputedThroughFloat) {
  HostTensor a(DataType::kHALF, {3}), b(DataType::kHALF, {1});
  for (int i = 0; i < 3; ++i) a.as<uint16_t>()[i] = floatToHalf(static_cast<float>(i) + 0.5f);
  b.as<uint16_t>()[0] = floatToHalf(2.f);
  auto y = evalRef("Mul", {a, b});
  ASSERT_EQ(y.type(), DataType::kHALF);
  EXPECT_EQ(values(y), (std::vector<float>{1.f, 3.f, 5.f}));
  auto w = evalRef("Where", {boolT({3}, {1, 0, 1}), a, b});
  EXPECT_EQ(values(w), (std::vector<float>{0.5f, 2.f, 2.5f}));
}

// ---------------------------------------------------------------------------------------------
// Cast over all type pairs.

TEST(ElementwiseCast, SmallIntegersRoundTripBetweenAllPairs) {
  // 0, 1, 2, 7, 100 are exact in every type (bool: nonzero -> true -> 1).
  const std::vector<double> vals = {0, 1, 2, 7, 100};
  for (size_t s = 0; s < std::size(kAllTypes); ++s) {
    HostTensor src(kAllTypes[s], {5});
    HostTensor f = f32({5}, {0, 1, 2, 7, 100});
    Attributes toSrc;
    toSrc.set("to", kOnnxCodes[s]);
    src = evalRef("Cast", {f}, toSrc);  // float32 -> every type (itself checked below)
    for (size_t d = 0; d < std::size(kAllTypes); ++d) {
      Attributes to;
      to.set("to", kOnnxCodes[d]);
      HostTensor y = evalRef("Cast", {src}, to);
      ASSERT_EQ(y.type(), kAllTypes[d]);
      for (int i = 0; i < 5; ++i) {
        double want = vals[i];
        if (kAllTypes[s] == DataType::kBOOL || kAllTypes[d] == DataType::kBOOL) want = want != 0 ? 1 : 0;
        EXPECT_EQ(y.getDouble(i), want) << toString(kAllTypes[s]) << " -> " << toString(kAllTypes[d]) << " value " << vals[i];
      }
      HostTensor like = evalRef("CastLike", {src, HostTensor(kAllTypes[d], {1})});
      EXPECT_EQ(0, std::memcmp(like.data(), y.data(), y.bytes())) << "CastLike " << toString(kAllTypes[d]);
    }
  }
}

namespace {
HostTensor castTo(const HostTensor& x, int64_t onnxCode) {
  Attributes to;
  to.set("to", onnxCode);
  return evalRef("Cast", {x}, to);
}
double halfValue(const HostTensor& t, int64_t i) { return halfToFloat(t.as<uint16_t>()[i]); }
double bf16Value(const HostTensor& t, int64_t i) { return bf16ToFloat(t.as<uint16_t>()[i]); }
}  // namespace

TEST(ElementwiseCast, FloatToIntegerAndBool) {
  EXPECT_EQ(castTo(f32({4}, {2.7f, -2.7f, 0.4f, -0.9f}), 6).toInts(), (std::vector<int64_t>{2, -2, 0, 0}));  // truncation
  EXPECT_EQ(castTo(f32({4}, {0.f, -0.f, 0.5f, NAN}), 9).toInts(), (std::vector<int64_t>{0, 0, 1, 1}));    // NaN -> true
  HostTensor h(DataType::kHALF, {2});
  h.as<uint16_t>()[0] = floatToHalf(2.5f);
  h.as<uint16_t>()[1] = floatToHalf(-3.75f);
  EXPECT_EQ(castTo(h, 7).toInts(), (std::vector<int64_t>{2, -3}));
  EXPECT_EQ(castTo(boolT({2}, {1, 0}), 11).getDouble(0), 1.0);
  // Out-of-range float -> int is undefined in ONNX: kiln gives a value, never a trap.
  EXPECT_NO_THROW(castTo(f32({3}, {1e30f, -INFINITY, NAN}), 3));
}

TEST(ElementwiseCast, IntegerNarrowingKeepsLowBits) {
  // ONNX: "200 (int16) -> -56 (int8)"; numpy astype wraps the same way.
  EXPECT_EQ(castTo(tensor<int16_t>(DataType::kINT16, {2}, {200, 300}), 3).toInts(), (std::vector<int64_t>{-56, 44}));
  EXPECT_EQ(castTo(i32({1}, {-1}), 4).toInts()[0], 65535);
  auto u = castTo(i64({1}, {-1}), 13);
  EXPECT_EQ(u.as<uint64_t>()[0], std::numeric_limits<uint64_t>::max());
  EXPECT_FLOAT_EQ(static_cast<float>(castTo(u, 1).getDouble(0)), 1.8446744e19f);
  EXPECT_TRUE(std::isinf(castTo(u, 10).getDouble(0) == 0 ? 0.0 : halfValue(castTo(u, 10), 0)));
}

TEST(ElementwiseCast, HalfAndBf16RoundToNearestEven) {
  auto h = castTo(f32({6}, {2049.f, 2051.f, 65519.f, 65520.f, 1e-8f, 3e-8f}), 10);
  EXPECT_EQ(halfValue(h, 0), 2048.0);
  EXPECT_EQ(halfValue(h, 1), 2052.0);
  EXPECT_EQ(halfValue(h, 2), 65504.0);
  EXPECT_TRUE(std::isinf(halfValue(h, 3)));
  EXPECT_EQ(halfValue(h, 4), 0.0);
  EXPECT_EQ(halfValue(h, 5), std::ldexp(1.0, -24));  // smallest subnormal
  // double -> half rounds once: 1 + 2^-11 + 2^-40 is above the midpoint (through float it would tie).
  auto hd = castTo(tensor<double>(DataType::kDOUBLE, {3}, {1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40),
                                                          1.0 + std::ldexp(1.0, -11), 1e300}), 10);
  EXPECT_EQ(halfValue(hd, 0), 1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(halfValue(hd, 1), 1.0);
  EXPECT_TRUE(std::isinf(halfValue(hd, 2)));
  auto b = castTo(f32({3}, {1.00390625f, 1.01171875f, NAN}), 16);
  EXPECT_EQ(bf16Value(b, 0), 1.0);
  EXPECT_EQ(bf16Value(b, 1), 1.015625);
  EXPECT_TRUE(std::isnan(bf16Value(b, 2)));
  auto bi = castTo(i64({3}, {257, 259, (int64_t(1) << 40) + (int64_t(1) << 32) + 1}), 16);
  EXPECT_EQ(bf16Value(bi, 0), 256.0);
  EXPECT_EQ(bf16Value(bi, 1), 260.0);
  EXPECT_EQ(bf16Value(bi, 2), std::ldexp(1.0, 40) + std::ldexp(1.0, 33));
  // half <-> bf16 go through float exactly where representable.
  HostTensor hh(DataType::kHALF, {1});
  hh.as<uint16_t>()[0] = floatToHalf(0.1f);
  EXPECT_EQ(bf16Value(castTo(hh, 16), 0), static_cast<double>(bf16ToFloat(floatToBf16(halfToFloat(hh.as<uint16_t>()[0])))));
}

TEST(ElementwiseCast, AnyTypeFlags) {
  for (const char* op : {"Cast", "CastLike", "Identity", "Where"}) EXPECT_TRUE(OpRegistry::instance().find(op)->anyType) << op;
  for (const char* op : {"Add", "Relu", "Clip", "Max"}) EXPECT_FALSE(OpRegistry::instance().find(op)->anyType) << op;
}

// ---------------------------------------------------------------------------------------------
// ONNX normalization of older opsets.

TEST(ElementwiseNormalize, ClipAttributesBecomeInputs) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {4});
  Attributes a;
  a.set("min", -1.f);
  a.set("max", 1.f);
  Layer* l = net.addLayer("Clip", {x}, 1, a);
  OpRegistry::instance().find("Clip")->normalize(net, *l, 6);
  ASSERT_EQ(l->inputs.size(), 3u);
  EXPECT_FALSE(l->attrs.has("min"));
  EXPECT_EQ(l->inputs[1]->value.getDouble(0), -1.0);
  EXPECT_EQ(l->inputs[2]->value.getDouble(0), 1.0);
  Attributes onlyMax;
  onlyMax.set("max", 6.f);
  Layer* m = net.addLayer("Clip", {x}, 1, onlyMax);
  OpRegistry::instance().find("Clip")->normalize(net, *m, 6);
  ASSERT_EQ(m->inputs.size(), 3u);
  EXPECT_EQ(m->inputs[1], nullptr);
  EXPECT_EQ(m->inputs[2]->value.getDouble(0), 6.0);
}

TEST(ElementwiseNormalize, LegacyBroadcastAxisReshapesB) {
  Network net;
  Tensor* a = net.addInput("a", DataType::kFLOAT, {2, 3, 4, 5});
  Tensor* b = net.addConstant("b", f32({3}, {1, 2, 3}));
  Attributes attrs;
  attrs.set("broadcast", int64_t(1));
  attrs.set("axis", int64_t(1));
  Layer* l = net.addLayer("Add", {a, b}, 1, attrs);
  OpRegistry::instance().find("Add")->normalize(net, *l, 6);
  EXPECT_FALSE(l->attrs.has("axis"));
  EXPECT_EQ(l->inputs[1]->dims, (Dims{3, 1, 1}));
  net.markOutput(l->outputs[0]);
  net.inferShapes();
  EXPECT_EQ(l->outputs[0]->dims, (Dims{2, 3, 4, 5}));
}

TEST(ElementwiseNormalize, CastStringTarget) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {2});
  Attributes a;
  a.set("to", std::string("INT64"));
  Layer* l = net.addLayer("Cast", {x}, 1, a);
  OpRegistry::instance().find("Cast")->normalize(net, *l, 1);
  EXPECT_EQ(l->attrs.getInt("to", 0), 7);
  a.set("to", std::string("NOPE"));
  Layer* bad = net.addLayer("Cast", {x}, 1, a);
  EXPECT_THROW(OpRegistry::instance().find("Cast")->normalize(net, *bad, 1), Error);
}

// ---------------------------------------------------------------------------------------------
// Optimized tactics against the reference kernels.

namespace {
struct UnaryCase {
  const char* op;
  float lo, hi;
  std::vector<std::pair<std::string, AttrValue>> attrs;
};

const std::vector<UnaryCase>& unaryCases() {
  static const std::vector<UnaryCase> c = {
      {"Relu", -5, 5, {}}, {"LeakyRelu", -5, 5, {{"alpha", 0.1f}}}, {"Elu", -8, 5, {{"alpha", 0.7f}}},
      {"Selu", -8, 5, {}}, {"Celu", -8, 5, {{"alpha", 1.5f}}}, {"Sigmoid", -30, 30, {}},
      {"HardSigmoid", -6, 6, {{"alpha", 0.3f}, {"beta", 0.4f}}}, {"HardSwish", -6, 6, {}}, {"Tanh", -12, 12, {}},
      {"Tanh", -0.7f, 0.7f, {}}, {"Softplus", -30, 30, {}}, {"Softsign", -10, 10, {}}, {"Gelu", -8, 8, {}},
      {"Gelu", -8, 8, {{"approximate", std::string("tanh")}}}, {"ThresholdedRelu", -3, 3, {{"alpha", 0.5f}}},
      {"Mish", -20, 20, {}}, {"Abs", -5, 5, {}}, {"Neg", -5, 5, {}}, {"Sqrt", 0, 100, {}}, {"Exp", -100, 100, {}},
      {"Exp", -2, 2, {}}, {"Reciprocal", 0.01f, 10, {}}, {"Floor", -10, 10, {}}, {"Ceil", -10, 10, {}},
      {"Round", -10, 10, {}}};
  return c;
}
}  // namespace

TEST(ElementwiseTactic, UnaryAvx2MatchesReference) {
  auto backend = getBackend(DeviceType::kCPU, 4);
  const std::vector<Dims> shapes = {{1}, {7}, {3, 5, 17}, {2, 64, 129}, {70001}};
  uint32_t seed = 1;
  for (const auto& c : unaryCases()) {
    Attributes attrs;
    for (auto& [k, v] : c.attrs) attrs.set(k, v);
    for (const Dims& dims : shapes) {
      HostTensor x = randomFloats(dims, c.lo, c.hi, seed++);
      LayerDesc d = describe(c.op, {x}, attrs, false);
      inferLayer(d);
      auto tactics = backend->tactics(d);
      const Tactic* avx = findTactic(tactics, kiln::test::f32Avx2(d.op));
      ASSERT_NE(avx, nullptr) << c.op;
      HostTensor got = runTactic(*avx, c.op, {x}, attrs);
      HostTensor want = runTactic(referenceTactic(c.op), c.op, {x}, attrs);
      expectClose(got, want, 2e-6, 4e-6, std::string(c.op) + " " + toString(dims));
    }
  }
}

TEST(ElementwiseTactic, UnarySpecialValues) {
  auto backend = getBackend(DeviceType::kCPU, 2);
  HostTensor x = f32({12}, {0.f, -0.f, INFINITY, -INFINITY, NAN, 88.5f, 89.f, -87.f, -90.f, -104.f, 1e-30f, -1e-6f});
  for (const char* op : {"Exp", "Sigmoid", "Tanh", "Softplus", "Relu", "Gelu", "Abs", "Neg", "Elu", "Selu", "Celu", "Mish"}) {
    Attributes attrs;
    LayerDesc d = describe(op, {x}, attrs, false);
    inferLayer(d);
    auto tactics = backend->tactics(d);
    const Tactic* avx = findTactic(tactics, kiln::test::f32Avx2(d.op));
    ASSERT_NE(avx, nullptr) << op;
    HostTensor got = runTactic(*avx, op, {x}, attrs);
    HostTensor want = runTactic(referenceTactic(op), op, {x}, attrs);
    expectClose(got, want, 1e-37, 4e-6, op);
  }
}

TEST(ElementwiseTactic, ClipReadsBoundsAtRunTime) {
  auto backend = getBackend(DeviceType::kCPU, 4);
  HostTensor x = randomFloats({1000}, -3, 3, 42);
  for (auto bounds : std::vector<std::pair<HostTensor, HostTensor>>{{f32({}, {-1}), f32({}, {2})},
                                                                    {HostTensor(), f32({}, {0.5f})},
                                                                    {f32({1}, {0.25f}), HostTensor()}}) {
    std::vector<HostTensor> ins = {x, bounds.first, bounds.second};
    Attributes attrs;
    LayerDesc d = describe("Clip", ins, attrs, false);
    inferLayer(d);
    auto tactics = backend->tactics(d);
    const Tactic* avx = findTactic(tactics, kiln::test::f32Avx2(d.op));
    ASSERT_NE(avx, nullptr);
    expectClose(runTactic(*avx, "Clip", ins, attrs), runTactic(referenceTactic("Clip"), "Clip", ins, attrs), 0, 0, "Clip");
  }
}

TEST(ElementwiseTactic, BinaryAvx2MatchesReferenceForBroadcastPatterns) {
  auto backend = getBackend(DeviceType::kCPU, 4);
  const std::vector<std::pair<Dims, Dims>> shapes = {
      {{1000}, {1000}},             // same shape
      {{3, 70001}, {3, 70001}},     // same shape, long rows split over threads
      {{4, 33}, {}},                // scalar on the right
      {{1}, {5, 9}},                // scalar on the left
      {{64, 130}, {130}},           // row broadcast
      {{2, 3, 4, 5}, {3, 1, 1}},    // channel broadcast (bias add)
      {{4, 1, 6}, {5, 1}},          // both sides broadcast
      {{2, 1, 7, 1}, {1, 3, 1, 9}}, // interleaved
      {{1, 1}, {1}},                // single element
      {{0, 4}, {4}},                // empty
  };
  uint32_t seed = 100;
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "PRelu"}) {
    for (auto& [da, db] : shapes) {
      if (std::string(op) == "PRelu" && da.size() < db.size()) continue;
      HostTensor a = randomFloats(da, -4, 4, seed++);
      HostTensor b = randomFloats(db, 0.5f, 3, seed++);
      Attributes attrs;
      LayerDesc d = describe(op, {a, b}, attrs, false);
      inferLayer(d);
      auto tactics = backend->tactics(d);
    const Tactic* avx = findTactic(tactics, kiln::test::f32Avx2(d.op));
      ASSERT_NE(avx, nullptr) << op;
      expectClose(runTactic(*avx, op, {a, b}, attrs), runTactic(referenceTactic(op), op, {a, b}, attrs), 0, 0,
                  std::string(op) + " " + toString(da) + " " + toString(db));
    }
  }
}

TEST(ElementwiseTactic, NonFloatLayersUseTheReference) {
  auto backend = getBackend(DeviceType::kCPU, 2);
  Attributes attrs;
  LayerDesc d = describe("Add", {i64({2}, {1, 2}), i64({2}, {3, 4})}, attrs, false);
  inferLayer(d);
  auto ts = backend->tactics(d);
  ASSERT_EQ(ts.size(), 1u);
  EXPECT_EQ(ts[0].name, "ref");
  LayerDesc v = describe("Max", {f32({2}, {1, 2}), f32({2}, {3, 4}), f32({2}, {0, 9})}, attrs, false);
  inferLayer(v);
  auto vt = backend->tactics(v);
  EXPECT_EQ(findTactic(vt, "max_f32_avx2"), nullptr);  // 3-input Max: reference
}

TEST(ElementwiseTactic, FusedActivationHelperMatchesScalarActivation) {
  const std::vector<Activation> acts = {
      {ActKind::kRelu, 0, 0}, {ActKind::kLeakyRelu, 0.2f, 0}, {ActKind::kClip, -1.f, 1.5f}, {ActKind::kSigmoid, 0, 0},
      {ActKind::kTanh, 0, 0}, {ActKind::kHardSwish, 0, 0}, {ActKind::kHardSigmoid, 0.2f, 0.5f}, {ActKind::kGelu, 0, 0},
      {ActKind::kGeluTanh, 0, 0}, {ActKind::kElu, 1.f, 0}, {ActKind::kSoftplus, 0, 0}, {ActKind::kSilu, 0, 0},
      {ActKind::kMish, 0, 0}, {ActKind::kNone, 0, 0}};
  HostTensor x = randomFloats({1029}, -9, 9, 7);
  for (const Activation& act : acts) {
    HostTensor got = x.clone(), want = x.clone();
    applyActivationAvx2(act, got.as<float>(), got.count());
    for (int64_t i = 0; i < want.count(); ++i) want.as<float>()[i] = act(want.as<float>()[i]);
    expectClose(got, want, 2e-6, 4e-6, "activation " + std::to_string(static_cast<int>(act.kind)));
  }
}
