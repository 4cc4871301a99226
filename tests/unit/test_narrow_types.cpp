// The narrow types (float8 kinds, float4e2m1, int4/uint4, int2/uint2): code <-> float conversions,
// Cast / CastLike to and from them, ONNX's packed tensors, and malformed ones. Expected values come
// from ml_dtypes and onnx (tests/unit/gen_narrow_types_ref.py -> narrow_types_ref.inc), never kiln.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/narrow_types.h"
#include "kiln/kiln.h"
#include "narrow_types_ref.inc"
#include "op_test_util.h"

using namespace kiln;

namespace {

float fromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Same value, NaN matching any NaN (the float8 kinds have several NaN codes), and the same sign
// of zero.
bool sameFloat(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

HostTensor floatTensor(const std::vector<uint32_t>& bits) {
  HostTensor t(DataType::kFLOAT, {static_cast<int64_t>(bits.size())});
  for (size_t i = 0; i < bits.size(); ++i) t.as<float>()[i] = fromBits(bits[i]);
  return t;
}

HostTensor castOp(const HostTensor& x, DataType to, int64_t onnxCode, int64_t saturate = 1) {
  test::OpCase c;
  c.op = "Cast";
  c.attrs.set("to", onnxCode);
  c.attrs.set("saturate", saturate);
  c.inputs = {x};
  HostTensor y = test::runReference(c).at(0);
  EXPECT_EQ(y.type(), to);
  return y;
}

std::string writeTemp(const std::vector<uint8_t>& bytes, const char* name) {
  std::string path = testing::TempDir() + name;
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return path;
}

}  // namespace

TEST(NarrowTypes, EveryCodeDecodesAsMlDtypes) {
  for (const auto& c : narrow_ref::kDecode) {
    for (size_t code = 0; code < c.decoded.size(); ++code)
      EXPECT_TRUE(sameFloat(narrowToFloat(c.type, static_cast<uint8_t>(code)), fromBits(c.decoded[code])))
          << toString(c.type) << " code " << code;
  }
}

// Ties between neighbouring codes (round half to even), one float32 ulp either side, beyond the
// largest value, infinities, NaNs, subnormals and zeros, with and without saturation.
TEST(NarrowTypes, FloatToNarrowRoundsAndSaturatesAsOnnx) {
  for (const auto& c : narrow_ref::kEncode) {
    for (size_t i = 0; i < c.in.size(); ++i) {
      const float x = fromBits(c.in[i]);
      for (bool saturate : {true, false}) {
        const uint8_t want = saturate ? c.sat[i] : c.noSat[i];
        const uint8_t got = floatToNarrow(c.type, x, saturate);
        EXPECT_TRUE(sameFloat(narrowToFloat(c.type, got), narrowToFloat(c.type, want)))
            << toString(c.type) << " x=" << x << " saturate=" << saturate << ": code " << int(got) << ", want " << int(want);
      }
    }
  }
}

// The same through the Cast op, from float32 and from float16, and back to float32 (exact).
TEST(NarrowTypes, CastToAndFromNarrowFloats) {
  for (const auto& c : narrow_ref::kEncode) {
    HostTensor x = floatTensor(c.in);
    for (int64_t saturate : {1, 0}) {
      HostTensor y = castOp(x, c.type, test::onnxTypeCode(c.type), saturate);
      const auto& want = saturate ? c.sat : c.noSat;
      for (int64_t i = 0; i < y.count(); ++i)
        ASSERT_TRUE(sameFloat(y.getDouble(i), narrowToFloat(c.type, want[i]))) << toString(c.type) << " element " << i;
      HostTensor back = castOp(y, DataType::kFLOAT, 1);
      for (int64_t i = 0; i < y.count(); ++i) ASSERT_TRUE(sameFloat(back.as<float>()[i], narrowToFloat(c.type, want[i])));
    }
    // float16 in: every float16 value converts exactly to float, so one rounding, as from float32.
    HostTensor h(DataType::kHALF, x.dims());
    for (int64_t i = 0; i < x.count(); ++i) h.as<uint16_t>()[i] = floatToHalf(x.as<float>()[i]);
    HostTensor y = castOp(h, c.type, test::onnxTypeCode(c.type));
    for (int64_t i = 0; i < y.count(); ++i)
      ASSERT_TRUE(sameFloat(y.getDouble(i), narrowToFloat(c.type, floatToNarrow(c.type, halfToFloat(h.as<uint16_t>()[i]), true))));
  }
}

// Floats truncate (out of range, NaN, inf: 0, as ml_dtypes); integers keep their low bits.
TEST(NarrowTypes, CastToSubByteIntegers) {
  for (const auto& c : narrow_ref::kIntCasts) {
    HostTensor y = castOp(floatTensor(c.fromFloat), c.type, test::onnxTypeCode(c.type));
    for (int64_t i = 0; i < y.count(); ++i)
      EXPECT_EQ(y.getInt(i), c.fromFloatWant[i]) << toString(c.type) << " from float " << fromBits(c.fromFloat[i]);
    HostTensor xi(DataType::kINT64, {static_cast<int64_t>(c.fromInt.size())});
    std::memcpy(xi.data(), c.fromInt.data(), xi.bytes());
    HostTensor z = castOp(xi, c.type, test::onnxTypeCode(c.type));
    for (int64_t i = 0; i < z.count(); ++i) EXPECT_EQ(z.getInt(i), c.fromIntWant[i]) << toString(c.type) << " from " << c.fromInt[i];
    // ... and back: int4 -> int8 / float sign-extends, uint4 -> uint8 does not.
    HostTensor w = castOp(z, DataType::kINT32, 6);
    for (int64_t i = 0; i < z.count(); ++i) EXPECT_EQ(w.as<int32_t>()[i], c.fromIntWant[i]);
  }
}

TEST(NarrowTypes, CastBetweenNarrowTypes) {
  HostTensor x(DataType::kFP8E5M2, {4});
  const float v[] = {3.5f, -0.25f, 1000.f, -7.f};
  for (int i = 0; i < 4; ++i) x.as<uint8_t>()[i] = floatToNarrow(DataType::kFP8E5M2, v[i], true);
  // E5M2 -> E4M3FN: 1000 saturates to 448 (saturate=1) or becomes NaN (0).
  HostTensor s = castOp(x, DataType::kFP8E4M3FN, 17, 1), n = castOp(x, DataType::kFP8E4M3FN, 17, 0);
  EXPECT_EQ(s.getDouble(0), 3.5);
  EXPECT_EQ(s.getDouble(1), -0.25);
  EXPECT_EQ(s.getDouble(2), 448.0);
  EXPECT_TRUE(std::isnan(n.getDouble(2)));
  HostTensor i4 = castOp(x, DataType::kINT4, 22);  // 3.5 -> 3, -0.25 -> 0, 1000 -> 0 (range), -7 -> -7
  EXPECT_EQ(i4.toInts(), (std::vector<int64_t>{3, 0, 0, -7}));
  HostTensor u2 = castOp(i4, DataType::kUINT2, 25);  // low two bits: 3, 0, 0, -7 = ...1001 -> 1
  EXPECT_EQ(u2.toInts(), (std::vector<int64_t>{3, 0, 0, 1}));
}

// Tensors onnx.helper wrote (raw_data and int32_data, odd lengths with a half-used last byte)
// read back element for element.
TEST(NarrowTypes, PackedTensorProtosUnpack) {
  int n = 0;
  for (const auto& c : narrow_ref::kPacked) {
    std::string path = writeTemp(c.proto, "narrow_packed.pb");
    HostTensor t = readTensorProtoFile(path);
    ASSERT_EQ(t.type(), c.type);
    ASSERT_EQ(t.count(), static_cast<int64_t>(c.values.size()));
    for (int64_t i = 0; i < t.count(); ++i) {
      if (isNarrowFloat(c.type)) EXPECT_EQ(t.as<uint8_t>()[i], c.values[i]) << toString(c.type) << " element " << i;
      else EXPECT_EQ(t.getInt(i), c.values[i]) << toString(c.type) << " element " << i;
    }
    std::remove(path.c_str());
    ++n;
  }
  EXPECT_GT(n, 50);
}

TEST(NarrowTypes, PackUnpackRoundTripOddLengths) {
  for (DataType t : {DataType::kINT4, DataType::kUINT4, DataType::kFP4E2M1, DataType::kINT2, DataType::kUINT2}) {
    for (int64_t count = 0; count <= 9; ++count) {
      std::vector<uint8_t> in(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) {
        const int bits = packedBits(t);
        const int v = static_cast<int>((i * 5 + 3) % (1 << bits));
        in[i] = (t == DataType::kINT4 || t == DataType::kINT2) && v >= (1 << (bits - 1)) ? static_cast<uint8_t>(v - (1 << bits)) : static_cast<uint8_t>(v);
      }
      std::vector<uint8_t> packed(packedBytes(t, count)), out(static_cast<size_t>(count));
      EXPECT_EQ(packed.size(), static_cast<size_t>((count * packedBits(t) + 7) / 8));
      packSubByte(t, in.data(), count, packed.data());
      unpackSubByte(t, packed.data(), count, out.data());
      EXPECT_EQ(out, in) << toString(t) << " count " << count;
    }
  }
}

// A float8 tensor whose raw_data does not match its dims, an int4 tensor with one byte too many or
// too few, or with data in the unused half of its last byte: clear errors, no crash.
TEST(NarrowTypes, MalformedTensorsAreRefused) {
  auto expectError = [](const std::vector<uint8_t>& proto, const char* needle) {
    std::string path = writeTemp(proto, "narrow_bad.pb");
    try {
      readTensorProtoFile(path);
      ADD_FAILURE() << "accepted a malformed tensor (" << needle << ")";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    std::remove(path.c_str());
  };
  // Hand-encoded TensorProtos: dims (field 1, varint), data_type (2), raw_data (9, bytes).
  auto proto = [](int64_t dim, int type, std::vector<uint8_t> raw) {
    std::vector<uint8_t> p = {0x08, static_cast<uint8_t>(dim), 0x10, static_cast<uint8_t>(type), 0x4a, static_cast<uint8_t>(raw.size())};
    p.insert(p.end(), raw.begin(), raw.end());
    return p;
  };
  expectError(proto(4, 17, {1, 2, 3}), "raw_data holds 3 bytes");        // float8e4m3fn[4] in 3 bytes
  expectError(proto(3, 22, {0x21, 0x03, 0x00}), "need 2 (packed)");     // int4[3] needs 2 bytes
  expectError(proto(3, 22, {0x21}), "need 2 (packed)");
  expectError(proto(3, 22, {0x21, 0x53}), "unused bits");               // the 4th nibble is not 0
  expectError(proto(5, 26, {0xff, 0x04}), "unused bits");               // int2[5]: 2 bytes, 3 spare pairs
  // The well-formed versions of the last two read.
  std::string ok = writeTemp(proto(3, 22, {0x21, 0x0d}), "narrow_ok.pb");
  EXPECT_EQ(readTensorProtoFile(ok).toInts(), (std::vector<int64_t>{1, 2, -3}));
  std::remove(ok.c_str());
}

TEST(NarrowTypes, NamesSizesAndClasses) {
  EXPECT_STREQ(toString(DataType::kFP8E4M3FN), "float8e4m3fn");
  EXPECT_STREQ(toString(DataType::kUINT2), "uint2");
  for (int t = 13; t < kNumDataTypes; ++t) EXPECT_EQ(elementSize(static_cast<DataType>(t)), 1u);
  EXPECT_TRUE(isInteger(DataType::kINT4));
  EXPECT_FALSE(isInteger(DataType::kFP8E5M2));
  EXPECT_FALSE(isFloat(DataType::kFP8E5M2));
  EXPECT_TRUE(isNarrowFloat(DataType::kFP4E2M1));
  EXPECT_EQ(packedBits(DataType::kFP8E4M3FNUZ), 8);
  EXPECT_EQ(packedBits(DataType::kFP4E2M1), 4);
  EXPECT_EQ(packedBits(DataType::kINT2), 2);
  EXPECT_FALSE(validNarrowCode(DataType::kINT4, 8));
  EXPECT_TRUE(validNarrowCode(DataType::kINT4, static_cast<uint8_t>(-8)));
  EXPECT_FALSE(validNarrowCode(DataType::kUINT2, 4));
}

// BitCast between the 4-bit types: the 4-bit pattern is kept (int4 -3 = 0b1101 = uint4 13 =
// float4e2m1 code 13 = -3.0), which the one-byte storage must translate (int4 is sign-extended).
TEST(NarrowTypes, BitCastKeepsTheFourBitPattern) {
  test::OpCase c;
  c.op = "BitCast";
  c.attrs.set("to", int64_t(21));  // UINT4
  HostTensor x(DataType::kINT4, {4});
  const int8_t v[] = {-3, 7, -8, 0};
  std::memcpy(x.data(), v, 4);
  c.inputs = {x};
  HostTensor u = test::runReference(c).at(0);
  EXPECT_EQ(u.type(), DataType::kUINT4);
  EXPECT_EQ(u.toInts(), (std::vector<int64_t>{13, 7, 8, 0}));
  c.inputs = {u};
  c.attrs.set("to", int64_t(22));  // back to INT4
  EXPECT_EQ(test::runReference(c).at(0).toInts(), (std::vector<int64_t>{-3, 7, -8, 0}));
  c.attrs.set("to", int64_t(23));  // FLOAT4E2M1: code 13 = -3.0, 7 = 6.0, 8 = -0.0
  HostTensor f = test::runReference(c).at(0);
  EXPECT_EQ(f.getDouble(0), -3.0);
  EXPECT_EQ(f.getDouble(1), 6.0);
  c.attrs.set("to", int64_t(2));  // UINT8: 8 bits, not 4
  EXPECT_THROW(test::runReference(c), Error);
}
