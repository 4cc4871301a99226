// Implicit INT8's library pieces: the calibration histogram and its three amax rules (against
// sorted-array references), the cache format (round trip, bit-exact scales, errors naming the
// line), the layer-name patterns of --layerPrecisions, cloneNetwork, and a calibrated build through
// the C++ API (IInt8Calibrator) whose engine runs integer layers and stays close to float32, and
// the pass keeping a layer float when the backend has no integer kernel for it.
// Whole models against ONNX Runtime: tests/quant/test_calibration.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "builder/calib_histogram.h"
#include "builder/calib_table.h"
#include "builder/calibrate.h"
#include "builder/passes/quantize_calibrated.h"
#include "ir/network_clone.h"
#include "kiln/kiln.h"
#include "ops/qlinear.h"

using namespace kiln;

namespace {

std::vector<float> normalSamples(size_t n, unsigned seed, float sigma = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

}  // namespace

TEST(Calibration, HistogramGrowsWithoutLosingCounts) {
  TensorHistogram h;
  std::vector<float> a = normalSamples(5000, 1, 0.5f), b = normalSamples(5000, 2, 4.f);  // b forces the range to double
  h.add(a.data(), a.size());
  h.add(b.data(), b.size());
  double total = 0;
  for (double c : h.counts()) total += c;
  EXPECT_EQ(total, 10000.0);
  float absMax = 0, lo = 0;
  for (const auto* v : {&a, &b})
    for (float x : *v) absMax = std::max(absMax, std::fabs(x)), lo = std::min(lo, x);
  EXPECT_EQ(h.absMax(), absMax);
  EXPECT_EQ(h.minValue(), lo);
  EXPECT_GE(h.binWidth() * TensorHistogram::kBins, absMax);
  EXPECT_EQ(calibratedAmax(h, CalibrationAlgoType::kMINMAX_CALIBRATION, 0, false), absMax);
}

TEST(Calibration, PercentileWithinOneBinOfSortedReference) {
  TensorHistogram h;
  std::vector<float> v = normalSamples(200000, 3);
  h.add(v.data(), v.size());
  std::vector<float> mags(v.size());
  std::transform(v.begin(), v.end(), mags.begin(), [](float x) { return std::fabs(x); });
  std::sort(mags.begin(), mags.end());
  for (double p : {50.0, 99.0, 99.99}) {
    const double want = mags[static_cast<size_t>(std::ceil(p / 100 * mags.size())) - 1];  // the smallest value with p% at or below it
    EXPECT_NEAR(calibratedAmax(h, CalibrationAlgoType::kPERCENTILE, p, false), want, h.binWidth()) << p;
  }
  EXPECT_EQ(calibratedAmax(h, CalibrationAlgoType::kPERCENTILE, 100, false), mags.back());
}

TEST(Calibration, EntropyClipsRareOutliersButNotTheBulk) {
  // A Gaussian bulk plus a few far outliers: minmax spends the range on the outliers, the KL
  // threshold keeps the bulk (a few sigma) and clips them.
  std::vector<float> v = normalSamples(100000, 4);
  for (int i = 0; i < 20; ++i) v.push_back(40.f + i);
  TensorHistogram h;
  h.add(v.data(), v.size());
  const double amax = calibratedAmax(h, CalibrationAlgoType::kENTROPY_CALIBRATION_2, 0, false);
  EXPECT_GT(amax, 2.5);
  EXPECT_LT(amax, 20.0);
  // Without outliers nothing is worth clipping much: the threshold stays near the maximum's scale.
  TensorHistogram u;
  std::vector<float> flat(50000);
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = -1.f + 2.f * i / (flat.size() - 1);
  u.add(flat.data(), flat.size());
  EXPECT_GT(calibratedAmax(u, CalibrationAlgoType::kENTROPY_CALIBRATION_2, 0, false), 0.9);
}

TEST(Calibration, AllZeroTensorHasNoRange) {
  TensorHistogram h;
  std::vector<float> z(100, 0.f);
  h.add(z.data(), z.size());
  for (auto a : {CalibrationAlgoType::kMINMAX_CALIBRATION, CalibrationAlgoType::kPERCENTILE, CalibrationAlgoType::kENTROPY_CALIBRATION_2})
    EXPECT_EQ(calibratedAmax(h, a, 99.9, true), 0.0);
}

TEST(Calibration, CacheRoundTripIsBitExact) {
  CalibrationTable t;
  t.algorithm = "percentile:99.99";
  t.scales["input.1"] = {0.0123456789f, false};
  t.scales["conv out:0 with spaces"] = {std::nextafter(1.f, 2.f), true};
  const std::vector<uint8_t> bytes = serializeCalibrationTable(t);
  const CalibrationTable back = parseCalibrationTable(bytes);
  EXPECT_EQ(back.algorithm, t.algorithm);
  ASSERT_EQ(back.scales.size(), 2u);
  for (const auto& [name, a] : t.scales) {
    EXPECT_EQ(back.scales.at(name).scale, a.scale) << name;
    EXPECT_EQ(back.scales.at(name).isUnsigned, a.isUnsigned) << name;
  }
  EXPECT_EQ(serializeCalibrationTable(back), bytes);
}

TEST(Calibration, BadCachesNameTheLine) {
  auto parse = [](const std::string& s) { return parseCalibrationTable(std::vector<uint8_t>(s.begin(), s.end())); };
  auto expectError = [&](const std::string& text, const std::string& part) {
    try {
      parse(text);
      ADD_FAILURE() << "no error for: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  expectError("", "line 1");
  expectError("TRT-8601-EntropyCalibration2\n", "not a kiln calibration cache");
  expectError("kiln-int8-calibration 2 entropy\n", "version 2");
  expectError("kiln-int8-calibration 1 entropy\n3c010a14 i8\n", "line 2");
  expectError("kiln-int8-calibration 1 entropy\nbf800000 i8 x\n", "positive");  // -1.0
  expectError("kiln-int8-calibration 1 entropy\n7fc00000 i8 x\n", "positive");  // NaN
  expectError("kiln-int8-calibration 1 entropy\n3c010a14 s8 x\n", "u8 or i8");
  expectError("kiln-int8-calibration 1 entropy\n3c010a14 i8 x\n3c010a14 i8 x\n", "listed twice");
}

TEST(Calibration, LayerPatterns) {
  EXPECT_TRUE(matchesLayerPattern("*", "anything"));
  EXPECT_TRUE(matchesLayerPattern("block1*", "block1_conv2"));
  EXPECT_FALSE(matchesLayerPattern("block1*", "xblock1"));
  EXPECT_TRUE(matchesLayerPattern("*conv*", "block1_conv2"));
  EXPECT_TRUE(matchesLayerPattern("a*b*c", "aXbYbZc"));
  EXPECT_FALSE(matchesLayerPattern("a*b*c", "aXbYcZ"));
  EXPECT_TRUE(matchesLayerPattern("exact", "exact"));
  EXPECT_FALSE(matchesLayerPattern("exact", "exact2"));
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {1, 4});
  Layer* a = net.addActivation(x, "Relu");
  a->name = "block1_relu";
  Layer* b = net.addActivation(a->outputs[0], "Sigmoid");
  b->name = "block1_sig";
  net.markOutput(b->outputs[0]);
  setLayerPrecisions(net, {{"*", DataType::kHALF}, {"block1*", DataType::kBF16}, {"block1_sig", DataType::kFLOAT}});
  EXPECT_EQ(*a->precision, DataType::kBF16);  // the longer pattern beats '*'
  EXPECT_EQ(*b->precision, DataType::kFLOAT);  // the exact name beats both
  EXPECT_THROW(setLayerPrecisions(net, {{"nothing*", DataType::kFLOAT}}), Error);
  setLayerOutputTypes(net, {{"block1_relu", DataType::kHALF}});
  EXPECT_EQ(*a->outputType, DataType::kHALF);
  EXPECT_FALSE(b->outputType.has_value());
}

TEST(Calibration, CloneKeepsNamesConstraintsAndValues) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {1, 2, 4, 4});
  HostTensor w(DataType::kFLOAT, {3, 2, 1, 1}), bias(DataType::kFLOAT, {3});
  Layer* conv = net.addConvolution(x, w, bias, {1, 1}, {0, 0, 0, 0});
  conv->precision = DataType::kINT8;
  Layer* relu = net.addActivation(conv->outputs[0], "Relu");
  net.renameTensor(relu->outputs[0], "y");
  net.markOutput(relu->outputs[0]);
  auto copy = cloneNetwork(net);
  ASSERT_EQ(copy->nbLayers(), 2);
  EXPECT_EQ(copy->layer(0)->name, conv->name);
  EXPECT_EQ(*copy->layer(0)->precision, DataType::kINT8);
  EXPECT_EQ(copy->layer(0)->inputs[1]->value.data(), conv->inputs[1]->value.data());  // weights shared, not copied
  ASSERT_EQ(copy->outputs().size(), 1u);
  EXPECT_EQ(copy->outputs()[0]->name, "y");
  EXPECT_NE(copy->outputs()[0], relu->outputs[0]);
}

