// attention_f32_gemm_avx2 (backends/cpu/attention_cpu.cpp) against the reference kernel of the
// ONNX Attention op (ops/attention.cpp, checked by the ONNX node tests): 3-D and 4-D inputs, GQA,
// bool and float masks broadcast over batch / heads / rows, is_causal with Sq != Skv, an explicit
// scale, kiln_mask_fill, fully masked rows; and the features it leaves to the reference kernel.
#include <gtest/gtest.h>

#include "op_test_util.h"
#include "ops/attention_config.h"

namespace kiln {
namespace {

const char* kTactic = "attention_f32_gemm_avx2";

Backend& cpu() {
  static auto b = getBackend(DeviceType::kCPU, 2);
  return *b;
}

bool offered(const test::OpCase& c) {
  for (const std::string& n : test::tacticNames(cpu(), c))
    if (n == kTactic) return true;
  return false;
}

HostTensor uniform(const Dims& d, uint32_t seed, float lo = -1.5f, float hi = 1.5f) {
  return test::uniformOfType(d, DataType::kFLOAT, seed, lo, hi);
}

//! Bool mask of `dims` with about a third of the keys masked (seeded).
HostTensor boolMask(const Dims& dims, uint32_t seed) {
  HostTensor m(DataType::kBOOL, dims);
  const HostTensor r = uniform(dims, seed, 0.f, 1.f);
  for (int64_t i = 0; i < m.count(); ++i) m.as<bool>()[i] = r.as<float>()[i] > 0.33f;
  return m;
}

void expectMatchesReference(const test::OpCase& c, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(offered(c));
  const HostTensor want = test::runReference(c)[0];
  test::expectClose(test::runTactic(cpu(), kTactic, c)[0], want, 1e-4, 2e-5, what);
}

test::OpCase attention4d(int64_t b, int64_t h, int64_t sq, int64_t skv, int64_t d, int64_t dv, uint32_t seed) {
  test::OpCase c;
  c.op = "Attention";
  c.inputs = {uniform({b, h, sq, d}, seed), uniform({b, h, skv, d}, seed + 1), uniform({b, h, skv, dv}, seed + 2, -1.f, 1.f)};
  return c;
}

TEST(CpuAttention, MatchesTheReferenceKernel) {
  // Plain 4-D, key counts that are not multiples of 8, an explicit scale.
  test::OpCase c = attention4d(2, 3, 9, 13, 8, 5, 10);
  expectMatchesReference(c, "4-D");
  c.attrs.set("scale", 0.25f);
  expectMatchesReference(c, "4-D scale 0.25");
  // Causal with Sq != Skv (the frontier is top-left aligned, as the reference's).
  c.attrs.set("is_causal", int64_t(1));
  expectMatchesReference(c, "4-D causal");
  // A float [Sq, Skv] mask broadcast over batch and heads, plus causal.
  c.inputs.push_back(uniform({9, 13}, 14, -2.f, 2.f));
  expectMatchesReference(c, "float mask + causal");
  // Bool key flags [B, 1, 1, Skv], no causal; then batch 1's keys all masked (rows of zeros).
  test::OpCase k = attention4d(2, 3, 9, 13, 8, 5, 20);
  k.inputs.push_back(boolMask({2, 1, 1, 13}, 23));
  expectMatchesReference(k, "bool key flags");
  for (int64_t j = 0; j < 13; ++j) k.inputs[3].as<bool>()[13 + j] = false;
  expectMatchesReference(k, "a batch with every key masked");
  // kiln_mask_fill: a fully masked row is uniform over the keys instead of zero.
  k.attrs.set(kAttentionMaskFillAttr, -1e30f);
  expectMatchesReference(k, "kiln_mask_fill");
  // A per-head bool mask [1, H, Sq, Skv].
  test::OpCase p = attention4d(1, 3, 9, 13, 8, 8, 30);
  p.inputs.push_back(boolMask({1, 3, 9, 13}, 33));
  expectMatchesReference(p, "per-head bool mask");
}

TEST(CpuAttention, ThreeDimensionalInputsWithGroupedKeyValueHeads) {
  // Q [B, Sq, 4 * 16], K / V [B, Skv, 2 * 16]: two query heads per key/value head.
  test::OpCase c;
  c.op = "Attention";
  c.attrs.set("q_num_heads", int64_t(4));
  c.attrs.set("kv_num_heads", int64_t(2));
  c.inputs = {uniform({2, 7, 64}, 40), uniform({2, 11, 32}, 41), uniform({2, 11, 32}, 42, -1.f, 1.f)};
  expectMatchesReference(c, "3-D GQA");
  c.attrs.set("is_causal", int64_t(1));
  expectMatchesReference(c, "3-D GQA causal");
}

TEST(CpuAttention, LeavesTheRarerFeaturesToTheReference) {
  test::OpCase c = attention4d(1, 2, 4, 4, 8, 8, 50);
  ASSERT_TRUE(offered(c));
  test::OpCase soft = c;
  soft.attrs.set("softcap", 30.f);
  EXPECT_FALSE(offered(soft));
  test::OpCase qk = c;
  qk.nbOutputs = 4;  // present_key, present_value, qk_matmul_output
  EXPECT_FALSE(offered(qk));
  test::OpCase past = c;
  past.inputs.push_back(HostTensor());  // no mask
  past.inputs.push_back(uniform({1, 2, 3, 8}, 51));
  past.inputs.push_back(uniform({1, 2, 3, 8}, 52));
  past.nbOutputs = 3;
  EXPECT_FALSE(offered(past));
  test::OpCase dbl = c;
  dbl.attrs.set("softmax_precision", int64_t(11));  // double
  EXPECT_FALSE(offered(dbl));
}

}  // namespace
}  // namespace kiln
