// Selection family: ArgMax/ArgMin, TopK, CumSum. Expected values come from NumPy (argmax/argmin,
// a stable argsort for TopK, cumsum) computed offline for the inputs below.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backends/backend.h"
#include "kiln/network.h"
#include "ops/op_registry.h"

using namespace kiln;

namespace {

template <typename T>
HostTensor tensor(DataType type, const Dims& d, const std::vector<T>& v) {
  HostTensor t(type, d);
  EXPECT_EQ(static_cast<size_t>(t.count()), v.size());
  if (t.bytes()) std::memcpy(t.data(), v.data(), t.bytes());  // an empty vector's data() may be null
  return t;
}

HostTensor f32(const Dims& d, const std::vector<float>& v) { return tensor(DataType::kFLOAT, d, v); }
HostTensor i64(const Dims& d, const std::vector<int64_t>& v) { return tensor(DataType::kINT64, d, v); }

struct TestLayer {
  Attributes attrs;
  LayerDesc desc;
  TestLayer(const std::string& op, const std::vector<HostTensor>& inputs, Attributes a) : attrs(std::move(a)) {
    desc.name = "sel";
    desc.op = op;
    desc.attrs = &attrs;
    for (const HostTensor& t : inputs) {
      desc.inputPresent.push_back(true);
      desc.inputs.push_back(TensorDesc{t.type(), t.dims(), t});
    }
  }
  std::vector<HostTensor> evaluate() {
    inferLayer(desc);
    evaluateOnHost(desc);
    std::vector<HostTensor> out;
    for (auto& o : desc.outputs) out.push_back(o.value);
    return out;
  }
};

Attributes attrs(std::initializer_list<std::pair<std::string, AttrValue>> kv) {
  Attributes a;
  for (auto& [k, v] : kv) a.set(k, v);
  return a;
}

template <typename T>
std::vector<T> values(const HostTensor& t) {
  return std::vector<T>(t.as<T>(), t.as<T>() + t.count());
}

const std::vector<float> kArgData = {3, 1, 3, 0, 2, 2, -1, 2, 0, 5, 5, -4};  // 3 x 4

}  // namespace

// ---- ArgMax / ArgMin --------------------------------------------------------------------------

TEST(SelectionArg, ArgMaxFirstAndLastIndex) {
  TestLayer a("ArgMax", {f32({3, 4}, kArgData)}, attrs({{"axis", int64_t(1)}, {"keepdims", int64_t(0)}}));
  HostTensor y = a.evaluate()[0];
  EXPECT_EQ(y.type(), DataType::kINT64);
  EXPECT_EQ(y.dims(), (Dims{3}));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{0, 0, 1}));

  TestLayer b("ArgMax", {f32({3, 4}, kArgData)}, attrs({{"select_last_index", int64_t(1)}}));
  HostTensor z = b.evaluate()[0];
  EXPECT_EQ(z.dims(), (Dims{1, 4}));
  EXPECT_EQ(values<int64_t>(z), (std::vector<int64_t>{0, 2, 2, 1}));
}

TEST(SelectionArg, ArgMinNegativeAxisAndLastIndex) {
  TestLayer a("ArgMin", {f32({3, 4}, kArgData)}, attrs({{"axis", int64_t(-1)}}));
  HostTensor y = a.evaluate()[0];
  EXPECT_EQ(y.dims(), (Dims{3, 1}));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{3, 2, 3}));
  TestLayer b("ArgMin", {f32({3, 4}, {1, 1, 1, 1, 2, 0, 0, 2, 0, 0, 0, 0})},
              attrs({{"axis", int64_t(1)}, {"select_last_index", int64_t(1)}, {"keepdims", int64_t(0)}}));
  EXPECT_EQ(values<int64_t>(b.evaluate()[0]), (std::vector<int64_t>{3, 2, 3}));
}

