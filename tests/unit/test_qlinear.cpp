// QLinearConv / QLinearMatMul (ops/qlinear.cpp): every CPU tactic (q_linear_*_int_onednn) against
// the exact integer reference kernel, byte for byte for integer outputs, on the forms the Q/DQ
// lowering produces (uint8 asymmetric / int8 symmetric activations, per-tensor and per-channel
// weights, int32 bias, fused Relu, float output); bad scalars give errors naming the problem.
// The reference itself is checked against ONNX Runtime on whole models (tests/quant).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "op_test_util.h"
#include "qlinear_cases.h"

using namespace kiln;
using namespace kiln::test;

namespace {

//! Weights at `lo` / `hi`, the sign following the reduction index (conv: the input channel; MatMul
//! [K, N]: the row) so that the pairs an int8 instruction sums along K share a sign, and every
//! source at the end of its range farthest from the zero point: the largest pair sums there are.
OpCase makeExtreme(OpCase c, const Form& f, int8_t lo, int8_t hi) {
  HostTensor& w = c.inputs[3];
  const Dims& wd = w.dims();
  for (int64_t i = 0; i < w.count(); ++i) {
    const int64_t k = c.op == "QLinearConv" ? i / (wd[2] * wd[3]) % wd[1] : i / wd[1];
    w.as<int8_t>()[i] = (k / 2) % 2 ? hi : lo;
  }
  HostTensor& x = c.inputs[0];
  for (int64_t i = 0; i < x.count(); ++i) {
    if (f.x == DataType::kUINT8) x.as<uint8_t>()[i] = f.xZero < 128 ? 255 : 0;
    else x.as<int8_t>()[i] = f.xZero < 0 ? 127 : -128;
  }
  return c;
}

}  // namespace

TEST(QLinear, ConvTacticsMatchReference) {
  auto cpu = makeCpuBackend(2);
  for (const Form& f : kForms) {
    Attributes a;
    a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    a.set("strides", std::vector<int64_t>{2, 1});
    checkAllTactics(*cpu, qlinearCase("QLinearConv", {2, 8, 9, 7}, {16, 8, 3, 3}, 16, f, a), "conv " + formName(f), 1e-6, 1e-6);
    Attributes dw;  // depthwise, padded: the padding holds x_zero_point
    dw.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    dw.set("group", int64_t{8});
    checkAllTactics(*cpu, qlinearCase("QLinearConv", {1, 8, 6, 6}, {8, 1, 3, 3}, 8, f, dw), "depthwise " + formName(f), 1e-6, 1e-6);
  }
}

TEST(QLinear, MatMulTacticsMatchReference) {
  auto cpu = makeCpuBackend(2);
  for (const Form& f : kForms) {
    checkAllTactics(*cpu, qlinearCase("QLinearMatMul", {2, 5, 40}, {40, 24}, 24, f, {}), "matmul " + formName(f), 1e-6, 1e-6);
    checkAllTactics(*cpu, qlinearCase("QLinearMatMul", {3, 64}, {64, 10}, 10, f, {}), "gemm " + formName(f), 1e-6, 1e-6);
  }
}

TEST(QLinear, OneDnnTacticsAreOffered) {
  auto cpu = makeCpuBackend(2);
  auto conv = tacticNames(*cpu, qlinearCase("QLinearConv", {1, 8, 6, 6}, {16, 8, 3, 3}, 16, kForms[0], {}));
  auto mm = tacticNames(*cpu, qlinearCase("QLinearMatMul", {3, 64}, {64, 10}, 10, kForms[0], {}));
  // Built with oneDNN on a VNNI CPU (this project's machines) the int8 primitives must be offered;
  // elsewhere the reference runs, which the two tests above then compare with itself.
  if (std::find(conv.begin(), conv.end(), "q_linear_conv_int_onednn") == conv.end())
    GTEST_SKIP() << "no oneDNN int8 tactic for full-range weights here (no oneDNN or no VNNI)";
  EXPECT_EQ(conv[0], "q_linear_conv_int_onednn");
  EXPECT_EQ(mm[0], "q_linear_matmul_int_onednn");
}

