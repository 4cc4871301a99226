// Shape family: inference (static, dynamic, value inputs, errors), reference kernels against
// values from the ONNX reference evaluator (onnx 1.23, computed offline for the inputs below),
// and the optimized CPU tactics against the reference kernels on random data of every element size.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "backends/backend.h"
#include "core/thread_pool.h"
#include "kiln/network.h"
#include "ops/op_registry.h"
#include "poison.h"

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
HostTensor i64s(const std::vector<int64_t>& v) { return i64({static_cast<int64_t>(v.size())}, v); }
HostTensor arangeF(const Dims& d) {
  HostTensor t(DataType::kFLOAT, d);
  for (int64_t i = 0; i < t.count(); ++i) t.as<float>()[i] = static_cast<float>(i);
  return t;
}

template <typename T>
std::vector<T> values(const HostTensor& t) {
  return std::vector<T>(t.as<T>(), t.as<T>() + t.count());
}

Attributes attrs(std::initializer_list<std::pair<std::string, AttrValue>> kv) {
  Attributes a;
  for (auto& [k, v] : kv) a.set(k, v);
  return a;
}

//! An input of a test layer: a known value, or type + dims only (value unknown), or omitted.
struct In {
  TensorDesc desc;
  bool present = true;
  In(HostTensor v) : desc{v.type(), v.dims(), v} {}  // NOLINT: implicit for brevity
  In(DataType t, Dims d) : desc{t, std::move(d), HostTensor()} {}
  static In omitted() {
    In i(DataType::kFLOAT, {});
    i.present = false;
    return i;
  }
};

struct TestLayer {
  Attributes attrs;
  LayerDesc desc;
  TestLayer(const std::string& op, const std::vector<In>& inputs, Attributes a = {}, size_t nOut = 1) : attrs(std::move(a)) {
    desc.name = "shape_test";
    desc.op = op;
    desc.attrs = &attrs;
    for (const In& in : inputs) {
      desc.inputPresent.push_back(in.present);
      desc.inputs.push_back(in.desc);
    }
    desc.outputs.resize(nOut);
  }
  Dims infer() {
    inferLayer(desc);
    return desc.outputs[0].dims;
  }
  std::vector<HostTensor> evaluate() {
    inferLayer(desc);
    for (auto& o : desc.outputs) o.value = HostTensor();
    evaluateOnHost(desc);
    std::vector<HostTensor> out;
    for (auto& o : desc.outputs) out.push_back(o.value);
    return out;
  }
};

constexpr int64_t U = -1;  // unknown dim

// ---------------------------------------------------------------- inference

TEST(ShapeInference, ReshapeCopiesZeroAndInfersMinusOne) {
  EXPECT_EQ(TestLayer("Reshape", {In(DataType::kFLOAT, {2, 3, 4}), i64s({0, -1})}).infer(), (Dims{2, 12}));
  EXPECT_EQ(TestLayer("Reshape", {In(DataType::kFLOAT, {2, 3, 4}), i64s({4, 0, -1})}).infer(), (Dims{4, 3, 2}));
  EXPECT_EQ(TestLayer("Reshape", {In(DataType::kFLOAT, {0, 3}), i64s({0, 0})}, attrs({{"allowzero", int64_t(1)}})).infer(),
            (Dims{0, 0}));
}

TEST(ShapeInference, ReshapeWithDynamicDims) {
  // [B, S, 768] -> [B, S, 12, 64]: copied dims stay unknown, the rest is known.
  EXPECT_EQ(TestLayer("Reshape", {In(DataType::kFLOAT, {U, U, 768}), i64s({0, 0, 12, 64})}).infer(), (Dims{U, U, 12, 64}));
  EXPECT_EQ(TestLayer("Reshape", {In(DataType::kFLOAT, {U, 768}), i64s({-1, 12, 64})}).infer(), (Dims{U, 12, 64}));
  // Shape value unknown but of known length: the rank is known.
  EXPECT_EQ(TestLayer("Reshape", {In(DataType::kFLOAT, {2, 6}), In(DataType::kINT64, {3})}).infer(), (Dims{U, U, U}));
  EXPECT_THROW(TestLayer("Reshape", {In(DataType::kFLOAT, {2, 6}), In(DataType::kINT64, {U})}).infer(), UnsupportedError);
}

