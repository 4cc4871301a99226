// Normalization and softmax ops: shape inference and errors, reference kernels vs NumPy
// (expected values computed with NumPy from the same inputs), optimized tactics vs reference.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "backends/backend.h"
#include "core/thread_pool.h"
#include "kiln/network.h"
#include "ops/op_registry.h"
#include "ref_case.h"
#include "tactic_names.h"

using namespace kiln;

namespace {

HostTensor makeTensor(DataType t, const Dims& d, const std::function<double(int64_t)>& f) {
  HostTensor h(t, d);
  for (int64_t i = 0; i < h.count(); ++i) {
    if (t == DataType::kDOUBLE) h.as<double>()[i] = f(i);
    else if (t == DataType::kFLOAT) h.as<float>()[i] = static_cast<float>(f(i));
    else if (t == DataType::kINT64) h.as<int64_t>()[i] = static_cast<int64_t>(f(i));
    else if (t == DataType::kINT32) h.as<int32_t>()[i] = static_cast<int32_t>(f(i));
    else ADD_FAILURE() << "makeTensor: type not handled";
  }
  return h;
}
//! The deterministic inputs the NumPy expectations were computed from.
HostTensor wave(const Dims& d, DataType t = DataType::kFLOAT) {
  return makeTensor(t, d, [](int64_t i) { return 3 * std::sin(0.7 * static_cast<double>(i)); });
}
HostTensor affine(const Dims& d, double a, double b) {
  return makeTensor(DataType::kFLOAT, d, [=](int64_t i) { return a + b * static_cast<double>(i); });
}
HostTensor values(const Dims& d, const std::vector<double>& v) {
  return makeTensor(DataType::kFLOAT, d, [&](int64_t i) { return v.at(static_cast<size_t>(i)); });
}
HostTensor randomTensor(const Dims& d, std::mt19937& rng, float scale = 1.f, float offset = 0.f) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  return makeTensor(DataType::kFLOAT, d, [&](int64_t) { return offset + scale * u(rng); });
}

//! One layer described for inference and run through a tactic.
using test::LayerCase;

void expectClose(const HostTensor& actual, const std::vector<double>& expected, double tol) {
  ASSERT_EQ(actual.count(), static_cast<int64_t>(expected.size()));
  for (int64_t i = 0; i < actual.count(); ++i)
    EXPECT_NEAR(actual.getDouble(i), expected[i], tol * std::max(1.0, std::fabs(expected[i]))) << "at " << i;
}

