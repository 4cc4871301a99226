// CUDA kernels of the less common ops (LpPool, GlobalLpPool, LRN, Hardmax, LpNormalization,
// MeanVarianceNormalization, Det, MatMulInteger, Einsum, RNN/GRU/LSTM, RotaryEmbedding) against the CPU reference kernels.
#include <limits>
#include <random>

#include "op_test_util.h"

namespace kiln {
namespace {

using test::OpCase;

HostTensor uniform(const Dims& d, DataType t, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  return test::uniformOfType(d, t, seed, lo, hi);
}

OpCase unary(const std::string& op, HostTensor x, Attributes a = {}) { return test::unaryCase(op, std::move(x), std::move(a)); }

double tolFor(DataType t) { return isInteger(t) ? 0 : t == DataType::kFLOAT ? 1e-5 : t == DataType::kHALF ? 4e-3 : 2e-2; }

const DataType kFloats[] = {DataType::kFLOAT, DataType::kHALF, DataType::kBF16};

TEST(CudaMiscOps, LpPoolGlobalLpPoolLrn) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (DataType t : kFloats) {
    for (int64_t p : {1, 2, 3}) {
      Attributes a;
      a.set("kernel_shape", std::vector<int64_t>{3, 2});
      a.set("strides", std::vector<int64_t>{2, 1});
      a.set("pads", std::vector<int64_t>{1, 0, 1, 1});
      a.set("p", p);
      test::checkAllTactics(*gpu, unary("LpPool", uniform({2, 3, 7, 6}, t, 1), a), "LpPool p" + std::to_string(p), tolFor(t), tolFor(t));
      Attributes g;
      g.set("p", p);
      test::checkAllTactics(*gpu, unary("GlobalLpPool", uniform({2, 5, 9, 11}, t, 2), g), "GlobalLpPool", tolFor(t), tolFor(t));
    }
    for (int64_t size : {1, 3, 4}) {
      Attributes a;
      a.set("size", size);
      a.set("alpha", 2e-3f);
      a.set("beta", 0.6f);
      a.set("bias", 1.5f);
      test::checkAllTactics(*gpu, unary("LRN", uniform({2, 7, 5, 4}, t, 3), a), "LRN", tolFor(t), tolFor(t));
    }
  }
}

TEST(CudaMiscOps, HardmaxAndLpNormalization) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (DataType t : kFloats)
    for (int64_t axis : {0, 1, -1}) {
      Attributes a;
      a.set("axis", axis);
      test::checkAllTactics(*gpu, unary("Hardmax", uniform({3, 4, 5}, t, 4), a), "Hardmax", 0, 0);
      Attributes c = a;
      c.set("kiln_coerce_2d", int64_t(1));  // opset < 13 semantics
      test::checkAllTactics(*gpu, unary("Hardmax", uniform({3, 4, 5}, t, 5), c), "Hardmax coerced", 0, 0);
      for (int64_t p : {1, 2}) {
        Attributes n = a;
        n.set("p", p);
        test::checkAllTactics(*gpu, unary("LpNormalization", uniform({3, 4, 5}, t, 6), n), "LpNormalization", tolFor(t), tolFor(t));
      }
    }
}

TEST(CudaMiscOps, MeanVarianceNormalizationAndDet) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (DataType t : kFloats) {
    test::checkAllTactics(*gpu, unary("MeanVarianceNormalization", uniform({2, 3, 4, 5}, t, 7)), "MVN default axes", tolFor(t), tolFor(t));
    Attributes a;
    a.set("axes", std::vector<int64_t>{1, -1});
    test::checkAllTactics(*gpu, unary("MeanVarianceNormalization", uniform({2, 3, 4, 5}, t, 8), a), "MVN axes 1,-1", tolFor(t),
                          tolFor(t));
  }
  for (int64_t n : {1, 2, 3, 6}) {
    test::checkAllTactics(*gpu, unary("Det", uniform({4, n, n}, DataType::kFLOAT, 9)), "Det " + std::to_string(n), 1e-4, 1e-4);
  }
  test::checkAllTactics(*gpu, unary("Det", uniform({2, 3, 4, 4}, DataType::kFLOAT, 10)), "Det batched", 1e-4, 1e-4);
  HostTensor singular = uniform({1, 3, 3}, DataType::kFLOAT, 11);
  for (int k = 0; k < 3; ++k) singular.as<float>()[3 + k] = 2 * singular.as<float>()[k];  // row 1 = 2 * row 0
  test::checkAllTactics(*gpu, unary("Det", singular), "Det singular", 1e-5, 1e-5);
}