TEST(ShapeInference, ReshapeRejectsBadShapes) {
  EXPECT_THROW(TestLayer("Reshape", {In(DataType::kFLOAT, {2, 3}), i64s({4, 2})}).infer(), Error);
  EXPECT_THROW(TestLayer("Reshape", {In(DataType::kFLOAT, {2, 3}), i64s({-1, -1})}).infer(), Error);
  EXPECT_THROW(TestLayer("Reshape", {In(DataType::kFLOAT, {2, 3}), i64s({4, -1})}).infer(), Error);
  EXPECT_THROW(TestLayer("Reshape", {In(DataType::kFLOAT, {2, 3}), i64s({-2, 3})}).infer(), Error);
  EXPECT_THROW(TestLayer("Reshape", {In(DataType::kFLOAT, {6}), i64s({0, 0, 6})}).infer(), Error);  // copies a missing dim
  EXPECT_THROW(TestLayer("Reshape", {In(DataType::kFLOAT, {6}), i64s({0, -1})}, attrs({{"allowzero", int64_t(1)}})).infer(), Error);
  EXPECT_THROW(TestLayer("Reshape", {In(DataType::kFLOAT, {6}), f32({1}, {6})}).infer(), Error);  // float shape
}

TEST(ShapeInference, FlattenSqueezeUnsqueeze) {
  EXPECT_EQ(TestLayer("Flatten", {In(DataType::kFLOAT, {2, 3, 4})}, attrs({{"axis", int64_t(-1)}})).infer(), (Dims{6, 4}));
  EXPECT_EQ(TestLayer("Flatten", {In(DataType::kFLOAT, {U, 3, 4})}).infer(), (Dims{U, 12}));
  EXPECT_EQ(TestLayer("Flatten", {In(DataType::kFLOAT, {2, 3})}, attrs({{"axis", int64_t(0)}})).infer(), (Dims{1, 6}));
  EXPECT_THROW(TestLayer("Flatten", {In(DataType::kFLOAT, {2, 3})}, attrs({{"axis", int64_t(3)}})).infer(), Error);
  EXPECT_EQ(TestLayer("Squeeze", {In(DataType::kFLOAT, {1, 3, 1, 2})}).infer(), (Dims{3, 2}));
  EXPECT_EQ(TestLayer("Squeeze", {In(DataType::kFLOAT, {U, 1, 4}), i64s({-2})}).infer(), (Dims{U, 4}));
  EXPECT_THROW(TestLayer("Squeeze", {In(DataType::kFLOAT, {U, 1, 4})}).infer(), UnsupportedError);
  EXPECT_THROW(TestLayer("Squeeze", {In(DataType::kFLOAT, {2, 1}), i64s({0})}).infer(), Error);   // not size 1
  EXPECT_THROW(TestLayer("Squeeze", {In(DataType::kFLOAT, {2, 1}), i64s({2})}).infer(), Error);   // out of range
  EXPECT_EQ(TestLayer("Unsqueeze", {In(DataType::kFLOAT, {U, 4}), i64s({0, -1})}).infer(), (Dims{1, U, 4, 1}));
  EXPECT_EQ(TestLayer("Unsqueeze", {In(DataType::kFLOAT, {3}), In(DataType::kINT64, {2})}).infer(), (Dims{U, U, U}));
  EXPECT_THROW(TestLayer("Unsqueeze", {In(DataType::kFLOAT, {3}), i64s({0, 0})}).infer(), Error);  // repeated
  EXPECT_THROW(TestLayer("Unsqueeze", {In(DataType::kFLOAT, {3}), i64s({3})}).infer(), Error);     // out of range
}