void expectSameAs(const HostTensor& actual, const HostTensor& reference, double tol) {
  ASSERT_EQ(actual.dims(), reference.dims());
  double worst = 0;
  for (int64_t i = 0; i < actual.count(); ++i) {
    double r = reference.getDouble(i), a = actual.getDouble(i);
    worst = std::max(worst, std::fabs(a - r) / std::max(1.0, std::fabs(r)));
  }
  EXPECT_LE(worst, tol);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Softmax family: reference vs NumPy

TEST(SoftmaxRef, MatchesNumpyOverAMiddleAxis) {
  LayerCase c("Softmax");
  c.input(wave({2, 3, 4})).attr("axis", int64_t(1));
  auto y = c.runRef();
  expectClose(y[0], {0.257578673, 0.831398661, 0.726163561, 0.406710684, 0.703656036, 0.0420183602, 0.00276405491,
                     0.00160178101, 0.0387652911, 0.126582979, 0.271072384, 0.591687535, 0.398735751, 0.169067621,
                     0.0849224784, 0.00910708203, 0.00162737617, 0.0101613604, 0.282038998, 0.950367662, 0.599636873,
                     0.820771019, 0.633038524, 0.040525256},
              1e-6);
}

TEST(SoftmaxRef, LegacyCoercedFormFlattensTrailingDims) {
  LayerCase c("Softmax");
  c.input(wave({2, 3, 4})).attr("axis", int64_t(1)).attr("kiln_coerce_2d", int64_t(1));
  auto y = c.runRef();
  expectClose(y[0], {0.0139993744, 0.0967050576, 0.269175028, 0.186539076, 0.0382436331, 0.00488741219, 0.00102458261,
                     0.000734661671, 0.00210688958, 0.0147236397, 0.10048138, 0.271379265, 0.217372533, 0.0436023473,
                     0.00557548055, 0.00119569621, 0.000887171215, 0.00262060331, 0.0185169224, 0.124776631,
                     0.326894656, 0.211675913, 0.0415613633, 0.00532068283},
              1e-6);
}

TEST(SoftmaxRef, LogSoftmaxOverAxis0) {
  LayerCase c("LogSoftmax");
  c.input(wave({3, 4})).attr("axis", int64_t(0));
  expectClose(c.runRef()[0], {-1.35643008, -0.184645863, -0.319979999, -0.899653197, -0.351465628, -3.16964861,
                              -5.89105651, -6.43663913, -3.25022999, -2.06685722, -1.30536939, -0.524776595},
              1e-6);
}

TEST(SoftmaxRef, HardmaxIsOneHotAtTheFirstMaximum) {
  LayerCase c("Hardmax");
  c.input(values({2, 3}, {1, 3, 3, 2, 2, 1}));  // default axis -1; ties pick the first
  expectClose(c.runRef()[0], {0, 1, 0, 1, 0, 0}, 0);
  LayerCase d("Hardmax");
  d.input(values({2, 3}, {1, 3, 3, 2, 2, 1})).attr("axis", int64_t(0));
  expectClose(d.runRef()[0], {0, 1, 1, 1, 0, 0}, 0);
}

TEST(SoftmaxRef, DoublePrecision) {
  LayerCase c("Softmax");
  c.input(wave({2, 3, 4}, DataType::kDOUBLE)).attr("axis", int64_t(1));
  auto y = c.runRef();
  EXPECT_EQ(y[0].type(), DataType::kDOUBLE);
  EXPECT_NEAR(y[0].getDouble(0), 0.257578673, 1e-9);
  EXPECT_NEAR(y[0].getDouble(23), 0.040525256, 1e-9);
}

// ---------------------------------------------------------------------------------------------
// Softmax family: inference and errors

TEST(SoftmaxInfer, ShapesAndErrors) {
  LayerCase ok("Softmax");
  ok.shape(DataType::kHALF, {-1, 5});
  ok.infer();
  EXPECT_EQ(ok.desc.outputs[0].dims, (Dims{-1, 5}));
  EXPECT_EQ(ok.desc.outputs[0].type, DataType::kHALF);

  LayerCase badAxis("Softmax");
  badAxis.shape(DataType::kFLOAT, {2, 3}).attr("axis", int64_t(2));
  EXPECT_THROW(badAxis.infer(), Error);
  LayerCase intInput("LogSoftmax");
  intInput.shape(DataType::kINT32, {2, 3});
  EXPECT_THROW(intInput.infer(), Error);
  LayerCase scalar("Hardmax");
  scalar.shape(DataType::kFLOAT, {});
  EXPECT_THROW(scalar.infer(), Error);
  LayerCase twoInputs("Softmax");
  twoInputs.shape(DataType::kFLOAT, {2}).shape(DataType::kFLOAT, {2});
  EXPECT_THROW(twoInputs.infer(), Error);
}

TEST(SoftmaxNormalize, LegacyOpsetsKeepTheirAxisDefaultAndCoerce) {
  const OpDef* def = OpRegistry::instance().find("Softmax");
  ASSERT_NE(def, nullptr);
  ASSERT_NE(def->normalize, nullptr);
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {2, 3, 4});
  Layer* legacy = net.addLayer("Softmax", {x}, 1);
  def->normalize(net, *legacy, 11);
  EXPECT_EQ(legacy->attrs.getInt("axis", -1), 1);
  EXPECT_EQ(legacy->attrs.getInt("kiln_coerce_2d", 0), 1);
  Layer* modern = net.addLayer("Softmax", {x}, 1);
  def->normalize(net, *modern, 13);
  EXPECT_FALSE(modern->attrs.has("kiln_coerce_2d"));
  EXPECT_FALSE(modern->attrs.has("axis"));
}

// ---------------------------------------------------------------------------------------------
// Softmax family: AVX2 tactic vs reference

