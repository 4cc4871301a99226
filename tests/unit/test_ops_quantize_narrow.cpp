// QuantizeLinear / DequantizeLinear to and from the narrow types (float8 kinds, float4e2m1,
// int4/uint4, int2/uint2): per tensor, per axis and blocked, against the ONNX reference evaluator
// (narrow_types_ref.inc). And a plan holding narrow tensors: it round-trips, and a corrupt int4
// byte in it is refused by the plan reader.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kiln/kiln.h"
#include "narrow_types_ref.inc"
#include "op_test_util.h"
#include "runtime/engine_graph.h"

using namespace kiln;

namespace {

float fromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

HostTensor floats(const Dims& d, const std::vector<uint32_t>& bits) {
  HostTensor t(DataType::kFLOAT, d);
  EXPECT_EQ(t.count(), static_cast<int64_t>(bits.size()));
  for (int64_t i = 0; i < t.count(); ++i) t.as<float>()[i] = fromBits(bits[i]);
  return t;
}

//! Narrow values as kiln stores them: one byte each (a code, or the integer's low byte).
HostTensor narrow(DataType type, const Dims& d, const std::vector<int>& v) {
  HostTensor t(type, d);
  EXPECT_EQ(t.count(), static_cast<int64_t>(v.size()));
  for (int64_t i = 0; i < t.count(); ++i) t.as<uint8_t>()[i] = static_cast<uint8_t>(v[i]);
  return t;
}

bool sameFloat(float a, float b) { return std::isnan(a) ? std::isnan(b) : a == b; }

}  // namespace

TEST(QuantizeNarrow, MatchesOnnxReference) {
  for (const auto& c : narrow_ref::kQuant) {
    SCOPED_TRACE(std::string(c.op) + " " + toString(c.quantType) + " x " + toString(c.x) + " scale " + toString(c.scale) +
                 " block " + std::to_string(c.blockSize) + " saturate " + std::to_string(c.saturate));
    const bool q = std::string(c.op) == "QuantizeLinear";
    test::OpCase oc;
    oc.op = c.op;
    oc.attrs.set("axis", c.axis);
    if (c.blockSize) oc.attrs.set("block_size", c.blockSize);
    if (q) oc.attrs.set("saturate", c.saturate);
    oc.inputs.push_back(q ? floats(c.x, c.xf) : narrow(c.quantType, c.x, c.xq));
    oc.inputs.push_back(floats(c.scale, c.scaleF));
    if (!c.zeroPoint.empty()) oc.inputs.push_back(narrow(c.quantType, c.scale, c.zeroPoint));
    else if (q) oc.attrs.set("output_dtype", test::onnxTypeCode(c.quantType));
    HostTensor y = test::runReference(oc).at(0);
    ASSERT_EQ(y.dims(), c.x);
    if (q) {
      ASSERT_EQ(y.type(), c.quantType);
      for (int64_t i = 0; i < y.count(); ++i) {
        if (isNarrowFloat(c.quantType))  // compare values: NaN has several codes
          EXPECT_TRUE(sameFloat(y.getDouble(i), narrowToFloat(c.quantType, static_cast<uint8_t>(c.yq[i])))) << "element " << i;
        else
          EXPECT_EQ(y.getInt(i), c.yq[i]) << "element " << i;
      }
    } else {
      ASSERT_EQ(y.type(), DataType::kFLOAT);
      for (int64_t i = 0; i < y.count(); ++i) EXPECT_TRUE(sameFloat(y.as<float>()[i], fromBits(c.yf[i]))) << "element " << i;
    }
  }
}

TEST(QuantizeNarrow, DequantizeRefusesMismatchedZeroPointType) {
  test::OpCase oc;
  oc.op = "DequantizeLinear";
  oc.inputs = {narrow(DataType::kINT4, {2}, {1, -2}), floats({}, {0x3f800000u}), narrow(DataType::kUINT4, {}, {3})};
  EXPECT_THROW(test::runReference(oc), Error);
}

namespace {

// x (float32) -> QuantizeLinear(scale 0.5, int4 zero points per column) -> q (int4, an output)
//             -> DequantizeLinear(the same) -> y (float32)
const std::vector<int> kZeroPoints = {-8, 7, -3, 5, 1, -1, 2};

std::unique_ptr<Engine> int4Engine() {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {2, 7});
  Tensor* s = net.addConstant("s", floats({}, {0x3f000000u}));
  Tensor* z = net.addConstant("z", narrow(DataType::kINT4, {7}, kZeroPoints));
  Attributes a;
  a.set("axis", int64_t(1));
  Layer* ql = net.addLayer("QuantizeLinear", {x, s, z}, 1, a);
  Layer* dq = net.addLayer("DequantizeLinear", {ql->outputs[0], s, z}, 1, a);
  net.renameTensor(ql->outputs[0], "q");
  net.renameTensor(dq->outputs[0], "y");
  net.markOutput(ql->outputs[0]);
  net.markOutput(dq->outputs[0]);
  BuilderConfig cfg;
  return Builder().build(net, cfg);
}

void runInt4(Engine& e, const HostTensor& x, std::vector<int8_t>& q, std::vector<float>& y) {
  q.assign(14, 99);  // poison: 99 is no int4
  y.assign(14, std::nanf(""));
  auto ctx = e.createExecutionContext();
  ctx->setTensorAddress("x", const_cast<void*>(x.data()));
  ctx->setTensorAddress("q", q.data());
  ctx->setTensorAddress("y", y.data());
  ctx->enqueue();
}

}  // namespace

TEST(QuantizeNarrow, Int4PlanRoundTripsAndCorruptValuesAreRefused) {
  auto engine = int4Engine();
  HostTensor x(DataType::kFLOAT, {2, 7});
  for (int64_t i = 0; i < 14; ++i) x.as<float>()[i] = static_cast<float>(i - 7) * 0.75f;
  std::vector<int8_t> q1, q2;
  std::vector<float> y1, y2;
  runInt4(*engine, x, q1, y1);
  // Hand-computed: q = clamp(rint(x / 0.5) + zp, -8, 7), y = (q - zp) * 0.5.
  for (int64_t i = 0; i < 14; ++i) {
    const int zp = kZeroPoints[i % 7];
    const int want = std::max(-8, std::min(7, static_cast<int>(std::nearbyint(x.as<float>()[i] / 0.5f)) + zp));
    EXPECT_EQ(q1[i], want) << i;
    EXPECT_EQ(y1[i], (want - zp) * 0.5f) << i;
  }
  auto plan = engine->serialize();
  auto loaded = Engine::deserialize(plan.data(), plan.size());
  EXPECT_EQ(loaded->getTensorDataType("q"), DataType::kINT4);
  runInt4(*loaded, x, q2, y2);
  EXPECT_EQ(q1, q2);
  EXPECT_EQ(y1, y2);
  // The zero points are stored one byte each; a byte out of int4's range is refused even when
  // the checksum is not verified (the checksum alone would catch it otherwise).
  std::vector<uint8_t> zp(kZeroPoints.begin(), kZeroPoints.end());
  auto at = std::search(plan.begin(), plan.end(), zp.begin(), zp.end());
  ASSERT_NE(at, plan.end());
  EXPECT_NO_THROW(deserializePlan(plan.data(), plan.size(), /*verifyChecksum=*/false));
  at[1] = 0x17;
  EXPECT_THROW(deserializePlan(plan.data(), plan.size(), /*verifyChecksum=*/false), Error);
  EXPECT_THROW(Engine::deserialize(plan.data(), plan.size()), Error);
}
