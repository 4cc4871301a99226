// The run-time Loop (ops/loop.cpp) and the subgraph bytes it carries (ir/network_bytes.h): the
// bytes round-trip and refuse tampering with an Error; a Loop layer built by hand runs a run-time
// trip count with an outer-scope tensor, loop-carried state and a scan output, on the CPU and
// (CudaLoop, skipped without a GPU) on the GPU, from a plan too. Expected values are computed here
// by the loop's definition in plain C++.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "ir/network_bytes.h"
#include "kiln/device.h"
#include "kiln/kiln.h"
#include "op_test_util.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::randomTensor;

namespace {

HostTensor floatScalar(float v) {
  HostTensor t(DataType::kFLOAT, {});
  *t.as<float>() = v;
  return t;
}

// body(i, cond, acc; x) -> (cond, acc * 0.5 + x * i, Relu(acc')): x from the enclosing scope.
std::vector<uint8_t> bodyBytes(int64_t rows, int64_t cols) {
  Network b;
  Tensor* i = b.addInput("i", DataType::kINT64, {});
  Tensor* cond = b.addInput("cond_in", DataType::kBOOL, {});
  Tensor* acc = b.addInput("acc_in", DataType::kFLOAT, {rows, cols});
  Tensor* x = b.addInput("x", DataType::kFLOAT, {rows, cols});
  Attributes to;
  to.set("to", int64_t(1));
  Tensor* fi = b.addLayer("Cast", {i}, 1, to, "cast_i")->outputs[0];
  Tensor* xi = b.addElementWise(x, fi, "Mul")->outputs[0];
  Tensor* half = b.addElementWise(acc, b.addConstant("half", floatScalar(0.5f)), "Mul")->outputs[0];
  Tensor* next = b.addElementWise(half, xi, "Add")->outputs[0];
  Tensor* scan = b.addActivation(next, "Relu")->outputs[0];
  Tensor* condOut = b.addLayer("Identity", {cond}, 1, {}, "cond_out")->outputs[0];
  b.markOutput(condOut);
  b.markOutput(next);
  b.markOutput(scan);
  return serializeNetwork(b);
}

// Inputs M (int64 scalar), acc0 and x [rows, cols]; outputs acc [rows, cols], scans [M, rows, cols].
std::unique_ptr<Engine> buildLoopEngine(DeviceType device, int64_t rows, int64_t cols) {
  Network net;
  Tensor* m = net.addInput("M", DataType::kINT64, {});
  Tensor* acc0 = net.addInput("acc0", DataType::kFLOAT, {rows, cols});
  Tensor* x = net.addInput("x", DataType::kFLOAT, {rows, cols});
  const std::vector<uint8_t> bytes = bodyBytes(rows, cols);
  HostTensor body(DataType::kUINT8, {static_cast<int64_t>(bytes.size())});
  std::memcpy(body.data(), bytes.data(), bytes.size());
  Attributes a;
  a.set("body", body);
  a.set("num_outer", int64_t(1));
  Layer* loop = net.addLayer("Loop", {m, nullptr, acc0, x}, 2, a, "loop");
  // A layer after the loop, sized from its data-dependent output at run time.
  Tensor* scans = net.addElementWise(loop->outputs[1], net.addConstant("two", floatScalar(2.f)), "Mul")->outputs[0];
  net.renameTensor(loop->outputs[0], "acc");
  net.renameTensor(scans, "scans");
  net.markOutput(loop->outputs[0]);
  net.markOutput(scans);
  BuilderConfig cfg;
  cfg.setDevice(device);
  return Builder().build(net, cfg);
}

struct Expected {
  std::vector<float> acc, scans;
};

Expected expectedLoop(const HostTensor& acc0, const HostTensor& x, int64_t trips) {
  Expected e;
  e.acc.assign(acc0.as<float>(), acc0.as<float>() + acc0.count());
  for (int64_t i = 0; i < trips; ++i)
    for (int64_t k = 0; k < acc0.count(); ++k) {
      e.acc[k] = e.acc[k] * 0.5f + x.as<float>()[k] * static_cast<float>(i);
      e.scans.push_back(2.f * std::max(e.acc[k], 0.f));
    }
  return e;
}

// Device memory for the data-dependent output, through the Device API (host memory on the CPU).
class DeviceOutput : public IOutputAllocator {
 public:
  explicit DeviceOutput(Device& d) : dev(d) {}
  ~DeviceOutput() override {
    if (p) dev.release(p);
  }
  void* reallocateOutput(const std::string&, void* current, uint64_t size, uint64_t) override {
    if (current && size <= cap) return current;
    if (p) dev.release(p);
    p = dev.allocate(std::max<uint64_t>(size, 64));
    cap = size;
    return p;
  }
  void notifyShape(const std::string&, const Dims& d) override { dims = d; }
  Device& dev;
  void* p = nullptr;
  uint64_t cap = 0;
  Dims dims;
};

void checkLoopOn(DeviceType type, bool fromPlan) {
  const int64_t rows = 3, cols = 5;
  std::unique_ptr<Engine> engine = buildLoopEngine(type, rows, cols);
  if (fromPlan) {
    const std::vector<uint8_t> plan = engine->serialize();
    engine = Engine::deserialize(plan.data(), plan.size());
  }
  EXPECT_EQ(engine->getTensorShape("scans"), (Dims{-1, rows, cols}));
  Device dev(type);
  auto ctx = engine->createExecutionContext();
  DeviceOutput scansOut(dev);
  ctx->setOutputAllocator("scans", &scansOut);
  HostTensor acc0 = randomTensor({rows, cols}, 21), x = randomTensor({rows, cols}, 22);
  const size_t bytes = acc0.bytes();
  void* dAcc0 = dev.allocate(bytes);
  void* dX = dev.allocate(bytes);
  void* dM = dev.allocate(8);
  void* dAcc = dev.allocate(bytes);
  dev.copyToDevice(dAcc0, acc0.data(), bytes, nullptr);
  dev.copyToDevice(dX, x.data(), bytes, nullptr);
  for (int64_t trips : {4, 0, 9}) {  // a new count per run, none included
    dev.copyToDevice(dM, &trips, 8, nullptr);
    ctx->setTensorAddress("M", dM);
    ctx->setTensorAddress("acc0", dAcc0);
    ctx->setTensorAddress("x", dX);
    ctx->setTensorAddress("acc", dAcc);
    void* stream = dev.createStream();
    ctx->enqueue(stream);
    dev.synchronize(stream);
    dev.destroyStream(stream);
    const Expected want = expectedLoop(acc0, x, trips);
    std::vector<float> acc(static_cast<size_t>(acc0.count())), scans(want.scans.size());
    dev.copyToHost(acc.data(), dAcc, bytes, nullptr);
    ASSERT_EQ(scansOut.dims, (Dims{trips, rows, cols})) << "trips " << trips;
    if (!scans.empty()) dev.copyToHost(scans.data(), scansOut.p, scans.size() * sizeof(float), nullptr);
    for (size_t k = 0; k < acc.size(); ++k) EXPECT_NEAR(acc[k], want.acc[k], 1e-5f) << "trips " << trips << " acc " << k;
    for (size_t k = 0; k < scans.size(); ++k) EXPECT_NEAR(scans[k], want.scans[k], 1e-5f) << "trips " << trips << " scan " << k;
  }
  for (void* p : {dAcc0, dX, dM, dAcc}) dev.release(p);
}

}  // namespace