TEST(SoftmaxTactic, MatchesReferenceOnRandomData) {
  std::mt19937 rng(7);
  struct Case {
    Dims dims;
    int64_t axis;
    bool coerce;
    float scale;
  };
  const std::vector<Case> cases = {{{7, 1000}, -1, false, 3.f},  {{3, 5, 13}, 2, false, 1.f},
                                   {{1, 1}, -1, false, 1.f},      {{4, 7}, 1, false, 60.f},
                                   {{2, 3, 5}, 1, true, 2.f},     {{16, 12, 64}, -1, false, 8.f},
                                   {{0, 9}, -1, false, 1.f}};
  for (const char* op : {"Softmax", "LogSoftmax"})
    for (const auto& k : cases) {
      SCOPED_TRACE(std::string(op) + " " + toString(k.dims));
      HostTensor x = randomTensor(k.dims, rng, k.scale);
      LayerCase c(op);
      c.input(x).attr("axis", k.axis);
      if (k.coerce) c.attr("kiln_coerce_2d", int64_t(1));
      auto tactic = c.tactic(kiln::test::f32Avx2(c.desc.op));
      ASSERT_TRUE(tactic.has_value());
      auto fast = c.run(*tactic, 3);
      auto ref = c.runRef();
      expectSameAs(fast[0], ref[0], 2e-6);
    }
}

TEST(SoftmaxTactic, NotOfferedWhenTheAxisIsNotInnermost) {
  LayerCase c("Softmax");
  c.shape(DataType::kFLOAT, {2, 3, 4}).attr("axis", int64_t(1));
  EXPECT_FALSE(c.tactic(kiln::test::f32Avx2(c.desc.op)).has_value());
  LayerCase d("Softmax");
  d.shape(DataType::kDOUBLE, {2, 3});
  EXPECT_FALSE(d.tactic(kiln::test::f32Avx2(d.desc.op)).has_value());
}

// ---------------------------------------------------------------------------------------------
// Normalizations: reference vs NumPy

TEST(NormRef, LayerNormalizationWithStatsAndBroadcastBias) {
  LayerCase c("LayerNormalization", 3);
  c.input(wave({2, 3, 4})).input(affine({3, 4}, 0.5, 0.1)).input(affine({4}, -0.2, 0.1)).attr("axis", int64_t(1));
  auto out = c.runRef();
  expectClose(out[0], {-0.300240866, 0.342011717, 0.863162581, 0.944209363, 0.0581544225, -0.810779411, -1.61523571,
                       -1.85563141, -1.65445206, -0.346430678, 1.13289242, 2.07927058, 0.387153908, 0.126194849,
                       -0.450644075, -1.02633178, -1.6004317, -1.11847535, -0.0528637109, 1.17857751, 1.58985721,
                       1.52557892, 0.529797746, -0.967188621},
              1e-5);
  EXPECT_EQ(out[1].dims(), (Dims{2, 1, 1}));
  expectClose(out[1], {0.413438854, 0.197700369}, 1e-6);
  expectClose(out[2], {0.484912655, 0.496305999}, 1e-6);
}

TEST(NormRef, RMSNormalization) {
  LayerCase c("RMSNormalization");
  c.input(wave({2, 6})).input(affine({6}, 1.0, 0.1)).attr("epsilon", 1e-3f);
  expectClose(c.runRef()[0], {0, 1.12819544, 1.88267229, 1.78656371, 0.746649005, -0.837701107, -1.13591304,
                              -1.40845907, -0.987265629, 0.0284873308, 1.19873857, 1.93179964},
              1e-5);
}

TEST(NormRef, GroupNormalizationPerChannelAffine) {
  LayerCase c("GroupNormalization");
  c.input(wave({2, 4, 3})).input(affine({4}, 1, 0.5)).input(affine({4}, 0, 0.25)).attr("num_groups", int64_t(2));
  expectClose(c.runRef()[0], {-0.872338967, 0.488882644, 1.20990046, 1.67741281, 0.00322840908, -2.17030743,
                              -1.44570181, -1.73947437, -0.808993276, 1.26015209, 3.38035561, 4.47720412, 1.71555265,
                              0.90464146, -0.133532005, -1.11604782, -1.34201689, -0.521928442, -1.07296603,
                              1.58410304, 2.92544036, 3.02524252, 0.191276047, -3.38724027},
              1e-5);
}