TEST(CudaMiscOps, MatMulIntegerWithZeroPointsAndBroadcast) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  struct Shape { Dims a, b; };
  const Shape shapes[] = {{{4, 7}, {7, 5}}, {{2, 3, 4, 7}, {7, 5}}, {{3, 1, 4, 7}, {2, 7, 5}}, {{7}, {7, 5}}, {{4, 7}, {7}}};
  for (const Shape& s : shapes)
    for (DataType ta : {DataType::kUINT8, DataType::kINT8})
      for (DataType tb : {DataType::kUINT8, DataType::kINT8}) {
        double lo = ta == DataType::kUINT8 ? 0 : -128, hi = ta == DataType::kUINT8 ? 255 : 127;
        OpCase c;
        c.op = "MatMulInteger";
        c.inputs = {uniform(s.a, ta, 12, lo, hi), uniform(s.b, tb, 13, tb == DataType::kUINT8 ? 0 : -128, tb == DataType::kUINT8 ? 255 : 127)};
        test::checkAllTactics(*gpu, c, "MatMulInteger no zero points", 0, 0);
        const int64_t m = s.a.size() == 1 ? 1 : s.a[s.a.size() - 2], n = s.b.size() == 1 ? 1 : s.b.back();
        c.inputs.push_back(uniform({m}, ta, 14, lo, hi));
        c.inputs.push_back(uniform({}, tb, 15, 0, 100));
        test::checkAllTactics(*gpu, c, "MatMulInteger per-row / scalar zero points", 0, 0);
        c.inputs[2] = uniform({}, ta, 16, 0, 100);
        c.inputs[3] = uniform({n}, tb, 17, 0, 100);
        test::checkAllTactics(*gpu, c, "MatMulInteger scalar / per-column zero points", 0, 0);
      }
}

TEST(CudaMiscOps, Einsum) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  struct Case { const char* eq; std::vector<Dims> dims; };
  const Case cases[] = {{"ij,jk->ik", {{4, 5}, {5, 3}}},
                        {"bij,bjk->bik", {{2, 4, 5}, {2, 5, 3}}},
                        {"ii->i", {{5, 5}}},
                        {"ii", {{4, 4}}},
                        {"ij->", {{3, 7}}},
                        {"...ij,...jk->...ik", {{2, 1, 3, 4}, {3, 4, 2}}},
                        {"i,i", {{6}, {6}}},
                        {"bhqd,bhkd->bhqk", {{1, 2, 5, 4}, {1, 2, 6, 4}}},
                        {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}},
                        {"ji", {{3, 4}}}};
  for (const Case& c : cases)
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kINT64}) {
      OpCase o;
      o.op = "Einsum";
      o.attrs.set("equation", std::string(c.eq));
      uint32_t seed = 20;
      for (const Dims& d : c.dims) o.inputs.push_back(uniform(d, t, seed++, -3, 3));
      test::checkAllTactics(*gpu, o, std::string("Einsum ") + c.eq + " " + toString(t), tolFor(t), tolFor(t));
    }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

//! A recurrent case: X [seq, batch, input] (layout 0) or [batch, seq, input] (layout 1).
test::OpCase recurrentCase(const std::string& op, int64_t seq, int64_t batch, int64_t input, int64_t hidden,
                           const std::string& direction, int64_t layout, bool optional, uint32_t seed) {
  const int64_t gates = op == "RNN" ? 1 : (op == "GRU" ? 3 : 4), dirs = direction == "bidirectional" ? 2 : 1;
  test::OpCase c;
  c.op = op;
  c.attrs.set("hidden_size", hidden);
  c.attrs.set("direction", direction);
  c.attrs.set("layout", layout);
  const Dims x = layout == 0 ? Dims{seq, batch, input} : Dims{batch, seq, input};
  const Dims state = layout == 0 ? Dims{dirs, batch, hidden} : Dims{batch, dirs, hidden};
  const double s = 1.0 / std::sqrt(static_cast<double>(hidden));
  c.inputs = {uniform(x, DataType::kFLOAT, seed), uniform({dirs, gates * hidden, input}, DataType::kFLOAT, seed + 1, -s, s),
              uniform({dirs, gates * hidden, hidden}, DataType::kFLOAT, seed + 2, -s, s)};
  if (optional) {
    c.inputs.push_back(uniform({dirs, 2 * gates * hidden}, DataType::kFLOAT, seed + 3, -0.2, 0.2));
    HostTensor lens(DataType::kINT32, {batch});
    for (int64_t b = 0; b < batch; ++b) lens.as<int32_t>()[b] = static_cast<int32_t>((seq - b) > 0 ? seq - b : 0);
    c.inputs.push_back(lens);
    c.inputs.push_back(uniform(state, DataType::kFLOAT, seed + 4, -0.5, 0.5));
    if (op == "LSTM") {
      c.inputs.push_back(uniform(state, DataType::kFLOAT, seed + 5, -0.5, 0.5));
      c.inputs.push_back(uniform({dirs, 3 * hidden}, DataType::kFLOAT, seed + 6, -0.3, 0.3));
    }
  }
  c.nbOutputs = op == "LSTM" ? 3 : 2;
  return c;
}