// Weights in [-64, 64] with every source value at its extreme: the largest pair sums an int8
// instruction without VNNI adds (2 * 255 * 64 = 32640, just inside int16). oneDNN's tactics must be
// offered for them on any CPU (without VNNI they take only such weights, and s8 sources flipped to
// u8) and match the reference byte for byte; full-range weights are refused where the backend's
// weight limit says the CPU saturates them.
TEST(QLinear, PairSafeWeightsRunOneDnnExactly) {
  auto cpu = makeCpuBackend(2);
  for (const Form& f : kForms) {
    for (int extreme : {0, 1}) {
      auto pairSafe = [&](OpCase c) {
        if (extreme) return makeExtreme(c, f, -64, 64);
        HostTensor& w = c.inputs[3];
        for (int64_t i = 0; i < w.count(); ++i) w.as<int8_t>()[i] = static_cast<int8_t>(i * 37 % 129 - 64);
        return c;
      };
      Attributes a;
      a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
      const OpCase conv = pairSafe(qlinearCase("QLinearConv", {1, 16, 7, 7}, {8, 16, 3, 3}, 8, f, a));
      const OpCase mm = pairSafe(qlinearCase("QLinearMatMul", {3, 64}, {64, 10}, 10, f, {}));
      const std::string what = formName(f) + (extreme ? " extreme" : "");
      const auto convTactics = tacticNames(*cpu, conv);
      if (__builtin_cpu_supports("avx2"))
        EXPECT_NE(std::find(convTactics.begin(), convTactics.end(), "q_linear_conv_int_avx2"), convTactics.end()) << what;
#ifdef KILN_HAVE_ONEDNN
      EXPECT_EQ(convTactics[0], "q_linear_conv_int_onednn") << what;
      EXPECT_EQ(tacticNames(*cpu, mm)[0], "q_linear_matmul_int_onednn") << what;
#endif
      checkAllTactics(*cpu, conv, "conv " + what, 1e-6, 1e-6);
      checkAllTactics(*cpu, mm, "matmul " + what, 1e-6, 1e-6);
      // The shapes q_linear_conv_int_avx2 treats apart: 1x1 read in place with a partial last
      // pixel tile (7x7 = 49), stride 2 with asymmetric padding, K and M not multiples of 4,
      // batch 2, a 7x7 stem-like kernel.
      Attributes s2;
      s2.set("strides", std::vector<int64_t>{2, 2});
      s2.set("pads", std::vector<int64_t>{1, 0, 0, 1});
      Attributes stem;
      stem.set("strides", std::vector<int64_t>{2, 2});
      stem.set("pads", std::vector<int64_t>{3, 3, 3, 3});
      checkAllTactics(*cpu, pairSafe(qlinearCase("QLinearConv", {2, 12, 7, 7}, {10, 12, 1, 1}, 10, f, {})), "1x1 " + what, 1e-6, 1e-6);
      checkAllTactics(*cpu, pairSafe(qlinearCase("QLinearConv", {1, 3, 11, 9}, {6, 3, 3, 3}, 6, f, s2)), "3x3 s2 " + what, 1e-6, 1e-6);
      checkAllTactics(*cpu, pairSafe(qlinearCase("QLinearConv", {1, 3, 20, 20}, {8, 3, 7, 7}, 8, f, stem)), "7x7 s2 " + what, 1e-6, 1e-6);
      // Several pixel chunks (K = 1152: 14 tiles of 16 pixels per chunk, 25 tiles) through im2col, batch 2.
      Attributes p1;
      p1.set("pads", std::vector<int64_t>{1, 1, 1, 1});
      checkAllTactics(*cpu, pairSafe(qlinearCase("QLinearConv", {2, 128, 20, 20}, {20, 128, 3, 3}, 20, f, p1)), "chunks " + what, 1e-6, 1e-6);
    }
  }
  auto conv = tacticNames(*cpu, qlinearCase("QLinearConv", {1, 8, 6, 6}, {16, 8, 3, 3}, 16, kForms[0], {}));
  if (cpu->int8WeightLimit() < 127)
    EXPECT_EQ(std::find(conv.begin(), conv.end(), "q_linear_conv_int_onednn"), conv.end()) << "full-range weights would saturate oneDNN here";
  if (__builtin_cpu_supports("avx2"))  // it splits them into two halves in [-64, 64]
    EXPECT_NE(std::find(conv.begin(), conv.end(), "q_linear_conv_int_avx2"), conv.end());
}