TEST(ShapeInference, TransposeConcatSplit) {
  EXPECT_EQ(TestLayer("Transpose", {In(DataType::kHALF, {U, 128, 12, 64})}, attrs({{"perm", std::vector<int64_t>{0, 2, 1, 3}}})).infer(),
            (Dims{U, 12, 128, 64}));
  EXPECT_EQ(TestLayer("Transpose", {In(DataType::kFLOAT, {2, 3, 4})}).infer(), (Dims{4, 3, 2}));
  EXPECT_THROW(TestLayer("Transpose", {In(DataType::kFLOAT, {2, 3})}, attrs({{"perm", std::vector<int64_t>{0, 0}}})).infer(), Error);
  EXPECT_EQ(TestLayer("Concat", {In(DataType::kFLOAT, {U, 3}), In(DataType::kFLOAT, {2, 5})}, attrs({{"axis", int64_t(-1)}})).infer(),
            (Dims{2, 8}));
  EXPECT_EQ(TestLayer("Concat", {In(DataType::kFLOAT, {U, 3}), In(DataType::kFLOAT, {2, 3})}, attrs({{"axis", int64_t(0)}})).infer(),
            (Dims{U, 3}));
  EXPECT_THROW(TestLayer("Concat", {In(DataType::kFLOAT, {2, 3}), In(DataType::kFLOAT, {2, 4})}, attrs({{"axis", int64_t(0)}})).infer(), Error);
  EXPECT_THROW(TestLayer("Concat", {In(DataType::kFLOAT, {2, 3})}, attrs({{"axis", int64_t(2)}})).infer(), Error);
  TestLayer split("Split", {In(DataType::kFLOAT, {4, 7})}, attrs({{"axis", int64_t(1)}, {"num_outputs", int64_t(3)}}), 3);
  split.infer();
  EXPECT_EQ(split.desc.outputs[2].dims, (Dims{4, 1}));
  EXPECT_THROW(TestLayer("Split", {In(DataType::kFLOAT, {4, 7}), i64s({3, 3})}, attrs({{"axis", int64_t(1)}}), 2).infer(), Error);
  EXPECT_THROW(TestLayer("Split", {In(DataType::kFLOAT, {4, 7})}, attrs({{"axis", int64_t(1)}}), 2).infer(), Error);
}

TEST(ShapeInference, SliceClampsAndHandlesUnknowns) {
  const int64_t big = std::numeric_limits<int64_t>::max(), small = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(TestLayer("Slice", {In(DataType::kFLOAT, {10, 8}), i64s({-3, small}), i64s({big, big})}).infer(), (Dims{3, 8}));
  EXPECT_EQ(TestLayer("Slice", {In(DataType::kFLOAT, {10, 8}), i64s({big}), i64s({small}), i64s({1}), i64s({-3})}).infer(),
            (Dims{10, 3}));
  // Dynamic sliced dim -> unknown; other dims kept.
  EXPECT_EQ(TestLayer("Slice", {In(DataType::kFLOAT, {U, 8}), i64s({1}), i64s({3}), i64s({0})}).infer(), (Dims{U, 8}));
  // Unknown starts with known axes: only those axes become unknown.
  EXPECT_EQ(TestLayer("Slice", {In(DataType::kFLOAT, {4, 8, 2}), In(DataType::kINT64, {1}), i64s({3}), i64s({1})}).infer(),
            (Dims{4, U, 2}));
  EXPECT_THROW(TestLayer("Slice", {In(DataType::kFLOAT, {4}), i64s({0}), i64s({3}), i64s({0}), i64s({0})}).infer(), Error);
  EXPECT_THROW(TestLayer("Slice", {In(DataType::kFLOAT, {4}), i64s({0}), i64s({3}), i64s({1})}).infer(), Error);
  EXPECT_THROW(TestLayer("Slice", {In(DataType::kFLOAT, {4}), i64s({0, 1}), i64s({3})}).infer(), Error);
}

TEST(ShapeInference, ExpandAndTileOverflowIsAnError) {
  const int64_t huge = int64_t(1) << 31;  // 2^31 x 2^31 = 2^62 elements
  EXPECT_THROW(TestLayer("Expand", {In(DataType::kFLOAT, {1, 1}), i64s({huge, huge})}).infer(), Error);
  EXPECT_THROW(TestLayer("Tile", {In(DataType::kFLOAT, {huge, 2}), i64s({huge, 1})}).infer(), Error);
  EXPECT_THROW(TestLayer("Tile", {In(DataType::kFLOAT, {int64_t(1) << 40}), i64s({int64_t(1) << 40})}).infer(), Error);
  EXPECT_THROW(TestLayer("Expand", {In(DataType::kFLOAT, {3}), i64s({4})}).infer(), Error);
  EXPECT_THROW(TestLayer("Tile", {In(DataType::kFLOAT, {3}), i64s({-1})}).infer(), Error);
  EXPECT_EQ(TestLayer("Expand", {In(DataType::kFLOAT, {3, 1}), i64s({2, 1, 4})}).infer(), (Dims{2, 3, 4}));
  EXPECT_EQ(TestLayer("Expand", {In(DataType::kFLOAT, {3, 1}), In(DataType::kINT64, {3})}).infer(), (Dims{U, 3, U}));
  EXPECT_EQ(TestLayer("Tile", {In(DataType::kFLOAT, {U, 2}), i64s({3, 2})}).infer(), (Dims{U, 4}));
}