TEST(NormRef, GroupNormalizationOpset18PerGroupAffine) {
  LayerCase c("GroupNormalization");
  c.input(wave({2, 4, 3})).input(values({2}, {2, -1})).input(values({2}, {0.5, 1.5}));
  c.attr("num_groups", int64_t(2)).attr("kiln_per_group_affine", int64_t(1));
  expectClose(c.runRef()[0], {-1.24467793, 1.47776529, 2.91980092, 2.40321708, 0.170971212, -2.72707657, 2.4728509,
                              2.61973718, 2.15449664, 1.29593916, 0.447857756, 0.00911835384, 3.93110529, 2.30928292,
                              0.232935991, -1.32139709, -1.62268919, -0.529237923, 2.28648302, 0.957948481,
                              0.287279822, 0.58990299, 1.72348958, 3.15489611},
              1e-5);
}

// The residual fuse_residual moves in as input 3: Y = act(GroupNorm(X) + R), equal to the
// unfused layers (GroupNorm's reference above, then the Add and ReLU elementwise here).
TEST(NormRef, GroupAndInstanceNormalizationWithResidual) {
  std::mt19937 rng(17);
  for (const char* op : {"GroupNormalization", "InstanceNormalization"}) {
    SCOPED_TRACE(op);
    const Dims d = {2, 4, 3, 5};
    HostTensor x = randomTensor(d, rng, 2.f), r = randomTensor(d, rng, 2.f);
    HostTensor scale = randomTensor({4}, rng, 0.5f, 1.5f), bias = randomTensor({4}, rng);
    LayerCase plain(op);
    plain.input(x).input(scale, true).input(bias, true).attr("epsilon", 1e-5f);
    if (std::string(op) == "GroupNormalization") plain.attr("num_groups", int64_t(2));
    const HostTensor norm = plain.runRef()[0];
    LayerCase fused(op);
    fused.input(x).input(scale, true).input(bias, true).input(r).attr("epsilon", 1e-5f).attr("kiln_activation", std::string("Relu"));
    if (std::string(op) == "GroupNormalization") fused.attr("num_groups", int64_t(2));
    std::vector<double> want(static_cast<size_t>(norm.count()));
    for (int64_t i = 0; i < norm.count(); ++i) want[i] = std::max(0.f, norm.as<float>()[i] + r.as<float>()[i]);
    expectClose(fused.runRef()[0], want, 1e-6);
    // The residual must have X's shape (no broadcast).
    LayerCase bad(op);
    bad.input(x).input(scale, true).input(bias, true).input(randomTensor({4, 1, 1}, rng)).attr("epsilon", 1e-5f);
    if (std::string(op) == "GroupNormalization") bad.attr("num_groups", int64_t(2));
    EXPECT_THROW(bad.runRef(), Error);
  }
}

TEST(NormRef, InstanceNormalization) {
  LayerCase c("InstanceNormalization");
  c.input(wave({2, 3, 4})).input(affine({3}, 1, 0.5)).input(affine({3}, 0, 0.25));
  expectClose(c.runRef()[0], {-1.63997416, 0.0552566147, 0.953193865, 0.631523676, 2.55997622, 0.585862707,
                              -0.913330222, -1.23250871, -2.36410596, -0.276038352, 1.78655078, 2.85359353,
                              1.32358266, 0.511431445, -0.528329569, -1.30668453, -1.54753174, -0.688689215,
                              0.861716242, 2.37450472, 2.54525579, 2.00779905, -0.00544318744, -2.54761165},
              1e-5);
}

namespace {
void addBatchNormParams(LayerCase& c, bool constant) {
  c.input(affine({3}, 1, 0.5), constant).input(affine({3}, 0, 0.25), constant);
  c.input(affine({3}, -0.1, 0.1), constant).input(affine({3}, 0.5, 1), constant);
}
}  // namespace

TEST(NormRef, BatchNormalizationInference) {
  LayerCase c("BatchNormalization");
  c.input(wave({2, 3, 2, 2}));
  addBatchNormParams(c, true);
  expectClose(c.runRef()[0], {0.141419942, 2.87457678, 4.32228725, 3.8036705, 1.48082095, -1.03885558, -2.9523632,
                              -3.35974936, -2.02197453, 0.437313285, 2.86659301, 4.12333644, 3.76713978, 1.4952261,
                              -1.41340377, -3.59077576, -3.34771671, -2.0211732, 0.373538552, 2.7101482, 4.13259224,
                              3.5828863, 1.52376014, -1.07634704},
              1e-5);
}

