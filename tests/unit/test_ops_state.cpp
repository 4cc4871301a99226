// Sequence-state ops: CausalConvWithState, LinearAttention, TensorScatter. Shape inference and its
// errors; reference kernels vs NumPy models of the ONNX specs (tests/unit/gen_state_image_signal_ref.py
// writes state_ops_ref.inc; each case also agrees with onnx.reference and ONNX Runtime there).
// These ops have CPU kernels only: a GPU build refuses them by name.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kiln/builder.h"
#include "kiln/runtime.h"
#include "kiln/network.h"
#include "ref_case.h"

using namespace kiln;
using namespace kiln::test;

namespace {
#include "state_ops_ref.inc"

HostTensor floats(const Dims& d, float start = 0.0f) {
  HostTensor t(DataType::kFLOAT, d);
  for (int64_t i = 0; i < t.count(); ++i) t.as<float>()[i] = start + 0.25f * static_cast<float>(i);
  return t;
}

HostTensor int64s(const Dims& d, std::vector<int64_t> v) {
  HostTensor t(DataType::kINT64, d);
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

}  // namespace

TEST(StateOpsRef, MatchesNumpyModel) {
  ASSERT_EQ(kStateOpCases.size(), 10u);
  for (const RefCase& c : kStateOpCases) checkRefCase(c);
}

TEST(CausalConvWithState, InferShapesAndErrors) {
  LayerCase c("CausalConvWithState", 2);
  c.shape(DataType::kFLOAT, {2, 3, -1}).shape(DataType::kFLOAT, {3, 1, 4});
  c.infer();
  EXPECT_EQ(c.desc.outputs[0].dims, (Dims{2, 3, -1}));
  EXPECT_EQ(c.desc.outputs[1].dims, (Dims{2, 3, 3}));

  LayerCase k1("CausalConvWithState", 2);  // kernel 1: the carried state is empty
  k1.shape(DataType::kFLOAT, {1, 2, 5}).shape(DataType::kFLOAT, {2, 1, 1});
  k1.infer();
  EXPECT_EQ(k1.desc.outputs[1].dims, (Dims{1, 2, 0}));

  LayerCase act("CausalConvWithState", 2);
  act.shape(DataType::kFLOAT, {1, 2, 5}).shape(DataType::kFLOAT, {2, 1, 3}).attr("activation", std::string("gelu"));
  expectInferError(act, "activation must be none, silu or swish");

  LayerCase notDepthwise("CausalConvWithState", 2);
  notDepthwise.shape(DataType::kFLOAT, {1, 2, 5}).shape(DataType::kFLOAT, {2, 2, 3});
  expectInferError(notDepthwise, "must be 1 (depthwise)");

  LayerCase badPast("CausalConvWithState", 2);
  badPast.shape(DataType::kFLOAT, {1, 2, 5}).shape(DataType::kFLOAT, {2, 1, 3}).missing().shape(DataType::kFLOAT, {1, 2, 3});
  expectInferError(badPast, "past_state's length is 3 but kernel - 1 is 2");
}

TEST(CausalConvWithState, DecodeStepContinuesTheSequence) {
  // Running [x0 x1] at once equals running x0, then x1 with x0's present_state as its past_state.
  const HostTensor w = floats({2, 1, 3}, -0.5f), x = floats({1, 2, 6}, -1.0f);
  LayerCase whole("CausalConvWithState", 2);
  whole.input(x).input(w).attr("activation", std::string("silu"));
  const auto all = whole.runRef();
  HostTensor x0(DataType::kFLOAT, {1, 2, 4}), x1(DataType::kFLOAT, {1, 2, 2});
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t t = 0; t < 6; ++t)
      (t < 4 ? x0.as<float>()[c * 4 + t] : x1.as<float>()[c * 2 + t - 4]) = x.as<float>()[c * 6 + t];
  LayerCase first("CausalConvWithState", 2);
  first.input(x0).input(w).attr("activation", std::string("silu"));
  const auto a = first.runRef();
  LayerCase second("CausalConvWithState", 2);
  second.input(x1).input(w).missing().input(a[1]).attr("activation", std::string("silu"));
  const auto b = second.runRef();
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t t = 0; t < 6; ++t)
      EXPECT_FLOAT_EQ(t < 4 ? a[0].as<float>()[c * 4 + t] : b[0].as<float>()[c * 2 + t - 4], all[0].as<float>()[c * 6 + t]);
  for (int64_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(b[1].as<float>()[i], all[1].as<float>()[i]);
}