TEST(NetworkBytes, RoundTripKeepsEveryField) {
  Network n;
  Tensor* a = n.addInput("a", DataType::kHALF, {-1, 4});
  Tensor* b = n.addInput("b", DataType::kINT64, {});
  Attributes at;
  at.set("i", int64_t(-7));
  at.set("f", 0.25f);
  at.set("s", std::string("text"));
  at.set("is", std::vector<int64_t>{1, -2, 3});
  at.set("fs", std::vector<float>{0.5f, -1.5f});
  at.set("ss", std::vector<std::string>{"x", "", "yz"});
  at.set("t", randomTensor({2, 3}, 5));
  Layer* l = n.addLayer("Custom", {a, nullptr, n.addConstant("c", randomTensor({4}, 6))}, 2, at, "custom");
  l->domain = "my.domain";
  n.markOutput(l->outputs[1]);
  n.markOutput(b);  // an input that is an output too
  const std::vector<uint8_t> bytes = serializeNetwork(n);
  Network m;
  deserializeNetwork(bytes.data(), bytes.size(), m);
  ASSERT_EQ(m.inputs().size(), 2u);
  EXPECT_EQ(m.inputs()[0]->name, "a");
  EXPECT_EQ(m.inputs()[0]->type, DataType::kHALF);
  EXPECT_EQ(m.inputs()[0]->dims, (Dims{-1, 4}));
  ASSERT_EQ(m.outputs().size(), 2u);
  EXPECT_EQ(m.outputs()[0]->name, l->outputs[1]->name);
  EXPECT_EQ(m.outputs()[1]->name, "b");
  ASSERT_EQ(m.nbLayers(), 1);
  const Layer& k = *m.layer(0);
  EXPECT_EQ(k.name, "custom");
  EXPECT_EQ(k.op, "Custom");
  EXPECT_EQ(k.domain, "my.domain");
  ASSERT_EQ(k.inputs.size(), 3u);
  EXPECT_EQ(k.inputs[1], nullptr);
  ASSERT_TRUE(k.inputs[2]->isConstant());
  EXPECT_EQ(std::memcmp(k.inputs[2]->value.data(), randomTensor({4}, 6).data(), 16), 0);
  EXPECT_EQ(k.attrs.getInt("i", 0), -7);
  EXPECT_EQ(k.attrs.getFloat("f", 0), 0.25f);
  EXPECT_EQ(k.attrs.getString("s", ""), "text");
  EXPECT_EQ(k.attrs.getInts("is"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(k.attrs.getFloats("fs"), (std::vector<float>{0.5f, -1.5f}));
  EXPECT_EQ(k.attrs.getStrings("ss"), (std::vector<std::string>{"x", "", "yz"}));
  ASSERT_NE(k.attrs.getTensor("t"), nullptr);
  EXPECT_EQ(std::memcmp(k.attrs.getTensor("t")->data(), randomTensor({2, 3}, 5).data(), 24), 0);
  EXPECT_EQ(k.outputs[0]->producer, &k);
  EXPECT_EQ(serializeNetwork(m), bytes);  // and again, byte for byte
}

TEST(NetworkBytes, TamperedBytesAreErrorsNeverCrashes) {
  const std::vector<uint8_t> good = bodyBytes(2, 3);
  std::mt19937 rng(1);
  int accepted = 0, refused = 0;
  for (int trial = 0; trial < 4000; ++trial) {
    std::vector<uint8_t> bad = good;
    if (trial % 4 == 0) {
      bad.resize(rng() % bad.size());  // truncated
    } else {
      for (int k = 0, n = 1 + trial % 3; k < n; ++k) {
        const size_t at = rng() % bad.size();
        bad[at] = trial % 2 ? static_cast<uint8_t>(rng()) : static_cast<uint8_t>(bad[at] ^ (1u << (rng() % 8)));
      }
    }
    Network n;
    try {
      deserializeNetwork(bad.data(), bad.size(), n);
      ++accepted;  // a change in a name or a value: still a well-formed network
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 2000);
  EXPECT_GT(accepted, 0);
}

TEST(Loop, RunTimeTripCountOnTheCpu) { checkLoopOn(DeviceType::kCPU, false); }

TEST(Loop, RunTimeTripCountFromAPlan) { checkLoopOn(DeviceType::kCPU, true); }

TEST(CudaLoop, RunTimeTripCountOnTheGpu) {
  KILN_REQUIRE_GPU();
  checkLoopOn(DeviceType::kGPU, false);
  checkLoopOn(DeviceType::kGPU, true);
}