TEST(ShapeInference, PadShapeSizeRange) {
  EXPECT_EQ(TestLayer("Pad", {In(DataType::kFLOAT, {2, 3}), i64s({1, -1, 2, 0})}).infer(), (Dims{5, 2}));
  EXPECT_EQ(TestLayer("Pad", {In(DataType::kFLOAT, {2, U, 3}), i64s({1, 2}), In::omitted(), i64s({-1})}).infer(), (Dims{2, U, 6}));
  EXPECT_THROW(TestLayer("Pad", {In(DataType::kFLOAT, {2, 3}), i64s({1, 1})}).infer(), Error);
  EXPECT_THROW(TestLayer("Pad", {In(DataType::kFLOAT, {2, 3}), i64s({0, -4, 0, 0})}).infer(), Error);
  EXPECT_THROW(TestLayer("Pad", {In(DataType::kFLOAT, {2}), i64s({1, 1})}, attrs({{"mode", std::string("mirror")}})).infer(), Error);

  // Shape's value is known whenever the requested dims are, even if others are dynamic.
  TestLayer shape("Shape", {In(DataType::kFLOAT, {U, 128, 768})}, attrs({{"start", int64_t(1)}}));
  EXPECT_EQ(shape.infer(), (Dims{2}));
  ASSERT_TRUE(shape.desc.outputs[0].value.valid());
  EXPECT_EQ(values<int64_t>(shape.desc.outputs[0].value), (std::vector<int64_t>{128, 768}));
  TestLayer dynShape("Shape", {In(DataType::kFLOAT, {U, 128})});
  EXPECT_EQ(dynShape.infer(), (Dims{2}));
  EXPECT_FALSE(dynShape.desc.outputs[0].value.valid());
  TestLayer size("Size", {In(DataType::kHALF, {2, 3, 4})});
  EXPECT_EQ(size.infer(), (Dims{}));
  EXPECT_EQ(values<int64_t>(size.desc.outputs[0].value), (std::vector<int64_t>{24}));

  EXPECT_EQ(TestLayer("Range", {f32({}, {0}), f32({}, {1}), f32({}, {0.3f})}).infer(), (Dims{4}));
  EXPECT_EQ(TestLayer("Range", {In(DataType::kINT64, {}), i64({}, {5}), i64({}, {1})}).infer(), (Dims{U}));
  EXPECT_THROW(TestLayer("Range", {i64({}, {0}), i64({}, {5}), i64({}, {0})}).infer(), Error);
  EXPECT_EQ(TestLayer("ConstantOfShape", {In(DataType::kINT64, {3})}).infer(), (Dims{U, U, U}));
  EXPECT_THROW(TestLayer("ConstantOfShape", {i64s({2, -3})}).infer(), Error);
}

TEST(ShapeInference, IndexOps) {
  EXPECT_EQ(TestLayer("Gather", {In(DataType::kFLOAT, {U, 768}), In(DataType::kINT64, {2, U})}).infer(), (Dims{2, U, 768}));
  EXPECT_EQ(TestLayer("Gather", {In(DataType::kINT64, {4}), i64({}, {1})}).infer(), (Dims{}));
  EXPECT_THROW(TestLayer("Gather", {In(DataType::kFLOAT, {3, 2}), i64s({3})}).infer(), Error);   // index out of range
  EXPECT_THROW(TestLayer("Gather", {In(DataType::kFLOAT, {3, 2}), i64s({0})}, attrs({{"axis", int64_t(2)}})).infer(), Error);
  EXPECT_THROW(TestLayer("Gather", {In(DataType::kFLOAT, {3}), f32({1}, {0})}).infer(), Error);  // float indices
  EXPECT_EQ(TestLayer("GatherND", {In(DataType::kFLOAT, {2, 3, 4}), In(DataType::kINT64, {2, 5, 2})}, attrs({{"batch_dims", int64_t(1)}})).infer(),
            (Dims{2, 5}));
  EXPECT_THROW(TestLayer("GatherND", {In(DataType::kFLOAT, {2, 3}), In(DataType::kINT64, {4, 3})}).infer(), Error);
  EXPECT_EQ(TestLayer("OneHot", {In(DataType::kINT64, {U, 3}), i64({}, {10}), In(DataType::kHALF, {2})}, attrs({{"axis", int64_t(1)}})).infer(),
            (Dims{U, 10, 3}));
  EXPECT_EQ(TestLayer("NonZero", {In(DataType::kFLOAT, {4, 5})}).infer(), (Dims{2, U}));
  EXPECT_EQ(TestLayer("NonZero", {f32({2, 2}, {0, 1, 2, 0})}).infer(), (Dims{2, 2}));
  EXPECT_THROW(TestLayer("ScatterND", {In(DataType::kFLOAT, {4, 4}), In(DataType::kINT64, {2, 1}), In(DataType::kFLOAT, {2, 3})}).infer(), Error);
}