// Full-range weights (a Q/DQ model's), at -128 / 127 with the sign following the reduction index and
// every source at the far end of its range: without VNNI, q_linear_conv_int_avx2 and
// q_linear_matmul_int_onednn split W into floor(W / 2) + ceil(W / 2) and must still match the
// reference byte for byte; the conv also in the chunked, batch-2 case.
TEST(QLinear, FullRangeWeightsRunExactlyOnAvx2) {
  auto cpu = makeCpuBackend(2);
  for (const Form& f : kForms)
    for (int extreme : {0, 1}) {
      auto fullRange = [&](OpCase c) { return extreme ? makeExtreme(c, f, -128, 127) : c; };
      Attributes a;
      a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
      const std::string what = formName(f) + (extreme ? " extreme" : "");
      const OpCase conv = fullRange(qlinearCase("QLinearConv", {1, 16, 7, 7}, {8, 16, 3, 3}, 8, f, a));
      const auto names = tacticNames(*cpu, conv);
      if (__builtin_cpu_supports("avx2"))
        EXPECT_NE(std::find(names.begin(), names.end(), "q_linear_conv_int_avx2"), names.end()) << what;
      checkAllTactics(*cpu, conv, "3x3 " + what, 1e-6, 1e-6);
      checkAllTactics(*cpu, fullRange(qlinearCase("QLinearConv", {2, 12, 7, 7}, {10, 12, 1, 1}, 10, f, {})), "1x1 " + what, 1e-6, 1e-6);
      checkAllTactics(*cpu, fullRange(qlinearCase("QLinearConv", {2, 64, 20, 20}, {12, 64, 3, 3}, 12, f, a)), "chunks " + what, 1e-6, 1e-6);
      // QLinearMatMul: oneDNN's tactic splits such B over a doubled K without VNNI.
      const OpCase mm = fullRange(qlinearCase("QLinearMatMul", {3, 64}, {64, 10}, 10, f, {}));
#ifdef KILN_HAVE_ONEDNN
      EXPECT_EQ(tacticNames(*cpu, mm)[0], "q_linear_matmul_int_onednn") << what;
#endif
      checkAllTactics(*cpu, mm, "matmul " + what, 1e-6, 1e-6);
    }
}

TEST(QLinear, BadScalarsAreRefused) {
  const Form f = kForms[0];
  for (float bad : {0.f, -0.5f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    for (int slot : {1, 4, 6}) {
      OpCase c = qlinearCase("QLinearMatMul", {3, 64}, {64, 10}, 10, f, {});
      c.inputs[slot] = scalarF(bad);
      try {
        describe(c, false);
        ADD_FAILURE() << "scale " << bad << " in slot " << slot << " was accepted";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("positive and finite"), std::string::npos) << e.what();
      }
    }
  }
  OpCase zp = qlinearCase("QLinearConv", {1, 8, 6, 6}, {16, 8, 3, 3}, 16, f, {});
  zp.inputs[2] = scalarOf(DataType::kINT8, 0);  // x is uint8
  EXPECT_THROW(describe(zp, false), Error);
  OpCase count = qlinearCase("QLinearConv", {1, 8, 6, 6}, {16, 8, 3, 3}, 16, f, {});
  count.inputs[4] = uniformOfType({5}, DataType::kFLOAT, 3, 0.001, 0.01);  // 5 scales for 16 channels
  EXPECT_THROW(describe(count, false), Error);
  OpCase fl = qlinearCase("QLinearConv", {1, 8, 6, 6}, {16, 8, 3, 3}, 16, f, {});
  fl.inputs[0] = uniformOfType({1, 8, 6, 6}, DataType::kFLOAT, 1, 0, 1);  // float x
  EXPECT_THROW(describe(fl, false), UnsupportedError);
}

// ---- kiln's residual QLinearConv (inputs 9..11) ----------------------------------------------------