TEST(SelectionArg, NanWinsLikeNumpyAndIntegersWork) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const char* op : {"ArgMax", "ArgMin"}) {
    TestLayer a(op, {f32({4}, {1, nan, 3, nan})}, attrs({}));
    EXPECT_EQ(values<int64_t>(a.evaluate()[0]), (std::vector<int64_t>{1})) << op;
  }
  TestLayer i("ArgMax", {tensor<int32_t>(DataType::kINT32, {2, 3}, {-5, 7, 7, 9, -9, 9})},
              attrs({{"axis", int64_t(1)}, {"select_last_index", int64_t(1)}}));
  EXPECT_EQ(values<int64_t>(i.evaluate()[0]), (std::vector<int64_t>{2, 2}));
}

TEST(SelectionArg, InvalidInputsThrow) {
  TestLayer axis("ArgMax", {f32({3, 4}, kArgData)}, attrs({{"axis", int64_t(2)}}));
  EXPECT_THROW(inferLayer(axis.desc), Error);
  TestLayer empty("ArgMin", {HostTensor(DataType::kFLOAT, {3, 0})}, attrs({{"axis", int64_t(1)}}));
  EXPECT_THROW(inferLayer(empty.desc), Error);
  TestLayer scalar("ArgMax", {HostTensor(DataType::kFLOAT, {})}, attrs({}));
  EXPECT_THROW(inferLayer(scalar.desc), Error);
  TestLayer boolean("ArgMax", {HostTensor(DataType::kBOOL, {2})}, attrs({}));
  EXPECT_THROW(inferLayer(boolean.desc), Error);
}

// ---- TopK -------------------------------------------------------------------------------------

const std::vector<float> kTopData = {0, 1, 2, 3, 7, 6, 5, 4, 8, 9, 10, 11, 3, 3, 1, 3};  // 4 x 4

TEST(SelectionTopK, LargestTiesByLowerIndex) {
  TestLayer l("TopK", {f32({4, 4}, kTopData), i64({1}, {3})}, attrs({}));
  auto out = l.evaluate();
  EXPECT_EQ(out[0].dims(), (Dims{4, 3}));
  EXPECT_EQ(out[1].type(), DataType::kINT64);
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{3, 2, 1, 7, 6, 5, 11, 10, 9, 3, 3, 3}));
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{3, 2, 1, 0, 1, 2, 3, 2, 1, 0, 1, 3}));
}

TEST(SelectionTopK, SmallestAlongAxisZero) {
  TestLayer l("TopK", {f32({4, 4}, kTopData), i64({1}, {2})}, attrs({{"axis", int64_t(0)}, {"largest", int64_t(0)}}));
  auto out = l.evaluate();
  EXPECT_EQ(out[0].dims(), (Dims{2, 4}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0, 1, 1, 3, 3, 3, 2, 3}));
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{0, 0, 3, 0, 3, 3, 0, 3}));
}

TEST(SelectionTopK, Uint64AndZeroK) {
  TestLayer u("TopK", {tensor<uint64_t>(DataType::kUINT64, {5}, {5, ~uint64_t(0), 0, 7, 7}), i64({1}, {3})}, attrs({}));
  auto out = u.evaluate();
  EXPECT_EQ(values<uint64_t>(out[0]), (std::vector<uint64_t>{~uint64_t(0), 7, 7}));
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{1, 3, 4}));
  TestLayer z("TopK", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({1}, {0})}, attrs({}));
  EXPECT_EQ(z.evaluate()[0].dims(), (Dims{2, 0}));
}

TEST(SelectionTopK, NanOrdersAsLargest) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  TestLayer l("TopK", {f32({4}, {2, nan, 5, -1}), i64({1}, {2})}, attrs({}));
  auto out = l.evaluate();
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{1, 2}));
  TestLayer s("TopK", {f32({4}, {2, nan, 5, -1}), i64({1}, {4})}, attrs({{"largest", int64_t(0)}}));
  EXPECT_EQ(values<int64_t>(s.evaluate()[1]), (std::vector<int64_t>{3, 0, 2, 1}));
}

