// float8e8m0 (FLOAT8E8M0, the MX formats' shared scale): decoding every code, Cast to it with each
// round_mode and saturate, and back. Expected values come from ml_dtypes and onnx's converter
// (tests/unit/gen_float8e8m0_ref.py -> float8e8m0_ref.inc), never kiln.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "kiln/kiln.h"
#include "op_test_util.h"
// after the kiln headers: the expected values name kiln's types
#include "float8e8m0_ref.inc"

using namespace kiln;

namespace {

float fromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

const char* roundModeName(E8M0Rounding r) {
  return r == E8M0Rounding::kUp ? "up" : r == E8M0Rounding::kDown ? "down" : "nearest";
}

}  // namespace

TEST(Float8E8M0, EveryCodeDecodesAsMlDtypes) {
  ASSERT_EQ(e8m0_ref::kDecoded.size(), 256u);
  for (int code = 0; code < 256; ++code) {
    const float want = fromBits(e8m0_ref::kDecoded[code]), got = narrowToFloat(DataType::kFP8E8M0, static_cast<uint8_t>(code));
    if (std::isnan(want)) EXPECT_TRUE(std::isnan(got)) << "code " << code;
    else EXPECT_EQ(got, want) << "code " << code;
  }
}

TEST(Float8E8M0, EncodesAsOnnxForEachRoundModeAndSaturate) {
  ASSERT_EQ(e8m0_ref::kEncode.size(), 6u);
  for (const auto& c : e8m0_ref::kEncode)
    for (size_t i = 0; i < e8m0_ref::kInputs.size(); ++i) {
      const float x = fromBits(e8m0_ref::kInputs[i]);
      EXPECT_EQ(int(floatToE8M0(x, c.saturate, c.rounding)), int(c.codes[i]))
          << "x=" << x << " round_mode=" << roundModeName(c.rounding) << " saturate=" << c.saturate;
    }
}

TEST(Float8E8M0, CastOpRoundModesAndBack) {
  HostTensor x(DataType::kFLOAT, {static_cast<int64_t>(e8m0_ref::kInputs.size())});
  for (size_t i = 0; i < e8m0_ref::kInputs.size(); ++i) x.as<float>()[i] = fromBits(e8m0_ref::kInputs[i]);
  for (const auto& c : e8m0_ref::kEncode) {
    test::OpCase cast;
    cast.op = "Cast";
    cast.attrs.set("to", int64_t(24));
    cast.attrs.set("saturate", int64_t(c.saturate ? 1 : 0));
    cast.attrs.set("round_mode", std::string(roundModeName(c.rounding)));
    cast.inputs = {x};
    const HostTensor y = test::runReference(cast).at(0);
    ASSERT_EQ(y.type(), DataType::kFP8E8M0);
    for (int64_t i = 0; i < y.count(); ++i)
      ASSERT_EQ(int(y.as<uint8_t>()[i]), int(c.codes[i])) << "element " << i << " round_mode=" << roundModeName(c.rounding);
    test::OpCase back;
    back.op = "Cast";
    back.attrs.set("to", int64_t(1));
    back.inputs = {y};
    const HostTensor f = test::runReference(back).at(0);
    for (int64_t i = 0; i < f.count(); ++i) {
      const float want = narrowToFloat(DataType::kFP8E8M0, c.codes[i]);
      ASSERT_TRUE(std::isnan(want) ? std::isnan(f.as<float>()[i]) : f.as<float>()[i] == want) << "element " << i;
    }
  }
}

TEST(Float8E8M0, NamesSizesAndRefusals) {
  EXPECT_STREQ(toString(DataType::kFP8E8M0), "float8e8m0");
  EXPECT_EQ(elementSize(DataType::kFP8E8M0), 1u);
  EXPECT_EQ(packedBits(DataType::kFP8E8M0), 8);
  EXPECT_TRUE(isNarrowFloat(DataType::kFP8E8M0));
  EXPECT_FALSE(isInteger(DataType::kFP8E8M0));

  test::OpCase badMode;
  badMode.op = "Cast";
  badMode.attrs.set("to", int64_t(24));
  badMode.attrs.set("round_mode", std::string("toward_zero"));
  badMode.inputs = {HostTensor(DataType::kFLOAT, {2})};
  EXPECT_THROW(test::runReference(badMode), Error);

  // ONNX allows float8e8m0 only as a quantization scale (which kiln does not take), never as the
  // quantized type.
  test::OpCase q;
  q.op = "QuantizeLinear";
  q.attrs.set("output_dtype", int64_t(24));
  q.inputs = {HostTensor(DataType::kFLOAT, {2}), HostTensor(DataType::kFLOAT, {})};
  EXPECT_THROW(test::runReference(q), UnsupportedError);
}