// The reference adds (R - r_zero) * r_scale to the real value before the activation: the conv's own
// float output plus that term (to float rounding: the compiler may fuse the product and sum), then ReLU.
TEST(QLinear, ConvResidualReference) {
  const Form floatOut{DataType::kINT8, DataType::kFLOAT, 3, 0, true, true, false};
  Attributes a;
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  const Dims y{2, 16, 9, 7};
  const OpCase plain = qlinearCase("QLinearConv", {2, 8, 9, 7}, {16, 8, 3, 3}, 16, floatOut, a);
  const HostTensor base = runReference(plain)[0];
  for (bool relu : {false, true}) {
    OpCase c = withResidual(plain, y, 0.04f, -5);
    if (relu) setFusedActivation(c.attrs, Activation{ActKind::kRelu, 0.f, 0.f});
    const HostTensor got = runReference(c)[0];
    const HostTensor& r = c.inputs[kQR];
    ASSERT_EQ(got.count(), base.count());
    int64_t changed = 0;
    for (int64_t i = 0; i < got.count(); ++i) {
      float want = base.as<float>()[i] + static_cast<float>(r.as<int8_t>()[i] + 5) * 0.04f;
      if (relu) want = std::max(want, 0.f);
      ASSERT_NEAR(got.as<float>()[i], want, 1e-6 + 1e-6 * std::fabs(want)) << "at " << i << (relu ? " relu" : "");  // FMA contraction
      changed += got.as<float>()[i] != base.as<float>()[i];
    }
    EXPECT_GT(changed, got.count() / 2) << "the residual must matter";
  }
  // Quantized output: requantizes the same real value.
  const Form q8{DataType::kINT8, DataType::kINT8, 0, 0, true, true, true};
  OpCase c = withResidual(qlinearCase("QLinearConv", {2, 8, 9, 7}, {16, 8, 3, 3}, 16, q8, a), y, 0.04f, 0);
  const HostTensor got = runReference(c)[0];
  OpCase f = c;  // the float form of the same layer: drop y_scale / y_zero_point
  f.inputs[kQYScale] = HostTensor();
  f.inputs[kQYZero] = HostTensor();
  const HostTensor real = runReference(f)[0];
  for (int64_t i = 0; i < got.count(); ++i) {
    const double want = std::clamp(std::nearbyint(static_cast<double>(real.as<float>()[i]) / 0.05), -128.0, 127.0);
    ASSERT_LE(std::fabs(got.as<int8_t>()[i] - want), 1.0) << "at " << i;
  }
  // The CPU's tactics for this form (oneDNN's sum post-op where it takes the weights) agree within one
  // output step; the float-output form stays with the reference (the builder then keeps the Add).
  auto cpu = makeCpuBackend(2);
  checkAllTactics(*cpu, c, "residual int8", 0, 1);
  // A uint8 output (a Relu'd block output) with an int8 residual (a downsample branch's).
  const Form u8out{DataType::kINT8, DataType::kUINT8, 0, 0, true, true, true};
  checkAllTactics(*cpu, withResidual(qlinearCase("QLinearConv", {2, 8, 9, 7}, {16, 8, 3, 3}, 16, u8out, a), y, 0.04f, 0), "residual int8 -> uint8",
                  0, 1);
  for (const std::string& n : tacticNames(*cpu, withResidual(plain, y, 0.04f, -5))) EXPECT_EQ(n, "ref");
}

TEST(QLinear, ConvResidualShapeErrors) {
  const Form floatOut{DataType::kINT8, DataType::kFLOAT, 0, 0, true, true, false};
  OpCase c = withResidual(qlinearCase("QLinearConv", {1, 8, 6, 6}, {16, 8, 3, 3}, 16, floatOut, {}), {1, 16, 5, 5}, 0.1f, 0);
  c.inputs[kQR] = uniformOfType({1, 16, 6, 6}, DataType::kINT8, 3, -5, 5);  // Y is [1, 16, 4, 4]
  try {
    runReference(c);
    ADD_FAILURE() << "a residual of the wrong shape must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("residual"), std::string::npos) << e.what();
  }
}