namespace {

//! Batches of a fixed input shape from a seeded generator; keeps what the builder writes.
class VectorCalibrator : public IInt8MinMaxCalibrator {
 public:
  explicit VectorCalibrator(std::vector<HostTensor> batches) : batches_(std::move(batches)) {}
  bool getBatch(std::map<std::string, HostTensor>& b) override {
    if (next_ >= batches_.size()) return false;
    b["x"] = batches_[next_++];
    return true;
  }
  void writeCalibrationCache(const void* data, size_t size) override {
    written.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + size);
  }
  std::vector<uint8_t> written;

 private:
  std::vector<HostTensor> batches_;
  size_t next_ = 0;
};

HostTensor randomTensor(const Dims& d, unsigned seed) {
  HostTensor t(DataType::kFLOAT, d);
  std::vector<float> v = normalSamples(static_cast<size_t>(t.count()), seed);
  std::copy(v.begin(), v.end(), t.as<float>());
  return t;
}

//! conv(8 -> 16, 3x3) -> Relu -> conv(16 -> 8, 1x1): two layers implicit INT8 quantizes.
void makeConvNet(Network& net) {
  Tensor* x = net.addInput("x", DataType::kFLOAT, {1, 8, 12, 12});
  HostTensor w1 = randomTensor({16, 8, 3, 3}, 11), b1 = randomTensor({16}, 12), w2 = randomTensor({8, 16, 1, 1}, 13), b2 = randomTensor({8}, 14);
  for (HostTensor* w : {&w1, &w2})
    for (int64_t i = 0; i < w->count(); ++i) w->as<float>()[i] *= 0.2f;
  Layer* c1 = net.addConvolution(x, w1, b1, {1, 1}, {1, 1, 1, 1});
  Layer* r = net.addActivation(c1->outputs[0], "Relu");
  Layer* c2 = net.addConvolution(r->outputs[0], w2, b2, {1, 1}, {0, 0, 0, 0});
  net.renameTensor(c2->outputs[0], "y");
  net.markOutput(c2->outputs[0]);
}