TEST(NormRef, BatchNormalizationTrainingModeOutputsRunningStats) {
  LayerCase c("BatchNormalization", 3);
  c.input(wave({2, 3, 2, 2})).attr("training_mode", int64_t(1));
  addBatchNormParams(c, false);
  auto out = c.runRef();
  expectClose(out[0], {-0.482975274, 0.545421095, 1.09014658, 0.89500828, 1.97670941, 0.236576614, -1.0849253,
                       -1.36627333, -2.8303537, -0.627473023, 1.54852824, 2.67424269, 0.881262981, 0.0264171311,
                       -1.06800393, -1.88727687, -1.35796337, -0.441829159, 1.21200077, 2.82570436, 2.68253347,
                       2.19014027, 0.345700091, -1.98331803},
              1e-5);
  expectClose(out[1], {0.000764968691, -0.103647956, 0.194553871}, 1e-6);
  expectClose(out[2], {0.803171378, 1.66449777, 2.56158541}, 1e-6);
}

TEST(NormRef, BatchNormalizationPerActivationLegacy) {
  // spatial = 0 (opset < 9): one statistic per (C, H) position; check against the formula.
  LayerCase c("BatchNormalization");
  HostTensor x = wave({2, 2, 3});
  c.input(x).attr("kiln_per_activation", int64_t(1));
  c.input(affine({2, 3}, 1, 0.5)).input(affine({2, 3}, 0, 0.25)).input(affine({2, 3}, -0.1, 0.1)).input(affine({2, 3}, 0.5, 1));
  auto y = c.runRef()[0];
  for (int64_t i = 0; i < 12; ++i) {
    int64_t p = i % 6;
    double expect = (1 + 0.5 * p) * (x.getDouble(i) - (-0.1 + 0.1 * p)) / std::sqrt(0.5 + p + 1e-5) + 0.25 * p;
    EXPECT_NEAR(y.getDouble(i), expect, 1e-5) << i;
  }
}

// ---------------------------------------------------------------------------------------------
// Normalizations: inference and errors

TEST(NormInfer, LayerNormalizationShapesTypesAndErrors) {
  LayerCase c("LayerNormalization", 3);
  c.shape(DataType::kFLOAT, {-1, 7, 16}).shape(DataType::kFLOAT, {16}).missing();
  c.infer();
  EXPECT_EQ(c.desc.outputs[0].dims, (Dims{-1, 7, 16}));
  EXPECT_EQ(c.desc.outputs[1].dims, (Dims{-1, 7, 1}));
  EXPECT_EQ(c.desc.outputs[2].type, DataType::kFLOAT);

  LayerCase badScale("LayerNormalization");
  badScale.shape(DataType::kFLOAT, {2, 16}).shape(DataType::kFLOAT, {15});
  EXPECT_THROW(badScale.infer(), Error);
  LayerCase badAxis("LayerNormalization");
  badAxis.shape(DataType::kFLOAT, {2, 16}).shape(DataType::kFLOAT, {16}).attr("axis", int64_t(-3));
  EXPECT_THROW(badAxis.infer(), Error);
  LayerCase halfStash("LayerNormalization");
  halfStash.shape(DataType::kFLOAT, {2, 16}).shape(DataType::kFLOAT, {16}).attr("stash_type", int64_t(10));
  EXPECT_THROW(halfStash.infer(), UnsupportedError);
  LayerCase negEps("LayerNormalization");
  negEps.shape(DataType::kFLOAT, {2, 16}).shape(DataType::kFLOAT, {16}).attr("epsilon", -1.f);
  EXPECT_THROW(negEps.infer(), Error);
  LayerCase intX("RMSNormalization");
  intX.shape(DataType::kINT64, {2, 16}).shape(DataType::kFLOAT, {16});
  EXPECT_THROW(intX.infer(), Error);
}

