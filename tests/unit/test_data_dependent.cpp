// Data-dependent shapes through the public API: NonZero / NonMaxSuppression / Unique / a TopK
// whose k is computed from data, layers sized from them at run time, outputs returned through an
// IOutputAllocator, and its misuse (no allocator, an allocator returning null). Expected values
// are computed here from the ops' definitions (NumPy's nonzero, sorting), not by kiln.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>

#include "kiln/kiln.h"
#include "ops/op_registry.h"
#include "reference_eval.h"

using namespace kiln;

namespace {

using kiln::test::randomTensor;

// Host memory from malloc; records every call.
class RecordingAllocator : public IOutputAllocator {
 public:
  void* reallocateOutput(const std::string& name, void* current, uint64_t size, uint64_t alignment) override {
    ++reallocations;
    lastName = name;
    lastCurrent = current;
    lastAlignment = alignment;
    if (returnNull) return nullptr;
    if (current && size <= capacity) return current;
    buffers.emplace_back(std::max<uint64_t>(size, 1) / sizeof(double) + 1);
    capacity = size;
    return buffers.back().data();
  }
  void notifyShape(const std::string& name, const Dims& d) override {
    shapes[name] = d;
    ++notifications;
  }
  template <typename T>
  const T* data() const {
    return reinterpret_cast<const T*>(buffers.back().data());
  }
  std::vector<std::vector<double>> buffers;  // double: 8-byte aligned
  uint64_t capacity = 0, lastAlignment = 0;
  void* lastCurrent = nullptr;
  std::string lastName;
  std::map<std::string, Dims> shapes;
  int reallocations = 0, notifications = 0;
  bool returnNull = false;
};

HostTensor floatScalar(float v) {
  HostTensor t(DataType::kFLOAT, {});
  t.as<float>()[0] = v;
  return t;
}

HostTensor int64s(const std::vector<int64_t>& v) {
  HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
  std::copy(v.begin(), v.end(), t.as<int64_t>());
  return t;
}

// x [rows, cols] -> positions = Transpose(NonZero(Relu(x) > 0.5)) [n, 2] (output "positions"),
// and values = GatherND(x, positions) * 2 (output "values" [n]): the gather and the Mul are sized
// at run time from NonZero's count.
std::unique_ptr<Engine> buildNonZeroEngine(int64_t rows, int64_t cols) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {rows, cols});
  Tensor* relu = net.addActivation(x, "Relu")->outputs[0];
  Tensor* mask = net.addElementWise(relu, net.addConstant("half", floatScalar(0.5f)), "Greater")->outputs[0];
  Tensor* nz = net.addLayer("NonZero", {mask}, 1, {}, "nonzero")->outputs[0];
  Attributes perm;
  perm.set("perm", std::vector<int64_t>{1, 0});
  Tensor* positions = net.addLayer("Transpose", {nz}, 1, perm, "positions")->outputs[0];
  net.renameTensor(positions, "positions");
  net.markOutput(positions);
  Tensor* picked = net.addLayer("GatherND", {x, positions}, 1)->outputs[0];  // x[row, col] per position
  Tensor* values = net.addElementWise(picked, net.addConstant("two", floatScalar(2.f)), "Mul")->outputs[0];
  net.renameTensor(values, "values");
  net.markOutput(values);
  BuilderConfig cfg;
  cfg.setThreads(2);
  return Builder().build(net, cfg);
}

// NumPy's nonzero of x > 0.5, as [n, 2] (row, col) pairs.
std::vector<int64_t> expectedPositions(const HostTensor& x) {
  std::vector<int64_t> p;
  const int64_t cols = x.dims()[1];
  for (int64_t i = 0; i < x.count(); ++i)
    if (x.as<float>()[i] > 0.5f) p.insert(p.end(), {i / cols, i % cols});
  return p;
}

}  // namespace