//! makeConvNet's network, shaped, and a minmax table with step 0.05 for each conv's input (unsigned
//! where it is not the network input: the Relu's output).
CalibrationTable shapedConvNet(Network& net) {
  makeConvNet(net);
  net.topoSort();
  net.inferShapes();
  CalibrationTable t;
  t.algorithm = "minmax";
  for (auto& l : net.layers())
    if (l->op == "Conv") t.scales[l->inputs[0]->name] = {0.05f, !l->inputs[0]->isInput};
  return t;
}

std::vector<float> runOnce(Engine& e, const HostTensor& x) {
  auto ctx = e.createExecutionContext();
  HostTensor y(DataType::kFLOAT, e.getTensorShape("y"));
  ctx->setTensorAddress("x", const_cast<void*>(x.data()));
  ctx->setTensorAddress("y", y.data());
  ctx->enqueue();
  return std::vector<float>(y.as<float>(), y.as<float>() + y.count());
}

}  // namespace

TEST(Calibration, CalibratorThroughTheBuilderApi) {
  std::vector<HostTensor> batches;
  for (unsigned s = 0; s < 4; ++s) batches.push_back(randomTensor({1, 8, 12, 12}, 100 + s));
  VectorCalibrator calib(batches);
  Network qnet, fnet;
  makeConvNet(qnet), makeConvNet(fnet);
  BuilderConfig cfg;
  cfg.setBuilderOptimizationLevel(0);
  cfg.setFlag(BuilderFlag::kINT8);
  cfg.setInt8Calibrator(&calib);
  auto q = Builder().build(qnet, cfg);
  BuilderConfig fcfg;
  fcfg.setBuilderOptimizationLevel(0);
  auto f = Builder().build(fnet, fcfg);
  ASSERT_FALSE(calib.written.empty());
  const CalibrationTable t = parseCalibrationTable(calib.written);
  EXPECT_EQ(t.algorithm, "minmax");
  ASSERT_TRUE(t.scales.count("x"));
  float absMax = 0;
  for (const HostTensor& b : batches)
    for (int64_t i = 0; i < b.count(); ++i) absMax = std::max(absMax, std::fabs(b.as<float>()[i]));
  EXPECT_EQ(t.scales.at("x").scale, static_cast<float>(absMax / 127.0));
  EXPECT_FALSE(t.scales.at("x").isUnsigned);
  EXPECT_EQ(t.scales.size(), 2u);  // x and the Relu's output
  for (const auto& [name, a] : t.scales)
    if (name != "x") EXPECT_TRUE(a.isUnsigned) << name;  // Relu output: uint8
  const std::string info = q->getLayerInformation();
  size_t ints = 0;
  for (size_t p = info.find("\"QLinearConv\""); p != std::string::npos; p = info.find("\"QLinearConv\"", p + 1)) ++ints;
  EXPECT_EQ(ints, 2u) << info;
  const HostTensor x = randomTensor({1, 8, 12, 12}, 999);
  const std::vector<float> a = runOnce(*q, x), b = runOnce(*f, x);
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) dot += double(a[i]) * b[i], na += double(a[i]) * a[i], nb += double(b[i]) * b[i];
  EXPECT_GT(dot / std::sqrt(na * nb), 0.995);
}