// A skip LayerNorm's residual R must have X's dims where both are known: a dynamic export may know a
// dim on one side only (BEiT: R [-1, -1, E] beside X [-1, 197, E]); dims that are known and differ
// are an error, as is another rank.
TEST(NormInfer, SkipInputDimsAgreeWhereKnown) {
  for (auto [r, ok] : {std::pair<Dims, bool>{{-1, -1, 16}, true}, {{-1, 7, 16}, true}, {{-1, 5, 16}, false}, {{7, 16}, false}}) {
    SCOPED_TRACE(toString(r));
    LayerCase c("LayerNormalization", 2);
    c.shape(DataType::kFLOAT, {-1, 7, 16}).shape(DataType::kFLOAT, {16}).shape(DataType::kFLOAT, {16}).shape(DataType::kFLOAT, r);
    c.attr("kiln_skip", int64_t(1));
    if (ok) {
      c.infer();
      EXPECT_EQ(c.desc.outputs[0].dims, (Dims{-1, 7, 16}));
    } else {
      EXPECT_THROW(c.infer(), Error);
    }
  }
}

TEST(NormInfer, BatchNormalizationModesAndErrors) {
  LayerCase train("BatchNormalization", 3);
  train.shape(DataType::kFLOAT, {-1, 8, 4, 4}).attr("training_mode", int64_t(1));
  for (int i = 0; i < 4; ++i) train.shape(DataType::kFLOAT, {8});
  train.infer();
  EXPECT_EQ(train.desc.outputs[1].dims, (Dims{8}));

  LayerCase extraOutputs("BatchNormalization", 2);
  extraOutputs.shape(DataType::kFLOAT, {1, 8, 4, 4});
  for (int i = 0; i < 4; ++i) extraOutputs.shape(DataType::kFLOAT, {8});
  EXPECT_THROW(extraOutputs.infer(), Error);

  LayerCase wrongParam("BatchNormalization");
  wrongParam.shape(DataType::kFLOAT, {1, 8, 4, 4});
  for (int i = 0; i < 4; ++i) wrongParam.shape(DataType::kFLOAT, {i == 2 ? 7 : 8});
  EXPECT_THROW(wrongParam.infer(), Error);

  LayerCase rank1("BatchNormalization");
  rank1.shape(DataType::kFLOAT, {8});
  for (int i = 0; i < 4; ++i) rank1.shape(DataType::kFLOAT, {8});
  EXPECT_THROW(rank1.infer(), Error);

  LayerCase fourInputs("BatchNormalization");
  fourInputs.shape(DataType::kFLOAT, {1, 8});
  for (int i = 0; i < 3; ++i) fourInputs.shape(DataType::kFLOAT, {8});
  EXPECT_THROW(fourInputs.infer(), Error);
}

TEST(NormInfer, GroupAndInstanceNormalizationErrors) {
  LayerCase notDivisible("GroupNormalization");
  notDivisible.shape(DataType::kFLOAT, {1, 6, 4}).shape(DataType::kFLOAT, {6}).shape(DataType::kFLOAT, {6});
  notDivisible.attr("num_groups", int64_t(4));
  EXPECT_THROW(notDivisible.infer(), Error);
  LayerCase noGroups("GroupNormalization");
  noGroups.shape(DataType::kFLOAT, {1, 6, 4}).shape(DataType::kFLOAT, {6}).shape(DataType::kFLOAT, {6});
  EXPECT_THROW(noGroups.infer(), Error);
  LayerCase zeroGroups("GroupNormalization");
  zeroGroups.shape(DataType::kFLOAT, {1, 6, 4}).shape(DataType::kFLOAT, {6}).shape(DataType::kFLOAT, {6});
  zeroGroups.attr("num_groups", int64_t(0));
  EXPECT_THROW(zeroGroups.infer(), Error);
  LayerCase perGroupShape("GroupNormalization");
  perGroupShape.shape(DataType::kFLOAT, {1, 6, 4}).shape(DataType::kFLOAT, {3}).shape(DataType::kFLOAT, {3});
  perGroupShape.attr("num_groups", int64_t(3));
  EXPECT_THROW(perGroupShape.infer(), Error);  // opset-21 form wants [C]
  perGroupShape.attr("kiln_per_group_affine", int64_t(1));
  EXPECT_NO_THROW(perGroupShape.infer());
  LayerCase legacyPerChannel("GroupNormalization");  // opset 18 written with per-channel scale
  legacyPerChannel.shape(DataType::kFLOAT, {1, 6, 4}).shape(DataType::kFLOAT, {6}).shape(DataType::kFLOAT, {6});
  legacyPerChannel.attr("num_groups", int64_t(3)).attr("kiln_per_group_affine", int64_t(1));
  EXPECT_NO_THROW(legacyPerChannel.infer());
  LayerCase mixed("GroupNormalization");
  mixed.shape(DataType::kFLOAT, {1, 6, 4}).shape(DataType::kFLOAT, {3}).shape(DataType::kFLOAT, {6});
  mixed.attr("num_groups", int64_t(3)).attr("kiln_per_group_affine", int64_t(1));
  EXPECT_THROW(mixed.infer(), Error);

  LayerCase rank2("InstanceNormalization");
  rank2.shape(DataType::kFLOAT, {2, 3}).shape(DataType::kFLOAT, {3}).shape(DataType::kFLOAT, {3});
  EXPECT_THROW(rank2.infer(), Error);
  LayerCase absurd("InstanceNormalization");
  absurd.shape(DataType::kFLOAT, {int64_t(1) << 40, 2, int64_t(1) << 40}).shape(DataType::kFLOAT, {2});
  absurd.shape(DataType::kFLOAT, {2});
  EXPECT_THROW(absurd.infer(), Error);  // the element count overflows
}