TEST(DataDependent, NonZeroSizesDownstreamLayersAndOutputsThroughTheAllocator) {
  auto engine = buildNonZeroEngine(6, 7);
  EXPECT_EQ(engine->getTensorShape("positions"), (Dims{-1, 2}));
  EXPECT_EQ(engine->getTensorShape("values"), (Dims{-1}));
  auto ctx = engine->createExecutionContext();
  RecordingAllocator pos, val;
  ctx->setOutputAllocator("positions", &pos);
  ctx->setOutputAllocator("values", &val);
  EXPECT_EQ(ctx->getOutputAllocator("positions"), &pos);
  for (uint32_t seed : {1, 2, 3}) {
    HostTensor x = randomTensor({6, 7}, seed);  // about a quarter above 0.5, different per seed
    ctx->setTensorAddress("x", x.data());
    EXPECT_EQ(ctx->getTensorShape("positions"), (Dims{-1, 2}));  // data-dependent: known only while running
    ctx->enqueue();
    const std::vector<int64_t> want = expectedPositions(x);
    const int64_t n = static_cast<int64_t>(want.size() / 2);
    ASSERT_GT(n, 0);
    ASSERT_EQ(pos.shapes.at("positions"), (Dims{n, 2}));
    ASSERT_EQ(val.shapes.at("values"), (Dims{n}));
    EXPECT_EQ(pos.lastAlignment, 256u);
    for (int64_t i = 0; i < 2 * n; ++i) EXPECT_EQ(pos.data<int64_t>()[i], want[static_cast<size_t>(i)]) << i;
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(val.data<float>()[i], 2.f * x.as<float>()[want[2 * i] * 7 + want[2 * i + 1]]) << i;
  }
  EXPECT_EQ(pos.reallocations, 3);
  EXPECT_EQ(pos.notifications, 3);
  EXPECT_NE(pos.lastCurrent, nullptr);  // later runs are offered the memory of the run before
}

TEST(DataDependent, EmptySelectionGivesAZeroSizedOutput) {
  auto engine = buildNonZeroEngine(3, 4);
  auto ctx = engine->createExecutionContext();
  RecordingAllocator a;
  ctx->setOutputAllocator("positions", &a);
  ctx->setOutputAllocator("values", &a);
  HostTensor x(DataType::kFLOAT, {3, 4});
  for (int64_t i = 0; i < x.count(); ++i) x.as<float>()[i] = -1.f;
  ctx->setTensorAddress("x", x.data());
  ctx->enqueue();
  EXPECT_EQ(a.shapes.at("positions"), (Dims{0, 2}));
  EXPECT_EQ(a.shapes.at("values"), (Dims{0}));
}

TEST(DataDependent, PlanRoundTripAndPoisonedArenasGiveTheSameOutputs) {
  auto engine = buildNonZeroEngine(5, 9);
  const std::vector<uint8_t> plan = engine->serialize();
  auto loaded = Engine::deserialize(plan.data(), plan.size());
  HostTensor x = randomTensor({5, 9}, 11);
  std::vector<int64_t> want = expectedPositions(x);
  for (bool poison : {false, true}) {
    auto ctx = loaded->createExecutionContext();
    ctx->setPoisonFreedMemory(poison);  // a lifetime cut short in any round's arena reads NaN
    RecordingAllocator pos, val;
    ctx->setOutputAllocator("positions", &pos);
    ctx->setOutputAllocator("values", &val);
    ctx->setTensorAddress("x", x.data());
    ctx->enqueue();
    const int64_t n = static_cast<int64_t>(want.size() / 2);
    ASSERT_EQ(val.shapes.at("values"), (Dims{n}));
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(val.data<float>()[i], 2.f * x.as<float>()[want[2 * i] * 9 + want[2 * i + 1]]);
  }
}

TEST(DataDependent, MissingAllocatorIsAClearError) {
  auto engine = buildNonZeroEngine(2, 2);
  auto ctx = engine->createExecutionContext();
  HostTensor x = randomTensor({2, 2}, 1);
  std::vector<int64_t> buffer(64);
  ctx->setTensorAddress("x", x.data());
  ctx->setTensorAddress("positions", buffer.data());  // an address is not enough: the size is unknown
  try {
    ctx->enqueue();
    ADD_FAILURE() << "enqueue without an output allocator succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("setOutputAllocator"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("positions"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ctx->setOutputAllocator("x", nullptr), Error);  // not an output
  EXPECT_THROW(ctx->setOutputAllocator("nope", nullptr), Error);
}

TEST(DataDependent, AllocatorReturningNullIsAClearError) {
  auto engine = buildNonZeroEngine(4, 4);
  auto ctx = engine->createExecutionContext();
  RecordingAllocator bad, good;
  bad.returnNull = true;
  ctx->setOutputAllocator("positions", &bad);
  ctx->setOutputAllocator("values", &good);
  HostTensor x(DataType::kFLOAT, {4, 4});
  for (int64_t i = 0; i < x.count(); ++i) x.as<float>()[i] = 1.f;  // 16 positions: 256 bytes
  ctx->setTensorAddress("x", x.data());
  try {
    ctx->enqueue();
    ADD_FAILURE() << "an allocator returning null was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("output 'positions': the output allocator returned null for 256 bytes"), std::string::npos)
        << e.what();
  }
  // The context stays usable: a working allocator runs.
  RecordingAllocator fixed;
  ctx->setOutputAllocator("positions", &fixed);
  ctx->enqueue();
  EXPECT_EQ(fixed.shapes.at("positions"), (Dims{16, 2}));
}

// An allocator may serve static outputs too: it replaces the address, and is told the shape.
TEST(DataDependent, AllocatorServesStaticOutputs) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {2, 3});
  Tensor* y = net.addActivation(x, "Relu")->outputs[0];
  net.renameTensor(y, "y");
  net.markOutput(y);
  auto engine = Builder().build(net, BuilderConfig{});
  auto ctx = engine->createExecutionContext();
  RecordingAllocator a;
  ctx->setOutputAllocator("y", &a);
  HostTensor in = randomTensor({2, 3}, 5);
  ctx->setTensorAddress("x", in.data());
  ctx->enqueue();
  ASSERT_EQ(a.shapes.at("y"), (Dims{2, 3}));
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(a.data<float>()[i], std::max(0.f, in.as<float>()[i]));
  ctx->setOutputAllocator("y", nullptr);  // back to the address
  std::vector<float> out(6, -1.f);
  ctx->setTensorAddress("y", out.data());
  ctx->enqueue();
  EXPECT_EQ(a.reallocations, 1);
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(out[i], std::max(0.f, in.as<float>()[i]));
}