TEST(CudaMiscOps, RecurrentCells) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  uint32_t seed = 40;
  for (const char* op : {"RNN", "GRU", "LSTM"})
    for (const char* dir : {"forward", "reverse", "bidirectional"})
      for (int64_t layout : {0, 1})
        for (bool optional : {false, true}) {
          test::OpCase c = recurrentCase(op, 5, 3, 7, 6, dir, layout, optional, seed += 10);
          test::checkAllTactics(*gpu, c, std::string(op) + " " + dir + " layout " + std::to_string(layout) + (optional ? " +optional" : ""),
                                1e-4, 1e-4);
        }
  // Attributes: GRU linear_before_reset, LSTM input_forget + clip, custom activations.
  test::OpCase g = recurrentCase("GRU", 4, 2, 5, 8, "forward", 0, true, 90);
  g.attrs.set("linear_before_reset", int64_t(1));
  test::checkAllTactics(*gpu, g, "GRU linear_before_reset", 1e-4, 1e-4);
  test::OpCase l = recurrentCase("LSTM", 4, 2, 5, 8, "bidirectional", 0, true, 95);
  l.attrs.set("input_forget", int64_t(1));
  l.attrs.set("clip", 0.7f);
  l.attrs.set("activations", std::vector<std::string>{"HardSigmoid", "LeakyRelu", "Softsign", "Sigmoid", "ScaledTanh", "Affine"});
  l.attrs.set("activation_alpha", std::vector<float>{0.3f, 0.05f, 1.5f, 0.8f});
  l.attrs.set("activation_beta", std::vector<float>{0.4f, 0.9f, 0.1f});
  test::checkAllTactics(*gpu, l, "LSTM input_forget clip activations", 1e-4, 1e-4);
  test::OpCase big = recurrentCase("LSTM", 3, 2, 64, 300, "forward", 0, false, 99);  // workspace beyond shared memory
  test::checkAllTactics(*gpu, big, "LSTM hidden 300", 2e-4, 2e-4);
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(CudaMiscOps, RotaryEmbedding) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (DataType t : {DataType::kFLOAT, DataType::kHALF})
    for (int64_t interleaved : {0, 1})
      for (int64_t rd : {0, 4})
        for (bool is3d : {false, true})
          for (bool withPos : {false, true}) {
            const int64_t B = 2, H = 3, S = 5, D = 8, half = (rd ? rd : D) / 2;
            test::OpCase c;
            c.op = "RotaryEmbedding";
            c.attrs.set("interleaved", interleaved);
            c.attrs.set("rotary_embedding_dim", rd);
            if (is3d) c.attrs.set("num_heads", H);
            c.inputs.push_back(uniform(is3d ? Dims{B, S, H * D} : Dims{B, H, S, D}, t, 60));
            const Dims cache = withPos ? Dims{7, half} : Dims{B, S, half};
            c.inputs.push_back(uniform(cache, t, 61, -1, 1));
            c.inputs.push_back(uniform(cache, t, 62, -1, 1));
            if (withPos) {
              HostTensor pos(DataType::kINT64, {B, S});
              for (int64_t i = 0; i < B * S; ++i) pos.as<int64_t>()[i] = (i * 3) % 7;
              c.inputs.push_back(pos);
            }
            test::checkAllTactics(*gpu, c, "RotaryEmbedding", tolFor(t), tolFor(t));
          }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(CudaMiscOps, QuantizeDequantizeAndCumProd) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  struct Mode { Dims scale; int64_t axis, block; };
  const Mode modes[] = {{{}, 1, 0}, {{6}, 1, 0}, {{4, 2, 5}, 1, 3}, {{4, 6, 2}, -1, 3}};
  for (const Mode& m : modes)
    for (DataType q : {DataType::kINT8, DataType::kUINT8, DataType::kINT16})
      for (DataType f : {DataType::kFLOAT, DataType::kHALF}) {
        test::OpCase c;
        c.op = "QuantizeLinear";
        c.attrs.set("axis", m.axis);
        if (m.block) c.attrs.set("block_size", m.block);
        c.inputs = {uniform({4, 6, 5}, f, 70, -300, 300), uniform(m.scale, f, 71, 0.5, 3)};
        c.inputs.push_back(uniform(m.scale, q, 72, 0, 20));
        test::checkAllTactics(*gpu, c, "QuantizeLinear", 0, 0);
        test::OpCase d;
        d.op = "DequantizeLinear";
        d.attrs = c.attrs;
        d.inputs = {uniform({4, 6, 5}, q, 73, 0, 100), c.inputs[1], c.inputs[2]};
        test::checkAllTactics(*gpu, d, "DequantizeLinear", 0, 0);
      }
  for (int64_t exclusive : {0, 1})
    for (int64_t reverse : {0, 1})
      for (DataType t : {DataType::kFLOAT, DataType::kINT32}) {
        test::OpCase c;
        c.op = "CumProd";
        c.attrs.set("exclusive", exclusive);
        c.attrs.set("reverse", reverse);
        HostTensor axis(DataType::kINT64, {});
        *axis.as<int64_t>() = 1;
        c.inputs = {t == DataType::kFLOAT ? uniform({3, 100, 4}, t, 74, 0.9, 1.1) : uniform({3, 100, 4}, t, 74, -2, 3), axis};
        c.constant = {false, true};
        test::checkAllTactics(*gpu, c, "CumProd", 1e-4, 1e-4);
      }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