TEST(NormNormalize, LegacyBatchNormAndGroupNorm) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {1, 3, 4, 4});
  std::vector<Tensor*> ins{x};
  for (int i = 0; i < 4; ++i) ins.push_back(net.addConstant("p" + std::to_string(i), affine({3}, 1, 0)));
  const OpDef* bn = OpRegistry::instance().find("BatchNormalization");
  Attributes a;
  a.set("spatial", int64_t(0));
  a.set("is_test", int64_t(1));
  Layer* perAct = net.addLayer("BatchNormalization", ins, 1, a);
  bn->normalize(net, *perAct, 7);
  EXPECT_EQ(perAct->attrs.getInt("kiln_per_activation", 0), 1);
  EXPECT_EQ(perAct->attrs.getInt("training_mode", -1), 0);
  EXPECT_FALSE(perAct->attrs.has("spatial"));
  EXPECT_FALSE(perAct->attrs.has("is_test"));
  Layer* training = net.addLayer("BatchNormalization", ins, 3);
  bn->normalize(net, *training, 9);
  EXPECT_EQ(training->attrs.getInt("training_mode", 0), 1);
  EXPECT_FALSE(training->attrs.has("kiln_per_activation"));

  const OpDef* gn = OpRegistry::instance().find("GroupNormalization");
  Layer* g18 = net.addLayer("GroupNormalization", {x, ins[1], ins[2]}, 1);
  gn->normalize(net, *g18, 18);
  EXPECT_EQ(g18->attrs.getInt("kiln_per_group_affine", 0), 1);
  Layer* g21 = net.addLayer("GroupNormalization", {x, ins[1], ins[2]}, 1);
  gn->normalize(net, *g21, 21);
  EXPECT_FALSE(g21->attrs.has("kiln_per_group_affine"));
}

// ---------------------------------------------------------------------------------------------
// Normalizations: AVX2 tactics vs reference

TEST(NormTactic, LayerNormalizationMatchesReference) {
  std::mt19937 rng(11);
  struct Case {
    Dims x, scale;
    int64_t axis;
    bool bias, stats;
  };
  const std::vector<Case> cases = {{{4, 768}, {768}, -1, true, false},       {{3, 5, 13}, {13}, -1, true, true},
                                   {{2, 3, 10}, {3, 10}, 1, false, true},    {{6, 1}, {1}, -1, true, false},
                                   {{2, 9, 1000}, {1, 1000}, 2, true, false}, {{0, 32}, {32}, -1, true, false}};
  for (const auto& k : cases) {
    SCOPED_TRACE(toString(k.x));
    LayerCase c("LayerNormalization", k.stats ? 3 : 1);
    c.input(randomTensor(k.x, rng, 4.f, 10.f)).input(randomTensor(k.scale, rng), true);
    if (k.bias) c.input(randomTensor(k.scale, rng), true);
    c.attr("axis", k.axis);
    auto tactic = c.tactic(kiln::test::f32Avx2(c.desc.op));
    ASSERT_TRUE(tactic.has_value());
    auto fast = c.run(*tactic);
    auto ref = c.runRef();
    for (size_t o = 0; o < fast.size(); ++o) expectSameAs(fast[o], ref[o], 2e-5);
  }
}