// NonMaxSuppression of computed scores (Sigmoid), then the kept boxes gathered: boxes 0 and 1
// overlap with IoU 0.81 > 0.5, so the lower-scored 1 goes; box 2 stands alone.
TEST(DataDependent, NonMaxSuppressionFeedsAGather) {
  Network net;
  Tensor* boxes = net.addInput("boxes", DataType::kFLOAT, {1, 3, 4});
  Tensor* logits = net.addInput("logits", DataType::kFLOAT, {1, 1, 3});
  Tensor* scores = net.addActivation(logits, "Sigmoid")->outputs[0];
  HostTensor iou(DataType::kFLOAT, {1});
  iou.as<float>()[0] = 0.5f;
  Tensor* sel = net.addLayer("NonMaxSuppression",
                             {boxes, scores, net.addConstant("max_out", int64s({10})), net.addConstant("iou", iou)}, 1, {},
                             "nms")->outputs[0];
  Attributes ax1;
  ax1.set("axis", int64_t(1));
  Tensor* boxIdx = net.addLayer("Gather", {sel, net.addConstant("col2", [] {
                                             HostTensor t(DataType::kINT64, {});
                                             t.as<int64_t>()[0] = 2;
                                             return t;
                                           }())}, 1, ax1)->outputs[0];
  Tensor* flatBoxes = net.addLayer("Reshape", {boxes, net.addConstant("b_shape", int64s({3, 4}))}, 1)->outputs[0];
  Attributes ax0;
  ax0.set("axis", int64_t(0));
  Tensor* kept = net.addLayer("Gather", {flatBoxes, boxIdx}, 1, ax0)->outputs[0];
  net.renameTensor(sel, "selected");
  net.renameTensor(kept, "kept");
  net.markOutput(sel);
  net.markOutput(kept);
  auto engine = Builder().build(net, BuilderConfig{});
  auto ctx = engine->createExecutionContext();
  const float b[12] = {0, 0, 10, 10, /**/ 0, 0, 9, 9, /**/ 20, 20, 30, 30};  // [y1, x1, y2, x2]
  const float l[3] = {2.f, 1.f, 0.f};
  ctx->setTensorAddress("boxes", const_cast<float*>(b));
  ctx->setTensorAddress("logits", const_cast<float*>(l));
  RecordingAllocator s, k;
  ctx->setOutputAllocator("selected", &s);
  ctx->setOutputAllocator("kept", &k);
  ctx->enqueue();
  ASSERT_EQ(s.shapes.at("selected"), (Dims{2, 3}));
  const int64_t wantSel[6] = {0, 0, 0, 0, 0, 2};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(s.data<int64_t>()[i], wantSel[i]) << i;
  ASSERT_EQ(k.shapes.at("kept"), (Dims{2, 4}));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(k.data<float>()[i], b[i]);
    EXPECT_EQ(k.data<float>()[4 + i], b[8 + i]);
  }
}