TEST(SelectionTopK, ShapeWithUnknownKAndErrors) {
  TestLayer u("TopK", {f32({4, 4}, kTopData), i64({1}, {2})}, attrs({}));
  u.desc.inputs[1].value = HostTensor();
  inferLayer(u.desc);
  EXPECT_EQ(u.desc.outputs[0].dims, (Dims{4, -1}));
  EXPECT_EQ(u.desc.outputs[1].dims, (Dims{4, -1}));

  TestLayer big("TopK", {f32({4, 4}, kTopData), i64({1}, {5})}, attrs({}));
  EXPECT_THROW(inferLayer(big.desc), Error);
  TestLayer neg("TopK", {f32({4, 4}, kTopData), i64({1}, {-1})}, attrs({}));
  EXPECT_THROW(inferLayer(neg.desc), Error);
  TestLayer twoK("TopK", {f32({4, 4}, kTopData), i64({2}, {1, 2})}, attrs({}));
  EXPECT_THROW(inferLayer(twoK.desc), Error);
  TestLayer k32("TopK", {f32({4, 4}, kTopData), tensor<int32_t>(DataType::kINT32, {1}, {1})}, attrs({}));
  EXPECT_THROW(inferLayer(k32.desc), Error);
  TestLayer axis("TopK", {f32({4, 4}, kTopData), i64({1}, {1})}, attrs({{"axis", int64_t(-3)}}));
  EXPECT_THROW(inferLayer(axis.desc), Error);
}

TEST(SelectionTopK, Opset1AttributeKBecomesInput) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {3, 5});
  Layer* l = net.addLayer("TopK", {x}, 2, attrs({{"k", int64_t(2)}}));
  OpRegistry::instance().find("TopK")->normalize(net, *l, 1);
  ASSERT_EQ(l->inputs.size(), 2u);
  ASSERT_TRUE(l->inputs[1]->isConstant());
  EXPECT_EQ(l->inputs[1]->value.toInts(), (std::vector<int64_t>{2}));
  EXPECT_FALSE(l->attrs.has("k"));
  net.inferShapes();
  EXPECT_EQ(l->outputs[0]->dims, (Dims{3, 2}));
}

// ---- CumSum -----------------------------------------------------------------------------------

TEST(SelectionCumSum, ExclusiveAndReverseCombinations) {
  const std::vector<double> x = {1, 2, 3, 4, 5, 6};  // 2 x 3
  struct Case {
    int64_t axis, exclusive, reverse;
    std::vector<double> want;
  };
  const std::vector<Case> cases = {
      {0, 0, 0, {1, 2, 3, 5, 7, 9}},
      {1, 0, 1, {6, 5, 3, 15, 11, 6}},
      {1, 1, 0, {0, 1, 3, 0, 4, 9}},
      {-2, 1, 1, {4, 5, 6, 0, 0, 0}},
  };
  for (const Case& c : cases) {
    TestLayer l("CumSum", {tensor(DataType::kDOUBLE, {2, 3}, x), i64({}, {c.axis})},
                attrs({{"exclusive", c.exclusive}, {"reverse", c.reverse}}));
    HostTensor y = l.evaluate()[0];
    EXPECT_EQ(y.type(), DataType::kDOUBLE);
    EXPECT_EQ(values<double>(y), c.want) << c.axis << c.exclusive << c.reverse;
  }
}

TEST(SelectionCumSum, Int32DataAndAxis) {
  TestLayer l("CumSum", {tensor<int32_t>(DataType::kINT32, {5}, {1, 2, 3, 4, 5}), tensor<int32_t>(DataType::kINT32, {1}, {0})},
              attrs({{"exclusive", int64_t(1)}}));
  EXPECT_EQ(values<int32_t>(l.evaluate()[0]), (std::vector<int32_t>{0, 1, 3, 6, 10}));
}

TEST(SelectionCumSum, InvalidInputsThrow) {
  TestLayer axis("CumSum", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({}, {2})}, attrs({}));
  EXPECT_THROW(inferLayer(axis.desc), Error);
  TestLayer floatAxis("CumSum", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({}, {0})}, attrs({}));
  EXPECT_THROW(inferLayer(floatAxis.desc), Error);
  TestLayer twoAxes("CumSum", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({2}, {0, 1})}, attrs({}));
  EXPECT_THROW(inferLayer(twoAxes.desc), Error);
  TestLayer boolean("CumSum", {HostTensor(DataType::kBOOL, {2}), i64({}, {0})}, attrs({}));
  EXPECT_THROW(inferLayer(boolean.desc), Error);
}