TEST(Calibration, NoBatchIsAnError) {
  VectorCalibrator empty(std::vector<HostTensor>{});
  Network net;
  makeConvNet(net);
  BuilderConfig cfg;
  cfg.setFlag(BuilderFlag::kINT8);
  cfg.setInt8Calibrator(&empty);
  EXPECT_THROW(Builder().build(net, cfg), Error);
}

// The GPU has no QLinearConv kernel: quantizeCalibrated must leave such a conv float, reading its
// original input and weights, with no Q/DQ left behind, and say why (obey names it from there).
TEST(Calibration, LayerWithoutIntegerKernelStaysFloat) {
  Network net;
  const CalibrationTable t = shapedConvNet(net);
  std::vector<const void*> weights;
  for (auto& l : net.layers())
    if (l->op == "Conv") weights.push_back(l->inputs[1]->value.data());
  ImplicitQuantization q;
  auto noQLinearConv = [](const LayerDesc& d) { return d.op != "QLinearConv"; };
  EXPECT_TRUE(quantizeCalibrated(net, t, noQLinearConv, 127, ImplicitTargets{}, &q));
  EXPECT_TRUE(q.quantized.empty());
  EXPECT_EQ(q.keptFloat.size(), 2u);
  for (const auto& [name, why] : q.keptFloat) EXPECT_NE(why.find("no INT8 kernel"), std::string::npos) << name << ": " << why;
  std::vector<const void*> after;
  for (auto& l : net.layers()) {
    EXPECT_NE(l->op, "QuantizeLinear");
    EXPECT_NE(l->op, "DequantizeLinear");
    EXPECT_NE(l->op, "QLinearConv");
    if (l->op == "Conv") {
      EXPECT_EQ(l->inputs[0]->type, DataType::kFLOAT);
      after.push_back(l->inputs[1]->value.data());
    }
  }
  EXPECT_EQ(after, weights);  // the float weights themselves, not a dequantized copy
}