// TopK whose k is computed from the data (the count of positive elements), then Unique of the
// indices' parity: two data-dependent rounds in one run.
TEST(DataDependent, TopKWithComputedKThenUnique) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {12});
  Tensor* pos = net.addElementWise(x, net.addConstant("zero", floatScalar(0.f)), "Greater")->outputs[0];
  Attributes toI64;
  toI64.set("to", int64_t(7));
  Tensor* ones = net.addLayer("Cast", {pos}, 1, toI64)->outputs[0];
  Attributes keep;
  keep.set("keepdims", int64_t(1));
  Tensor* k = net.addLayer("ReduceSum", {ones}, 1, keep)->outputs[0];  // [1]
  Layer* topk = net.addLayer("TopK", {x, k}, 2, {}, "topk");
  Tensor* parity = net.addElementWise(topk->outputs[1], net.addConstant("two", int64s({2})), "Mod")->outputs[0];
  Layer* uniq = net.addLayer("Unique", {parity}, 4, {}, "unique");
  net.renameTensor(topk->outputs[0], "top");
  net.renameTensor(uniq->outputs[0], "parities");
  net.renameTensor(uniq->outputs[2], "inverse");  // dims known before the run ([k]), values only during it
  net.renameTensor(uniq->outputs[3], "counts");
  net.markOutput(topk->outputs[0]);
  net.markOutput(uniq->outputs[0]);
  net.markOutput(uniq->outputs[2]);
  net.markOutput(uniq->outputs[3]);
  auto engine = Builder().build(net, BuilderConfig{});
  auto ctx = engine->createExecutionContext();
  RecordingAllocator top, par, cnt, inv;
  ctx->setOutputAllocator("inverse", &inv);
  ctx->setOutputAllocator("top", &top);
  ctx->setOutputAllocator("parities", &par);
  ctx->setOutputAllocator("counts", &cnt);
  for (uint32_t seed : {3, 4}) {
    HostTensor in = randomTensor({12}, seed);
    ctx->setTensorAddress("x", in.data());
    ctx->enqueue();
    std::vector<std::pair<float, int64_t>> v;
    for (int64_t i = 0; i < 12; ++i) v.emplace_back(in.as<float>()[i], i);
    std::stable_sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first > b.first; });
    int64_t n = 0;
    for (auto& [val, i] : v) n += val > 0.f;
    ASSERT_EQ(top.shapes.at("top"), (Dims{n}));
    std::map<int64_t, int64_t> counts;  // sorted parities and their counts
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(top.data<float>()[i], v[static_cast<size_t>(i)].first);
      ++counts[v[static_cast<size_t>(i)].second % 2];
    }
    ASSERT_EQ(par.shapes.at("parities"), (Dims{static_cast<int64_t>(counts.size())}));
    size_t j = 0;
    std::map<int64_t, int64_t> position;
    for (auto [p, c] : counts) {
      EXPECT_EQ(par.data<int64_t>()[j], p);
      EXPECT_EQ(cnt.data<int64_t>()[j], c);
      position[p] = static_cast<int64_t>(j++);
    }
    ASSERT_EQ(inv.shapes.at("inverse"), (Dims{n}));
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(inv.data<int64_t>()[i], position[v[static_cast<size_t>(i)].second % 2]) << i;
  }
}

// Unique's shape inference computes its outputs once X is read back; on the GPU float16/bfloat16
// data arrive as they are (the CPU builder casts them to float first): the values compare as
// floats and come out in their own type (NumPy's unique of the same numbers, sorted).
TEST(DataDependent, UniqueOfHalfAndBf16ValuesOnTheHost) {
  const std::vector<float> x = {2.5f, -1.f, 2.5f, 0.f, -1.f, 7.f};
  const std::vector<float> want = {-1.f, 0.f, 2.5f, 7.f};
  const std::vector<int64_t> inverse = {2, 0, 2, 1, 0, 3};
  for (DataType t : {DataType::kHALF, DataType::kBF16}) {
    HostTensor v(t, {6});
    for (size_t i = 0; i < x.size(); ++i) v.as<uint16_t>()[i] = t == DataType::kHALF ? floatToHalf(x[i]) : floatToBf16(x[i]);
    Attributes a;
    LayerDesc l;
    l.name = "unique";
    l.op = "Unique";
    l.attrs = &a;
    l.inputs.push_back(TensorDesc{t, {6}, v});
    l.inputPresent = {true};
    l.outputs.resize(3);
    inferLayer(l);
    const HostTensor& y = l.outputs[0].value;
    ASSERT_TRUE(y.valid());
    ASSERT_EQ(y.type(), t);
    ASSERT_EQ(y.dims(), (Dims{4}));
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(t == DataType::kHALF ? halfToFloat(y.as<uint16_t>()[i]) : bf16ToFloat(y.as<uint16_t>()[i]), want[i]) << i;
    ASSERT_EQ(l.outputs[2].value.count(), 6);
    for (size_t i = 0; i < inverse.size(); ++i) EXPECT_EQ(l.outputs[2].value.as<int64_t>()[i], inverse[i]) << i;
  }
}
