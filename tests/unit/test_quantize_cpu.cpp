// quantize_linear_f32_avx2 and dequantize_linear_f32_avx2 (backends/cpu/quantize_cpu.cpp) against
// the references, bit for bit. QuantizeLinear: halfway quotients (round half to even), values past the range, +-inf and NaN,
// uint8 and int8 with zero points, with and without a zero point input, lengths with a tail.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "op_test_util.h"
#include "qlinear_cases.h"

using namespace kiln;
using namespace kiln::test;

namespace {

OpCase quantizeCase(int64_t n, float scale, DataType out, int zero, bool withZero) {
  OpCase c;
  c.op = "QuantizeLinear";
  HostTensor x = uniformOfType({n}, DataType::kFLOAT, 11, -40, 40);
  float* p = x.as<float>();
  const float specials[] = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 1e9f, -1e9f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(), -0.f};
  for (int64_t i = 0; i < n; ++i)
    if (i % 5 == 0) p[i] = specials[(i / 5) % 12] * (std::isfinite(specials[(i / 5) % 12]) && std::fabs(specials[(i / 5) % 12]) < 3 ? scale : 1.f);
  c.inputs = {x, scalarF(scale)};
  if (withZero) c.inputs.push_back(scalarOf(out, zero));
  else c.attrs.set("output_dtype", int64_t{out == DataType::kINT8 ? 3 : 2});
  c.constant = {false, true, true};
  c.constant.resize(c.inputs.size());
  return c;
}

}  // namespace

TEST(QuantizeCpu, MatchesReferenceBitForBit) {
  auto cpu = makeCpuBackend(2);
  for (int64_t n : {int64_t{5}, int64_t{64}, int64_t{100003}})
    for (float scale : {0.25f, 0.1f, 0.0371f})
      for (auto [type, zero, withZero] : {std::tuple{DataType::kUINT8, 0, true}, std::tuple{DataType::kUINT8, 131, true},
                                          std::tuple{DataType::kINT8, 0, true}, std::tuple{DataType::kINT8, -7, true},
                                          std::tuple{DataType::kUINT8, 0, false}, std::tuple{DataType::kINT8, 0, false}}) {
        const OpCase c = quantizeCase(n, scale, type, zero, withZero);
        const std::string what = "n " + std::to_string(n) + " scale " + std::to_string(scale) + " " + toString(type) + " zp " +
                                 std::to_string(zero) + (withZero ? "" : " (no zero point)");
        if (__builtin_cpu_supports("avx2")) EXPECT_EQ(tacticNames(*cpu, c)[0], "quantize_linear_f32_avx2") << what;
        checkAllTactics(*cpu, c, what);
      }
}

TEST(QuantizeCpu, DequantizeMatchesReferenceBitForBit) {
  auto cpu = makeCpuBackend(2);
  for (int64_t n : {int64_t{7}, int64_t{64}, int64_t{100003}})
    for (auto [type, zero, withZero] : {std::tuple{DataType::kUINT8, 0, true}, std::tuple{DataType::kUINT8, 131, true},
                                        std::tuple{DataType::kINT8, -7, true}, std::tuple{DataType::kINT8, 0, false}}) {
      OpCase c;
      c.op = "DequantizeLinear";
      const bool u8 = type == DataType::kUINT8;
      c.inputs = {uniformOfType({n}, type, 5, u8 ? 0 : -128, u8 ? 256 : 128), scalarF(0.0371f)};
      if (withZero) c.inputs.push_back(scalarOf(type, zero));
      c.constant = {false, true, true};
      c.constant.resize(c.inputs.size());
      const std::string what = "n " + std::to_string(n) + " " + toString(type) + " zp " + std::to_string(zero);
      if (__builtin_cpu_supports("avx2")) EXPECT_EQ(tacticNames(*cpu, c)[0], "dequantize_linear_f32_avx2") << what;
      checkAllTactics(*cpu, c, what);
    }
}