// The weight limit (Backend::int8WeightLimit): 63 on CPUs without VNNI, whose int8 instructions sum
// u8 x s8 pairs in saturating int16. Each conv's weights must use exactly [-limit, limit]: the
// largest |w| of each output channel maps to the limit.
TEST(Calibration, WeightsUseTheBackendsLimit) {
  for (int limit : {127, 63}) {
    Network net;
    const CalibrationTable t = shapedConvNet(net);
    ImplicitQuantization q;
    EXPECT_TRUE(quantizeCalibrated(net, t, [](const LayerDesc&) { return true; }, limit, ImplicitTargets{}, &q));
    int convs = 0;
    for (auto& l : net.layers()) {
      if (l->op != "QLinearConv") continue;
      ++convs;
      const HostTensor& w = l->inputs[3]->value;
      const int64_t channels = w.dims()[0], per = w.count() / channels;
      for (int64_t c = 0; c < channels; ++c) {
        int most = 0;
        for (int64_t i = 0; i < per; ++i) most = std::max(most, std::abs(static_cast<int>(w.as<int8_t>()[c * per + i])));
        EXPECT_EQ(most, limit) << l->name << " channel " << c;
      }
    }
    EXPECT_EQ(convs, 2) << "limit " << limit;
  }
}

// ImplicitTargets::signedActivations (the GPU: cuDNN's int8 convs read int8 only): a tensor that
// calibration saw non-negative becomes int8 with the same amax on [-127, 127] (its step x 255 / 127)
// instead of uint8; without the flag (the CPU) it stays uint8 with its own step.
TEST(Calibration, GpuActivationsAreSigned) {
  for (bool gpu : {false, true}) {
    Network net;
    const CalibrationTable t = shapedConvNet(net);
    ImplicitQuantization q;
    ImplicitTargets targets;
    targets.signedActivations = gpu;
    EXPECT_TRUE(quantizeCalibrated(net, t, [](const LayerDesc&) { return true; }, 127, targets, &q));
    int unsignedSeen = 0, convs = 0;
    for (auto& l : net.layers()) {
      if (l->op != "QLinearConv") continue;
      ++convs;
      const bool wasUnsigned = l->inputs[3]->dims[0] == 8;  // the 1x1 conv reads the Relu's output
      const DataType xt = l->inputs[0]->type;
      const float xs = l->inputs[1]->value.as<float>()[0];
      if (!wasUnsigned) {
        EXPECT_EQ(xt, DataType::kINT8) << l->name;
        EXPECT_FLOAT_EQ(xs, 0.05f) << l->name;
        continue;
      }
      ++unsignedSeen;
      EXPECT_EQ(xt, gpu ? DataType::kINT8 : DataType::kUINT8) << l->name;
      EXPECT_FLOAT_EQ(xs, gpu ? 0.05f * 255.f / 127.f : 0.05f) << l->name;
      EXPECT_EQ(l->inputs[2]->type, xt) << l->name;
    }
    EXPECT_EQ(convs, 2);
    EXPECT_EQ(unsignedSeen, 1) << "the case must have one non-negative conv input";
  }
}

// ImplicitTargets::convsOnRequest (the GPU): a Conv is quantized only where its precision asks for
// INT8 (--layerPrecisions=NAME:int8); the others stay float, each with the reason.
TEST(Calibration, GpuConvsOnlyWhereAsked) {
  Network net;
  const CalibrationTable t = shapedConvNet(net);
  std::string asked;
  for (auto& l : net.layers())
    if (l->op == "Conv" && asked.empty()) asked = l->name, l->precision = DataType::kINT8;
  ImplicitQuantization q;
  ImplicitTargets targets;
  targets.convsOnRequest = true;
  EXPECT_TRUE(quantizeCalibrated(net, t, [](const LayerDesc&) { return true; }, 127, targets, &q));
  EXPECT_EQ(q.quantized, std::vector<std::string>{asked});
  ASSERT_EQ(q.keptFloat.size(), 1u);
  EXPECT_NE(q.keptFloat.begin()->second.find("--layerPrecisions"), std::string::npos) << q.keptFloat.begin()->second;
  int convs = 0, qconvs = 0;
  for (auto& l : net.layers()) convs += l->op == "Conv", qconvs += l->op == "QLinearConv";
  EXPECT_EQ(convs, 1);
  EXPECT_EQ(qconvs, 1);
}

