// CUDA Cast / CastLike / QuantizeLinear / DequantizeLinear with the narrow types (float8 kinds,
// float8e8m0, float4e2m1, int4/uint4/int2/uint2) against the CPU reference kernels, which
// test_narrow_types.cpp, test_float8e8m0.cpp and test_ops_quantize_narrow.cpp check against the
// ONNX reference evaluator: the bytes must be the same (NaN payloads aside for float outputs).
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/narrow_types.h"
#include "op_test_util.h"

using namespace kiln;

namespace {

const std::vector<DataType> kNarrow = {DataType::kFP8E4M3FN, DataType::kFP8E4M3FNUZ, DataType::kFP8E5M2, DataType::kFP8E5M2FNUZ,
                                       DataType::kFP4E2M1,   DataType::kFP8E8M0,     DataType::kINT4,    DataType::kUINT4,
                                       DataType::kINT2,      DataType::kUINT2};

//! Values that probe every rounding decision of a narrow target: each code's value and the
//! midpoints between neighbours (ties), slightly off them, the overflow edges, zeros, NaN,
//! infinities, integers around the sub-byte ranges, and random values over many binades.
std::vector<double> probeValues() {
  std::vector<double> v = {0.0, -0.0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN(), 1e30, -1e30, 1e-30, 448.0, 464.0, 480.0, 240.0, 248.0,
                           57344.0, 61440.0, 65536.0, 6.0, 7.0, 8.0, -8.5, -9.0, 15.9, 16.0, 3.5, -2.5, 1.99, -3.0};
  for (DataType t : {DataType::kFP8E4M3FN, DataType::kFP8E4M3FNUZ, DataType::kFP8E5M2, DataType::kFP8E5M2FNUZ, DataType::kFP4E2M1}) {
    std::vector<double> vals;
    for (int c = 0; c < 256; ++c) {
      const float f = narrowToFloat(t, static_cast<uint8_t>(c));
      if (std::isfinite(f) && f >= 0) vals.push_back(f);
    }
    std::sort(vals.begin(), vals.end());
    for (size_t i = 0; i + 1 < vals.size(); ++i) {
      const double mid = (vals[i] + vals[i + 1]) / 2;
      for (double x : {vals[i], mid, std::nextafter(mid, 0.0), std::nextafter(mid, 1e300)}) {
        v.push_back(x);
        v.push_back(-x);
      }
    }
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> expo(-140, 130), mant(1, 2);
  for (int i = 0; i < 400; ++i) v.push_back((i % 2 ? -1 : 1) * std::ldexp(mant(rng), static_cast<int>(expo(rng))));
  return v;
}

//! `values` stored as `t` (a standard type): floats rounded by the host converters, integers
//! truncated and wrapped.
HostTensor standardTensor(DataType t, const std::vector<double>& values) {
  HostTensor o(t, {static_cast<int64_t>(values.size())});
  for (int64_t i = 0; i < o.count(); ++i) {
    const double x = values[static_cast<size_t>(i)];
    const int64_t xi = std::isfinite(x) && std::fabs(x) < 9e18 ? static_cast<int64_t>(x) : 0;
    switch (t) {
      case DataType::kFLOAT: o.as<float>()[i] = static_cast<float>(x); break;
      case DataType::kHALF: o.as<uint16_t>()[i] = floatToHalf(static_cast<float>(x)); break;
      case DataType::kBF16: o.as<uint16_t>()[i] = floatToBf16(static_cast<float>(x)); break;
      case DataType::kDOUBLE: o.as<double>()[i] = x; break;
      case DataType::kBOOL: o.as<uint8_t>()[i] = x != 0; break;
      case DataType::kINT8: case DataType::kUINT8: o.as<uint8_t>()[i] = static_cast<uint8_t>(xi); break;
      case DataType::kINT16: case DataType::kUINT16: o.as<uint16_t>()[i] = static_cast<uint16_t>(xi); break;
      case DataType::kINT32: case DataType::kUINT32: o.as<uint32_t>()[i] = static_cast<uint32_t>(xi); break;
      default: o.as<uint64_t>()[i] = static_cast<uint64_t>(xi); break;
    }
  }
  return o;
}

//! Every valid code of a narrow type (sub-byte integers: their sign-extended values), repeated.
HostTensor allCodes(DataType t) {
  std::vector<uint8_t> codes;
  for (int c = 0; c < 256; ++c)
    if (validNarrowCode(t, static_cast<uint8_t>(c))) codes.push_back(static_cast<uint8_t>(c));
  HostTensor o(t, {static_cast<int64_t>(codes.size() * 3)});
  for (int64_t i = 0; i < o.count(); ++i) o.as<uint8_t>()[i] = codes[static_cast<size_t>(i) % codes.size()];
  return o;
}

bool isFloatOut(DataType t) { return t == DataType::kFLOAT || t == DataType::kDOUBLE || t == DataType::kHALF || t == DataType::kBF16; }

//! Same bytes per element; for float outputs two NaNs also count as the same.
void expectSameBytes(const HostTensor& got, const HostTensor& ref, const std::string& what) {
  ASSERT_EQ(got.type(), ref.type()) << what;
  ASSERT_EQ(got.count(), ref.count()) << what;
  const size_t es = elementSize(ref.type());
  int bad = 0;
  for (int64_t i = 0; i < ref.count(); ++i) {
    const auto* g = static_cast<const uint8_t*>(got.data()) + i * es;
    const auto* r = static_cast<const uint8_t*>(ref.data()) + i * es;
    if (std::memcmp(g, r, es) == 0) continue;
    if (isFloatOut(ref.type()) && std::isnan(got.getDouble(i)) && std::isnan(ref.getDouble(i))) continue;
    if (bad++ < 4) {
      uint64_t gb = 0, rb = 0;
      std::memcpy(&gb, g, es);
      std::memcpy(&rb, r, es);
      ADD_FAILURE() << what << ": element " << i << " got 0x" << std::hex << gb << " expected 0x" << rb << std::dec;
    }
  }
}

std::vector<HostTensor> runCuda(const test::OpCase& c, const std::string& what) {
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const auto names = test::tacticNames(*gpu, c);
  EXPECT_FALSE(names.empty()) << what << ": no CUDA tactic";
  if (names.empty()) return {};
  return test::runTactic(*gpu, names.front(), c);
}

void checkCast(const HostTensor& x, DataType to, int saturate, const std::string& roundMode) {
  Attributes a;
  a.set("to", test::onnxTypeCode(to));
  a.set("saturate", static_cast<int64_t>(saturate));
  if (!roundMode.empty()) a.set("round_mode", roundMode);
  const test::OpCase c = test::unaryCase("Cast", x, a);
  const std::string what = std::string("Cast ") + toString(x.type()) + " -> " + toString(to) + " saturate " +
                           std::to_string(saturate) + (roundMode.empty() ? "" : " round_mode " + roundMode);
  const auto ref = test::runReference(c);
  const auto got = runCuda(c, what);
  ASSERT_EQ(got.size(), 1u) << what;
  expectSameBytes(got[0], ref[0], what);
}

}  // namespace

TEST(CudaNarrow, CastFromEveryTypeToTheNarrowTypes) {
  KILN_REQUIRE_GPU();
  const std::vector<double> probes = probeValues();
  for (int fi = 0; fi < 13; ++fi) {
    const DataType from = static_cast<DataType>(fi);
    const HostTensor x = standardTensor(from, probes);
    for (DataType to : kNarrow) {
      for (int saturate : {1, 0}) checkCast(x, to, saturate, "");
      if (to == DataType::kFP8E8M0)
        for (const char* mode : {"down", "nearest"}) checkCast(x, to, 1, mode);
    }
  }
}

TEST(CudaNarrow, CastFromTheNarrowTypesToEveryType) {
  KILN_REQUIRE_GPU();
  for (DataType from : kNarrow) {
    const HostTensor x = allCodes(from);
    for (int ti = 0; ti < 13; ++ti) checkCast(x, static_cast<DataType>(ti), 1, "");
    for (DataType to : kNarrow)
      for (int saturate : {1, 0}) checkCast(x, to, saturate, "");
  }
}

TEST(CudaNarrow, CastLikeToAFloat8Type) {
  KILN_REQUIRE_GPU();
  test::OpCase c;
  c.op = "CastLike";
  c.inputs = {standardTensor(DataType::kHALF, probeValues()), HostTensor(DataType::kFP8E5M2, {1})};
  c.inputs[1].as<uint8_t>()[0] = 0;
  c.attrs.set("saturate", int64_t(0));
  expectSameBytes(runCuda(c, "CastLike").at(0), test::runReference(c)[0], "CastLike half -> float8e5m2, no saturation");
}

TEST(CudaNarrow, QuantizeAndDequantizeTheNarrowTypes) {
  KILN_REQUIRE_GPU();
  const std::vector<double> probes = probeValues();
  const std::vector<DataType> quantTypes = {DataType::kFP8E4M3FN, DataType::kFP8E4M3FNUZ, DataType::kFP8E5M2, DataType::kFP8E5M2FNUZ,
                                            DataType::kFP4E2M1,   DataType::kINT4,        DataType::kUINT4,   DataType::kINT2,
                                            DataType::kUINT2};
  for (DataType q : quantTypes) {
    for (DataType xt : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16}) {
      // x: [4, 64], per-axis scales on axis 0 and a per-axis zero point of the quantized type.
      std::vector<double> xv(256);
      for (size_t i = 0; i < xv.size(); ++i) xv[i] = probes[(i * 37 + 11) % probes.size()] / 8;
      const HostTensor flat = standardTensor(xt, xv);
      HostTensor x2(xt, {4, 64});
      std::memcpy(x2.data(), flat.data(), flat.bytes());
      HostTensor scale = standardTensor(xt, {0.5, 0.125, 2.0, 0.01});
      HostTensor zp(q, {4});
      const HostTensor codes = allCodes(q);
      for (int i = 0; i < 4; ++i) zp.as<uint8_t>()[i] = codes.as<uint8_t>()[(i * 5 + 1) % codes.count()];
      if (isNarrowFloat(q))  // a float8 zero point must be a finite value: 0 and the value 1 of each type
        for (int i = 0; i < 4; ++i) zp.as<uint8_t>()[i] = i % 2 ? floatToNarrow(q, 1.0, true) : 0;
      for (int saturate : {1, 0}) {
        test::OpCase qc;
        qc.op = "QuantizeLinear";
        qc.inputs = {x2, scale, zp};
        qc.attrs.set("axis", int64_t(0));
        if (isNarrowFloat(q)) qc.attrs.set("saturate", static_cast<int64_t>(saturate));
        const std::string what = std::string("QuantizeLinear ") + toString(xt) + " -> " + toString(q) + " saturate " + std::to_string(saturate);
        const auto qref = test::runReference(qc);
        expectSameBytes(runCuda(qc, what).at(0), qref[0], what);
        test::OpCase dc;
        dc.op = "DequantizeLinear";
        dc.inputs = {qref[0], scale, zp};
        dc.attrs.set("axis", int64_t(0));
        const std::string dwhat = std::string("DequantizeLinear ") + toString(q) + " -> " + toString(xt);
        expectSameBytes(runCuda(dc, dwhat).at(0), test::runReference(dc)[0], dwhat);
        if (!isNarrowFloat(q)) break;
      }
    }
  }
}