TEST(NormTactic, LayerNormalizationNotOfferedForBroadcastScale) {
  LayerCase c("LayerNormalization");
  c.shape(DataType::kFLOAT, {2, 8}).shape(DataType::kFLOAT, {1});
  EXPECT_FALSE(c.tactic(kiln::test::f32Avx2(c.desc.op)).has_value());
  LayerCase unknown("LayerNormalization");
  unknown.shape(DataType::kFLOAT, {2, -1}).shape(DataType::kFLOAT, {1});
  EXPECT_FALSE(unknown.tactic(kiln::test::f32Avx2(unknown.desc.op)).has_value());
}

TEST(NormTactic, BatchNormalizationMatchesReference) {
  std::mt19937 rng(5);
  const std::vector<Dims> shapes = {{2, 16, 7, 9}, {5, 19}, {1, 3, 8, 8}, {3, 4, 1, 3}, {2, 5, 11}};
  for (bool constant : {true, false})
    for (const auto& d : shapes) {
      SCOPED_TRACE(toString(d) + (constant ? " constant" : " dynamic"));
      Dims p = {d[1]};
      LayerCase c("BatchNormalization");
      c.input(randomTensor(d, rng, 3.f)).input(randomTensor(p, rng), constant).input(randomTensor(p, rng), constant);
      c.input(randomTensor(p, rng), constant).input(randomTensor(p, rng, 0.4f, 1.f), constant);
      c.attr("epsilon", 1e-3f);
      auto tactic = c.tactic(kiln::test::f32Avx2(c.desc.op));
      ASSERT_TRUE(tactic.has_value());
      expectSameAs(c.run(*tactic)[0], c.runRef()[0], 1e-5);
    }
}

// group_normalization_f32_avx2 / instance_normalization_f32_avx2: groups short and long (past the
// kernel's float-lane fold), per-channel and per-group affine, a fused activation, a large mean.
TEST(NormTactic, GroupAndInstanceNormalizationMatchReference) {
  std::mt19937 rng(9), residualRng(10);
  struct Case {
    const char* op;
    Dims dims;
    int64_t groups;
    bool perGroup;
    const char* act;
  };
  const std::vector<Case> cases = {{"GroupNormalization", {2, 8, 5, 7}, 4, false, ""},
                                   {"GroupNormalization", {1, 32, 40, 40}, 8, false, "Silu"},  // 6400 per group
                                   {"GroupNormalization", {2, 6, 3}, 3, true, "Relu"},
                                   {"GroupNormalization", {3, 4}, 2, false, "Mish"},
                                   {"InstanceNormalization", {2, 3, 9, 11}, 0, false, ""},
                                   {"InstanceNormalization", {1, 2, 5000}, 0, false, "Gelu"}};
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.op) + " " + toString(k.dims) + " " + k.act);
    const Dims p = {k.perGroup ? k.groups : k.dims[1]};
    HostTensor x = randomTensor(k.dims, rng, 2.f);
    for (int64_t i = 0; i < x.count(); ++i) x.as<float>()[i] += 50.f;  // a large mean: the variance must not cancel
    LayerCase c(k.op);
    c.input(x).input(randomTensor(p, rng, 0.5f, 1.5f), true).input(randomTensor(p, rng), true).attr("epsilon", 1e-5f);
    if (k.groups) c.attr("num_groups", k.groups);
    if (k.perGroup) c.attr("kiln_per_group_affine", int64_t(1));
    if (*k.act) c.attr("kiln_activation", std::string(k.act));
    if (k.dims.size() == 4 && k.dims[0] == 2) c.input(randomTensor(k.dims, residualRng, 2.f));  // a fused residual (fuse_residual)
    auto tactic = c.tactic(kiln::test::f32Avx2(c.desc.op));
    ASSERT_TRUE(tactic.has_value());
    expectSameAs(c.run(*tactic, 2)[0], c.runRef()[0], 2e-5);
  }
}

TEST(NormTactic, BatchNormalizationTrainingModeUsesReference) {
  LayerCase c("BatchNormalization", 3);
  c.shape(DataType::kFLOAT, {2, 3, 4}).attr("training_mode", int64_t(1));
  for (int i = 0; i < 4; ++i) c.shape(DataType::kFLOAT, {3});
  EXPECT_FALSE(c.tactic(kiln::test::f32Avx2(c.desc.op)).has_value());
  EXPECT_TRUE(c.tactic("ref").has_value());
}