namespace {

//! x -> Conv -> Relu (h1), then `blocks` residual blocks h -> Conv -> Add(., h) -> Relu: each
//! identity is also its block's conv input, so it has a calibrated scale; the last Relu is "y".
CalibrationTable residualChain(Network& net, int blocks) {
  Tensor* x = net.addInput("x", DataType::kFLOAT, {1, 8, 10, 10});
  unsigned seed = 31;
  auto conv = [&](Tensor* in) {
    seed += 2;
    return net.addConvolution(in, randomTensor({8, 8, 3, 3}, seed), randomTensor({8}, seed + 1), {1, 1}, {1, 1, 1, 1})->outputs[0];
  };
  auto relu = [&](Tensor* in) { return net.addActivation(in, "Relu")->outputs[0]; };
  CalibrationTable t;
  t.algorithm = "minmax";
  t.scales["x"] = {0.02f, false};
  Tensor* h = relu(conv(x));
  for (int b = 0; b < blocks; ++b) {
    t.scales[h->name] = {0.03f, false};
    h = relu(net.addLayer("Add", {conv(h), h}, 1)->outputs[0]);
  }
  net.renameTensor(h, "y");
  net.markOutput(h);
  net.topoSort();
  net.inferShapes();
  return t;
}

}  // namespace

// The residual Add of a quantized conv reads the identity through its Q/DQ, which lowerQdq makes
// QLinearConv's residual (inputs 9..11) where a kernel takes that form; where none does, the Add is
// kept (reading the identity through DQ here: see ResidualIdentityReplacedByTheBlockBefore).
TEST(Calibration, ResidualAddJoinsTheConvWhereAKernelTakesIt) {
  for (bool residualKernel : {true, false}) {
    Network net;
    const CalibrationTable t = residualChain(net, 1);
    ImplicitQuantization q;
    auto supported = [residualKernel](const LayerDesc& d) { return residualKernel || !d.present(kQR); };
    EXPECT_TRUE(quantizeCalibrated(net, t, supported, 127, ImplicitTargets{}, &q));
    int qconvs = 0, withR = 0, adds = 0;
    for (auto& l : net.layers()) {
      if (l->op == "QLinearConv") ++qconvs, withR += l->inputs.size() > kQR && l->inputs[kQR] != nullptr;
      if (l->op == "Add") {
        ++adds;
        // The identity's only other reader was the second conv's Q, so the first conv wrote it int8
        // (its Relu and Q fused): the Add reads it through DQ, a float tensor of the block's shape.
        for (Tensor* in : l->inputs) EXPECT_EQ(in->type, DataType::kFLOAT) << l->name;
        for (Tensor* in : l->inputs) EXPECT_EQ(in->dims, (Dims{1, 8, 10, 10})) << in->name;
      }
    }
    EXPECT_EQ(qconvs, 2) << residualKernel;
    EXPECT_EQ(withR, residualKernel ? 1 : 0);
    EXPECT_EQ(adds, residualKernel ? 0 : 1);
  }
}

// Two residual blocks where only the first takes the residual form (the second's output is the
// network's float output, which this kernel refuses): the first block's integer layer replaces its
// Relu output, the second block's identity, so that Add keeps reading the identity through its
// Q/DQ (restoring the float tensor would read a removed one: found on ResNet-50).
TEST(Calibration, ResidualIdentityReplacedByTheBlockBefore) {
  Network net;
  const CalibrationTable t = residualChain(net, 2);
  ImplicitQuantization q;
  auto supported = [](const LayerDesc& d) { return !d.present(kQR) || d.outputs[0].type != DataType::kFLOAT; };
  EXPECT_TRUE(quantizeCalibrated(net, t, supported, 127, ImplicitTargets{}, &q));
  net.inferShapes();  // every tensor a layer reads is alive and shaped
  int withR = 0, adds = 0;
  for (auto& l : net.layers()) {
    withR += l->op == "QLinearConv" && l->inputs.size() > kQR && l->inputs[kQR];
    if (l->op != "Add") continue;
    ++adds;
    for (Tensor* in : l->inputs) {
      EXPECT_EQ(in->dims, (Dims{1, 8, 10, 10})) << in->name;
      EXPECT_EQ(in->type, DataType::kFLOAT) << in->name;
    }
  }
  EXPECT_EQ(withR, 1);
  EXPECT_EQ(adds, 1);
}

namespace {

class QuietLogger : public ILogger {
 public:
  void log(Severity, const std::string&) noexcept override {}
};

}  // namespace