TEST(LinearAttention, InferShapesAndErrors) {
  LayerCase c("LinearAttention", 2);
  c.shape(DataType::kFLOAT, {2, 5, 8}).shape(DataType::kFLOAT, {2, 5, 4}).shape(DataType::kFLOAT, {2, 5, 6});
  c.missing().shape(DataType::kFLOAT, {2, 5, 2}).shape(DataType::kFLOAT, {2, 5, 1});
  c.attr("q_num_heads", int64_t(4)).attr("kv_num_heads", int64_t(2));
  c.infer();
  EXPECT_EQ(c.desc.outputs[0].dims, (Dims{2, 5, 12}));  // Hq * d_v = 4 * 3
  EXPECT_EQ(c.desc.outputs[1].dims, (Dims{2, 2, 2, 3}));

  LayerCase doubleState("LinearAttention", 2);  // present_state takes past_state's type
  doubleState.shape(DataType::kFLOAT, {1, 1, 4}).shape(DataType::kFLOAT, {1, 1, 4}).shape(DataType::kFLOAT, {1, 1, 4});
  doubleState.shape(DataType::kDOUBLE, {1, 2, 2, 2});
  doubleState.attr("q_num_heads", int64_t(2)).attr("kv_num_heads", int64_t(2)).attr("update_rule", std::string("linear"));
  doubleState.infer();
  EXPECT_EQ(doubleState.desc.outputs[1].type, DataType::kDOUBLE);

  LayerCase noDecay("LinearAttention", 2);
  noDecay.shape(DataType::kFLOAT, {1, 1, 4}).shape(DataType::kFLOAT, {1, 1, 4}).shape(DataType::kFLOAT, {1, 1, 4});
  noDecay.attr("q_num_heads", int64_t(2)).attr("kv_num_heads", int64_t(2)).attr("update_rule", std::string("gated"));
  expectInferError(noDecay, "needs decay");

  LayerCase heads("LinearAttention", 2);
  heads.shape(DataType::kFLOAT, {1, 1, 6}).shape(DataType::kFLOAT, {1, 1, 4}).shape(DataType::kFLOAT, {1, 1, 4});
  heads.attr("q_num_heads", int64_t(3)).attr("kv_num_heads", int64_t(2)).attr("update_rule", std::string("linear"));
  expectInferError(heads, "must be a positive multiple of kv_num_heads");
}

TEST(TensorScatter, InferAndLinearOverflow) {
  LayerCase bad("TensorScatter");
  bad.shape(DataType::kFLOAT, {2, 4, 3}).shape(DataType::kFLOAT, {2, 5, 3});
  expectInferError(bad, "does not fit past_cache");

  // Linear mode: writing 2 positions at index 3 of a 4-position cache is refused at run time.
  LayerCase over("TensorScatter");
  over.input(floats({2, 4, 3})).input(floats({2, 2, 3})).input(int64s({2}, {0, 3}));
  EXPECT_THROW(over.runRef(), Error);
  // Circular mode wraps instead.
  LayerCase wrap("TensorScatter");
  wrap.input(floats({2, 4, 3})).input(floats({2, 2, 3}, 100.0f)).input(int64s({2}, {0, 3})).attr("mode", std::string("circular"));
  const auto y = wrap.runRef();
  EXPECT_FLOAT_EQ(y[0].as<float>()[12 + 3 * 3], 100.0f + 0.25f * 6);  // batch 1, position 3 <- update row 0
  EXPECT_FLOAT_EQ(y[0].as<float>()[12 + 0 * 3], 100.0f + 0.25f * 9);  // batch 1, position 0 <- update row 1
}

TEST(StateOps, GpuBuildRunsThemOnTheHost) {
  if (!gpuAvailable()) GTEST_SKIP() << "no GPU on this machine: the GPU fallback is not checked";
  // No CUDA kernel: the layer runs its reference kernel on the host between copies
  // (backends/cuda/host_fallback.h), and the build says so (test_cuda_host_fallback.cpp compares
  // the values).
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {1, 2, 5});
  Layer* l = net.addLayer("CausalConvWithState", {x, net.addConstant("w", floats({2, 1, 3}))}, 2, {}, "causal_conv");
  net.markOutput(l->outputs[0]);
  BuilderConfig cfg;
  cfg.setDevice(DeviceType::kGPU);
  auto engine = Builder().build(net, cfg);
  ASSERT_TRUE(engine);
  EXPECT_NE(engine->getLayerInformation().find("host_reference_fallback"), std::string::npos) << engine->getLayerInformation();
}