TEST(ShapeInference, DropoutTrainingIsUnsupported) {
  TestLayer d("Dropout", {In(DataType::kFLOAT, {2, 3})}, {}, 2);
  d.infer();
  EXPECT_EQ(d.desc.outputs[1].type, DataType::kBOOL);
  HostTensor yes(DataType::kBOOL, {});
  *yes.as<uint8_t>() = 1;
  EXPECT_THROW(TestLayer("Dropout", {In(DataType::kFLOAT, {2}), f32({}, {0.5f}), yes}).infer(), UnsupportedError);
  EXPECT_NO_THROW(TestLayer("Dropout", {In(DataType::kFLOAT, {2}), f32({}, {0.f}), yes}).infer());
}

TEST(ShapeInference, NormalizeMovesAttributesToInputs) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {1, 3, 1});
  Layer* sq = net.addLayer("Squeeze", {x}, 1, attrs({{"axes", std::vector<int64_t>{0, 2}}}));
  OpRegistry::instance().find("Squeeze")->normalize(net, *sq, 11);
  ASSERT_EQ(sq->inputs.size(), 2u);
  EXPECT_FALSE(sq->attrs.has("axes"));
  EXPECT_EQ(sq->inputs[1]->value.toInts(), (std::vector<int64_t>{0, 2}));
  Layer* sl = net.addLayer("Slice", {x}, 1, attrs({{"starts", std::vector<int64_t>{0}}, {"ends", std::vector<int64_t>{1}}}));
  OpRegistry::instance().find("Slice")->normalize(net, *sl, 9);
  ASSERT_EQ(sl->inputs.size(), 3u);
  EXPECT_EQ(sl->inputs[2]->value.toInts(), (std::vector<int64_t>{1}));
  Layer* pad = net.addLayer("Pad", {x}, 1, attrs({{"pads", std::vector<int64_t>{0, 1, 0, 0, 1, 0}}, {"value", 2.5f}}));
  OpRegistry::instance().find("Pad")->normalize(net, *pad, 2);
  ASSERT_EQ(pad->inputs.size(), 3u);
  net.markOutput(sq->outputs[0]);
  net.markOutput(sl->outputs[0]);
  net.markOutput(pad->outputs[0]);
  net.inferShapes();
  EXPECT_EQ(sq->outputs[0]->dims, (Dims{3}));
  EXPECT_EQ(sl->outputs[0]->dims, (Dims{1, 3, 1}));
  EXPECT_EQ(pad->outputs[0]->dims, (Dims{1, 5, 1}));
}

// ---------------------------------------------------------------- reference kernels (ONNX reference values)

TEST(ShapeReference, SliceNegativeSteps) {
  auto out = TestLayer("Slice", {arangeF({2, 3, 4}), i64s({-1, 3}), i64s({-100, 0}), i64s({1, 2}), i64s({-1, -2})}).evaluate();
  EXPECT_EQ(out[0].dims(), (Dims{2, 3, 2}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{11, 9, 7, 5, 3, 1, 23, 21, 19, 17, 15, 13}));
}