TEST(CudaMiscOps, GridSample) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (const char* mode : {"linear", "nearest", "cubic"})
    for (const char* pad : {"zeros", "border", "reflection"})
      for (int64_t align : {0, 1})
        for (DataType t : {DataType::kFLOAT, DataType::kHALF}) {
          test::OpCase c;
          c.op = "GridSample";
          c.attrs.set("mode", std::string(mode));
          c.attrs.set("padding_mode", std::string(pad));
          c.attrs.set("align_corners", align);
          c.inputs = {uniform({2, 3, 5, 6}, t, 80), uniform({2, 4, 7, 2}, t, 81, -1.3, 1.3)};
          test::checkAllTactics(*gpu, c, std::string("GridSample ") + mode + " " + pad, tolFor(t) * 10, tolFor(t) * 10);
        }
  for (const char* mode : {"linear", "nearest"}) {
    test::OpCase c;
    c.op = "GridSample";
    c.attrs.set("mode", std::string(mode));
    c.inputs = {uniform({1, 2, 3, 4, 5}, DataType::kFLOAT, 82), uniform({1, 2, 3, 4, 3}, DataType::kFLOAT, 83, -1.1, 1.1)};
    test::checkAllTactics(*gpu, c, std::string("GridSample volumetric ") + mode, 1e-5, 1e-5);
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// The per-tensor fast path (quantizePerTensor8: 8 elements a thread) against the reference: float32,
// float16 and bfloat16 inputs with exact half-way quotients (ties to even), NaN (-> the zero point),
// infinities and saturation, int8 and uint8 with a zero point; 384 elements (the fast path) and 383
// (the generic loop).
TEST(CudaMiscOps, QuantizePerTensorFastPath) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (int64_t count : {384, 383})
    for (DataType f : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16})
      for (DataType q : {DataType::kINT8, DataType::kUINT8}) {
        HostTensor x = uniform({count}, DataType::kFLOAT, 80, -400, 400);
        float* v = x.as<float>();
        for (int64_t i = 0; i < 40; ++i) v[i] = 0.5f * static_cast<float>(i - 20);  // ties at scale 1
        v[41] = std::numeric_limits<float>::quiet_NaN();
        v[42] = std::numeric_limits<float>::infinity();
        v[43] = -std::numeric_limits<float>::infinity();
        auto as = [f](const HostTensor& t) {  // t (float32) in type f
          if (f == DataType::kFLOAT) return t;
          HostTensor o(f, t.dims());
          for (int64_t i = 0; i < t.count(); ++i)
            o.as<uint16_t>()[i] = f == DataType::kHALF ? floatToHalf(t.as<float>()[i]) : floatToBf16(t.as<float>()[i]);
          return o;
        };
        test::OpCase c;
        c.op = "QuantizeLinear";
        HostTensor z(q, {}), one(DataType::kFLOAT, {});
        *one.as<float>() = 1.f;
        c.inputs = {as(x), as(one)};
        if (q == DataType::kINT8) *z.as<int8_t>() = -3;
        else *z.as<uint8_t>() = 100;
        c.inputs.push_back(z);
        test::checkAllTactics(*gpu, c, "QuantizeLinear per tensor " + std::to_string(count) + " " + toString(f) + " -> " + toString(q), 0, 0);
      }
}

}  // namespace
}  // namespace kiln