// Calibration observes a quantizable conv's output that feeds an Add, after the BatchNormalization
// the builder folds into the conv, and records it under the conv's own tensor name (the one the fold
// keeps); a conv output feeding an Add directly is recorded under its name.
TEST(Calibration, ObservesConvOutputsThatFeedAnAdd) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {1, 8, 10, 10});
  Layer* a = net.addConvolution(x, randomTensor({8, 8, 3, 3}, 51), randomTensor({8}, 52), {1, 1}, {1, 1, 1, 1});
  auto vec = [](float v) {
    HostTensor t(DataType::kFLOAT, {8});
    for (int i = 0; i < 8; ++i) t.as<float>()[i] = v + 0.1f * static_cast<float>(i);
    return t;
  };
  Layer* bn = net.addLayer("BatchNormalization", {a->outputs[0], net.addConstant("g", vec(2.f)), net.addConstant("b", vec(3.f)),
                                                  net.addConstant("m", vec(0.f)), net.addConstant("v", vec(1.f))}, 1);
  Layer* b = net.addConvolution(x, randomTensor({8, 8, 1, 1}, 53), randomTensor({8}, 54), {1, 1}, {0, 0, 0, 0});
  Layer* add = net.addLayer("Add", {bn->outputs[0], b->outputs[0]}, 1);
  net.renameTensor(add->outputs[0], "y");
  net.markOutput(add->outputs[0]);
  net.topoSort();
  net.inferShapes();
  VectorCalibrator calibrator({randomTensor({1, 8, 10, 10}, 55)});
  BuilderConfig cfg;
  cfg.setThreads(1);
  QuietLogger log;
  const CalibrationTable t = calibrate(net, cfg, calibrator, log);
  EXPECT_TRUE(t.scales.count(a->outputs[0]->name)) << "conv A's output (BN folded into it)";
  EXPECT_FALSE(t.scales.count(bn->outputs[0]->name)) << "recorded under the conv's name, not the BN's";
  EXPECT_TRUE(t.scales.count(b->outputs[0]->name));
  ASSERT_TRUE(t.scales.count(a->outputs[0]->name));
  // The BN output's range, not the raw conv's: gamma ~2 and beta ~3 move it well away from the conv's.
  const float bnStep = t.scales.at(a->outputs[0]->name).scale;
  EXPECT_GT(bnStep * 127.f, 3.f) << "a step of " << bnStep;
}

// A downsample branch (the identity is another quantized conv's output) gets its own Q/DQ when
// calibration observed it, so the block's last conv takes it as its int8 residual.
TEST(Calibration, DownsampleBranchBecomesTheResidual) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {1, 8, 10, 10});
  Layer* main = net.addConvolution(x, randomTensor({8, 8, 3, 3}, 61), randomTensor({8}, 62), {1, 1}, {1, 1, 1, 1});
  Layer* ds = net.addConvolution(x, randomTensor({8, 8, 1, 1}, 63), randomTensor({8}, 64), {1, 1}, {0, 0, 0, 0});
  Tensor* y = net.addActivation(net.addLayer("Add", {main->outputs[0], ds->outputs[0]}, 1)->outputs[0], "Relu")->outputs[0];
  net.renameTensor(y, "y");
  net.markOutput(y);
  net.topoSort();
  net.inferShapes();
  CalibrationTable t;
  t.algorithm = "minmax";
  t.scales["x"] = {0.02f, false};
  t.scales[ds->outputs[0]->name] = {0.05f, false};
  ImplicitQuantization q;
  EXPECT_TRUE(quantizeCalibrated(net, t, [](const LayerDesc&) { return true; }, 127, ImplicitTargets{}, &q));
  int qconvs = 0, withR = 0, adds = 0;
  for (auto& l : net.layers()) {
    adds += l->op == "Add";
    if (l->op != "QLinearConv") continue;
    ++qconvs;
    if (l->inputs.size() > kQR && l->inputs[kQR]) {
      ++withR;
      EXPECT_EQ(l->inputs[kQR]->type, DataType::kINT8);
      EXPECT_TRUE(l->inputs[kQR]->producer && l->inputs[kQR]->producer->op == "QLinearConv") << "the downsample conv writes it int8";
    }
  }
  EXPECT_EQ(qconvs, 2);
  EXPECT_EQ(withR, 1);
  EXPECT_EQ(adds, 0);
}