TEST(ShapeReference, PadModes) {
  HostTensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto pad = [&](const std::string& mode) {
    return values<float>(TestLayer("Pad", {x, i64s({1, 3, 0, 4}), f32({}, {9})}, attrs({{"mode", mode}})).evaluate()[0]);
  };
  EXPECT_EQ(pad("constant"), (std::vector<float>{9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 9, 9, 9, 9, 9, 4, 5, 6, 9, 9, 9, 9}));
  EXPECT_EQ(pad("reflect"), (std::vector<float>{5, 6, 5, 4, 5, 6, 5, 4, 5, 6, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3, 5, 6, 5, 4, 5, 6, 5, 4, 5, 6}));
  EXPECT_EQ(pad("edge"), (std::vector<float>{1, 1, 1, 1, 2, 3, 3, 3, 3, 3, 1, 1, 1, 1, 2, 3, 3, 3, 3, 3, 4, 4, 4, 4, 5, 6, 6, 6, 6, 6}));
  EXPECT_EQ(pad("wrap"), (std::vector<float>{4, 5, 6, 4, 5, 6, 4, 5, 6, 4, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 4, 5, 6, 4, 5, 6, 4, 5, 6, 4}));
}

TEST(ShapeReference, TriluGatherScatterOneHot) {
  HostTensor t = i64({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  EXPECT_EQ(values<int64_t>(TestLayer("Trilu", {t, i64({}, {1})}).evaluate()[0]), (std::vector<int64_t>{0, 1, 2, 3, 0, 0, 6, 7, 0, 0, 0, 11}));
  EXPECT_EQ(values<int64_t>(TestLayer("Trilu", {t, i64({}, {-1})}, attrs({{"upper", int64_t(0)}})).evaluate()[0]),
            (std::vector<int64_t>{0, 0, 0, 0, 4, 0, 0, 0, 8, 9, 0, 0}));
  auto gnd = TestLayer("GatherND", {arangeF({2, 3, 4}), i64({2, 1, 2}, {1, 2, 0, 3})}, attrs({{"batch_dims", int64_t(1)}})).evaluate()[0];
  EXPECT_EQ(gnd.dims(), (Dims{2, 1}));
  EXPECT_EQ(values<float>(gnd), (std::vector<float>{6, 15}));
  auto snd = TestLayer("ScatterND", {arangeF({8}), i64({4, 1}, {4, 3, 1, 4}), f32({4}, {9, 10, 11, 12})},
                       attrs({{"reduction", std::string("add")}})).evaluate()[0];
  EXPECT_EQ(values<float>(snd), (std::vector<float>{0, 12, 2, 13, 25, 5, 6, 7}));
  auto oh = TestLayer("OneHot", {i64s({0, -1, 2, 5}), i64({}, {3}), f32({2}, {0, 1})}, attrs({{"axis", int64_t(0)}})).evaluate()[0];
  EXPECT_EQ(oh.dims(), (Dims{3, 4}));
  EXPECT_EQ(values<float>(oh), (std::vector<float>{1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0}));
  auto ge = TestLayer("GatherElements", {t, i64({3, 2}, {3, 0, 1, -1, 0, 0})}, attrs({{"axis", int64_t(1)}})).evaluate()[0];
  EXPECT_EQ(values<int64_t>(ge), (std::vector<int64_t>{3, 0, 5, 7, 8, 8}));
  auto se = TestLayer("ScatterElements", {arangeF({3, 4}), i64({2, 1}, {1, 0}), f32({2, 1}, {5, 7})},
                      attrs({{"axis", int64_t(0)}, {"reduction", std::string("max")}})).evaluate()[0];
  EXPECT_EQ(values<float>(se), (std::vector<float>{7, 1, 2, 3, 5, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_THROW(TestLayer("GatherElements", {t, i64({1, 1}, {4})}, attrs({{"axis", int64_t(1)}})).evaluate(), Error);
}

TEST(ShapeReference, ExpandTileNonZeroCompressRangeSplit) {
  auto tile = TestLayer("Tile", {tensor<int8_t>(DataType::kINT8, {1, 2}, {1, 2}), i64s({2, 2})}).evaluate()[0];
  EXPECT_EQ(tile.dims(), (Dims{2, 4}));
  EXPECT_EQ(values<int8_t>(tile), (std::vector<int8_t>{1, 2, 1, 2, 1, 2, 1, 2}));
  auto ex = TestLayer("Expand", {tensor<int16_t>(DataType::kINT16, {2, 1}, {1, 2}), i64s({2, 1, 3})}).evaluate()[0];
  EXPECT_EQ(ex.dims(), (Dims{2, 2, 3}));
  EXPECT_EQ(values<int16_t>(ex), (std::vector<int16_t>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2}));
  TestLayer nz("NonZero", {f32({2, 3}, {0, 1.5f, 0, -2, 0, -0.f})});
  EXPECT_EQ(nz.infer(), (Dims{2, 2}));
  EXPECT_EQ(values<int64_t>(nz.desc.outputs[0].value), (std::vector<int64_t>{0, 1, 1, 0}));
  HostTensor cond(DataType::kBOOL, {3});
  cond.as<uint8_t>()[0] = cond.as<uint8_t>()[2] = 1;
  auto cp = TestLayer("Compress", {i64({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}), cond}, attrs({{"axis", int64_t(0)}})).evaluate()[0];
  EXPECT_EQ(values<int64_t>(cp), (std::vector<int64_t>{0, 1, 2, 3, 8, 9, 10, 11}));
  auto range = TestLayer("Range", {tensor<int32_t>(DataType::kINT32, {}, {10}), tensor<int32_t>(DataType::kINT32, {}, {1}),
                                   tensor<int32_t>(DataType::kINT32, {}, {-3})}).evaluate()[0];
  EXPECT_EQ(values<int32_t>(range), (std::vector<int32_t>{10, 7, 4}));
  auto split = TestLayer("Split", {arangeF({7})}, attrs({{"num_outputs", int64_t(3)}}), 3).evaluate();
  EXPECT_EQ(values<float>(split[1]), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(values<float>(split[2]), (std::vector<float>{6}));
}

// ---------------------------------------------------------------- optimized tactics vs reference

HostTensor randomBytes(DataType t, const Dims& d, uint32_t seed) {
  HostTensor h(t, d);
  std::mt19937 rng(seed);
  auto* p = static_cast<uint8_t*>(h.data());
  for (size_t i = 0; i < h.bytes(); ++i) p[i] = static_cast<uint8_t>(rng());
  return h;
}

std::vector<HostTensor> runTactic(const Tactic& tactic, const LayerDesc& desc) {
  static auto backend = getBackend(DeviceType::kCPU, 4);
  auto kernel = tactic.create(desc);
  std::unique_ptr<KernelState> state;
  kernel->reshape(desc, state);
  KernelIO io;
  io.pool = backend->pool();
  for (size_t i = 0; i < desc.inputs.size(); ++i) {
    const HostTensor& v = desc.inputs[i].value;
    io.in.push_back(desc.present(i) ? TensorView{const_cast<void*>(v.data()), v.type(), v.dims(), v.count()} : TensorView{});
  }
  std::vector<HostTensor> outs;
  for (auto& o : desc.outputs) {
    outs.push_back(kiln::test::poisoned(o.type, o.dims));  // catch unwritten elements
    io.out.push_back(TensorView{outs.back().data(), o.type, o.dims, outs.back().count()});
  }
  kernel->execute(io, state.get());
  return outs;
}

//! Runs every optimized CPU tactic of the layer and the reference tactic; outputs must be identical.
void expectTacticsMatchReference(TestLayer& layer, const std::string& expectTactic) {
  inferLayer(layer.desc);
  auto tactics = getBackend(DeviceType::kCPU, 4)->tactics(layer.desc);
  bool found = false;
  auto ref = runTactic(referenceTactic(layer.desc.op), layer.desc);
  for (const Tactic& t : tactics) {
    found = found || t.name == expectTactic;
    auto got = runTactic(t, layer.desc);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].dims(), ref[i].dims());
      EXPECT_EQ(std::memcmp(got[i].data(), ref[i].data(), got[i].bytes()), 0)
          << layer.desc.op << " tactic " << t.name << " output " << i << " dims " << toString(got[i].dims());
    }
  }
  EXPECT_TRUE(found) << "no '" << expectTactic << "' tactic for " << layer.desc.op;
}

const DataType kAllSizes[] = {DataType::kINT8, DataType::kHALF, DataType::kFLOAT, DataType::kINT64};

TEST(ShapeTactics, TransposeMatchesReference) {
  struct Case { Dims dims; std::vector<int64_t> perm; };
  const Case cases[] = {
      {{2, 37, 12, 64}, {0, 2, 1, 3}},  // attention: [B,S,H,D] -> [B,H,S,D]
      {{2, 12, 37, 64}, {0, 2, 1, 3}},  // and back
      {{2, 12, 37, 64}, {0, 1, 3, 2}},  // K^T: [B,H,S,D] -> [B,H,D,S]
      {{3, 65, 33}, {2, 1, 0}},
      {{5, 1, 7, 1, 3}, {4, 3, 2, 1, 0}},
      {{4, 6, 5, 3}, {1, 3, 0, 2}},
      {{70, 3}, {1, 0}},
      // 4-byte elements go through 8x8 register blocks: whole tiles, blocks at a tile's edge, and
      // leftover rows / columns shorter than a block on either side.
      {{2, 45, 71}, {0, 2, 1}},
      {{1, 128, 256}, {0, 2, 1}},  // SegFormer's token <-> channel transpose, power-of-two stride
      {{3, 8, 9, 16}, {0, 3, 1, 2}},
      {{0, 3}, {1, 0}},
      {{}, {}},
  };
  uint32_t seed = 1;
  for (const Case& c : cases)
    for (DataType t : kAllSizes) {
      TestLayer l("Transpose", {randomBytes(t, c.dims, seed++)}, attrs({{"perm", c.perm}}));
      expectTacticsMatchReference(l, "transpose_any_blocked");
    }
}

TEST(ShapeTactics, ConcatSliceGatherMatchReference) {
  uint32_t seed = 100;
  for (DataType t : kAllSizes) {
    for (int64_t axis : {0, 1, 2}) {
      Dims a = {3, 4, 5}, b = a;
      b[axis] = 2;
      TestLayer l("Concat", {randomBytes(t, a, seed++), randomBytes(t, b, seed++), randomBytes(t, a, seed++)}, attrs({{"axis", axis}}));
      expectTacticsMatchReference(l, "concat_any_memcpy");
    }
    const std::vector<std::vector<int64_t>> slices[] = {
        {{1, 0}, {3, 100}, {0, 2}, {1, 1}},     // contiguous rows
        {{0}, {5}, {2}, {2}},                   // strided innermost
        {{-1, -2}, {-100, 0}, {1, 2}, {-1, -2}},  // negative steps
        {{0, 0, 0}, {3, 4, 5}, {0, 1, 2}, {1, 1, 1}},  // whole tensor
        {{2}, {2}, {0}, {1}},                   // empty
    };
    for (const auto& s : slices) {
      TestLayer l("Slice", {randomBytes(t, {3, 4, 5}, seed++), i64s(s[0]), i64s(s[1]), i64s(s[2]), i64s(s[3])});
      expectTacticsMatchReference(l, "slice_any_memcpy");
    }
    TestLayer g0("Gather", {randomBytes(t, {50, 16}, seed++), i64({2, 3}, {0, 49, -1, 7, 7, 3})});
    expectTacticsMatchReference(g0, "gather_any_memcpy");
    TestLayer g1("Gather", {randomBytes(t, {4, 6, 3}, seed++), tensor<int32_t>(DataType::kINT32, {2}, {5, -6})}, attrs({{"axis", int64_t(1)}}));
    expectTacticsMatchReference(g1, "gather_any_memcpy");
    TestLayer g2("Gather", {randomBytes(t, {4, 6}, seed++), i64({}, {2})}, attrs({{"axis", int64_t(1)}}));
    expectTacticsMatchReference(g2, "gather_any_memcpy");
    TestLayer r("Reshape", {randomBytes(t, {4, 6}, seed++), i64s({3, -1})});
    expectTacticsMatchReference(r, "reshape_any_copy");
  }
}

TEST(ShapeTactics, GatherRejectsOutOfRangeIndices) {
  TestLayer l("Gather", {arangeF({4, 2}), i64s({1, 4})});
  l.desc.inputs[1].value = HostTensor();  // value unknown at build time
  inferLayer(l.desc);
  l.desc.inputs[1].value = i64s({1, 4});
  for (const Tactic& t : getBackend(DeviceType::kCPU, 2)->tactics(l.desc)) EXPECT_THROW(runTactic(t, l.desc), Error) << t.name;
}

TEST(ShapeTactics, LargeTransposeIsParallelAndCorrect) {
  // Big enough that every worker gets tiles: [1, 12, 384, 64] -> [1, 12, 64, 384].
  TestLayer l("Transpose", {randomBytes(DataType::kFLOAT, {1, 12, 384, 64}, 7)}, attrs({{"perm", std::vector<int64_t>{0, 1, 3, 2}}}));
  expectTacticsMatchReference(l, "transpose_any_blocked");
}

}  // namespace
