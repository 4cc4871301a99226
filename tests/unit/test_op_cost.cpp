// The roofline's cost model (ops/op_cost.h): FLOPs counted here by walking each op's definition
// (one count per multiply-add of a naive loop nest, times 2), bytes from the tensors' sizes.
#include <gtest/gtest.h>

#include "kiln/network.h"
#include "ops/op_cost.h"

using namespace kiln;

namespace {

TensorDesc t(DataType type, Dims d) {
  TensorDesc x;
  x.type = type;
  x.dims = std::move(d);
  return x;
}

LayerDesc layer(const std::string& op, const Attributes& a, std::vector<TensorDesc> in, std::vector<TensorDesc> out) {
  LayerDesc l;
  l.name = op;
  l.op = op;
  l.attrs = &a;
  l.inputs = std::move(in);
  l.inputPresent.assign(l.inputs.size(), true);
  l.outputs = std::move(out);
  return l;
}

}  // namespace

TEST(OpCost, GroupedConvCountsEveryWindowMultiplyAdd) {
  Attributes a;
  a.set("group", int64_t{4});
  const int64_t n = 2, c = 8, k = 12, oh = 5, ow = 7, kh = 3, kw = 3, g = 4;
  LayerDesc l = layer("Conv", a, {t(DataType::kHALF, {n, c, 7, 9}), t(DataType::kHALF, {k, c / g, kh, kw})},
                      {t(DataType::kHALF, {n, k, oh, ow})});
  double macs = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < k; ++o)
      for (int64_t y = 0; y < oh * ow; ++y)
        for (int64_t ci = 0; ci < c / g; ++ci) macs += kh * kw;
  const OpCost cost = opCost(l);
  EXPECT_DOUBLE_EQ(cost.flops, 2 * macs);
  EXPECT_DOUBLE_EQ(cost.bytes, 2.0 * (n * c * 7 * 9 + k * (c / g) * kh * kw + n * k * oh * ow));
  EXPECT_TRUE(cost.matrix);
}

// Depthwise (ConvNeXt's 7x7): one input channel and one output channel per group, a window of
// multiply-adds per output; vector math (no tensor-core product to run it), so the roofline takes the
// vector peak.
TEST(OpCost, DepthwiseConvIsVectorMath) {
  Attributes a;
  a.set("group", int64_t{96});
  LayerDesc l = layer("Conv", a, {t(DataType::kHALF, {64, 96, 56, 56}), t(DataType::kHALF, {96, 1, 7, 7}), t(DataType::kHALF, {96})},
                      {t(DataType::kHALF, {64, 96, 56, 56})});
  const OpCost cost = opCost(l);
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 64 * 96 * 56 * 56 * 49);
  EXPECT_DOUBLE_EQ(cost.bytes, 2.0 * (2 * 64 * 96 * 56 * 56 + 96 * 49 + 96));
  EXPECT_FALSE(cost.matrix);
}

TEST(OpCost, BatchedMatMulAndTransposedGemm) {
  Attributes none;
  LayerDesc mm = layer("MatMul", none, {t(DataType::kFLOAT, {3, 4, 5}), t(DataType::kFLOAT, {5, 6})},
                       {t(DataType::kFLOAT, {3, 4, 6})});
  EXPECT_DOUBLE_EQ(opCost(mm).flops, 2.0 * 3 * 4 * 6 * 5);
  Attributes ta;
  ta.set("transA", int64_t{1});
  LayerDesc gemm = layer("Gemm", ta, {t(DataType::kFLOAT, {7, 2}), t(DataType::kFLOAT, {7, 9})},
                         {t(DataType::kFLOAT, {2, 9})});
  EXPECT_DOUBLE_EQ(opCost(gemm).flops, 2.0 * 2 * 9 * 7);
}

TEST(OpCost, CausalAttentionCountsHalfTheScores) {
  Attributes a;
  const int64_t b = 2, h = 4, s = 16, d = 8;
  auto make = [&](const Attributes& at) {
    return layer("Attention", at, {t(DataType::kHALF, {b, h, s, d}), t(DataType::kHALF, {b, h, s, d}), t(DataType::kHALF, {b, h, s, d})},
                 {t(DataType::kHALF, {b, h, s, d})});
  };
  const double full = opCost(make(a)).flops;
  EXPECT_DOUBLE_EQ(full, 2.0 * b * h * s * s * (d + d));  // QK^T and PV
  Attributes causal;
  causal.set("is_causal", int64_t{1});
  EXPECT_DOUBLE_EQ(opCost(make(causal)).flops, full / 2);
}

TEST(OpCost, GatherReadsOnlyTheRowsItOutputs) {
  Attributes none;
  LayerDesc g = layer("Gather", none, {t(DataType::kHALF, {50000, 64}), t(DataType::kINT64, {3})},
                      {t(DataType::kHALF, {3, 64})});
  const OpCost c = opCost(g);
  EXPECT_DOUBLE_EQ(c.flops, 0);
  EXPECT_DOUBLE_EQ(c.bytes, 2.0 * 3 * 64 + 8.0 * 3 + 2.0 * 3 * 64);
  EXPECT_FALSE(c.matrix);
}

TEST(OpCost, UnknownDimsCountNothing) {
  Attributes none;
  LayerDesc mm = layer("MatMul", none, {t(DataType::kFLOAT, {-1, 5}), t(DataType::kFLOAT, {5, 6})},
                       {t(DataType::kFLOAT, {-1, 6})});
  EXPECT_DOUBLE_EQ(opCost(mm).flops, 0);
  EXPECT_DOUBLE_EQ(opCost(mm).bytes, 4.0 * 30);  // only the weight's size is known
}
