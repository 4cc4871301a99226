// Attention family (Attention, RotaryEmbedding, LpNormalization, MeanVarianceNormalization, Det):
// shape inference and errors; reference kernels vs the ONNX reference evaluator / NumPy
// (tests/unit/gen_recurrent_attention_ref.py writes attention_ref.inc).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "kiln/network.h"
#include "ops/op_registry.h"
#include "ref_case.h"

using namespace kiln;
using namespace kiln::test;

namespace {
#include "attention_ref.inc"

const RefCase& refCase(const std::string& name) {
  for (const RefCase& c : kAttentionCases)
    if (name == c.name) return c;
  throw Error("no generated case " + name);
}

LayerCase attention(const Dims& q, const Dims& k, const Dims& v, size_t nOut = 1) {
  LayerCase c("Attention", nOut);
  c.shape(DataType::kFLOAT, q).shape(DataType::kFLOAT, k).shape(DataType::kFLOAT, v);
  return c;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Reference kernels vs the ONNX reference evaluator / NumPy

TEST(AttentionRef, MatchesOnnxReference) {
  int n = 0;
  for (const RefCase& c : kAttentionCases)
    if (std::string(c.op) == "Attention") checkRefCase(c), ++n;
  EXPECT_EQ(n, 7);
}

TEST(AttentionRef, RotaryMatchesOnnxReference) {
  for (auto name : {"rotary_4d_position_ids", "rotary_3d_interleaved_partial", "rotary_no_position_ids"}) checkRefCase(refCase(name));
}

TEST(AttentionRef, NormsAndDetMatchNumpy) {
  for (auto name : {"lpnorm_p2_axis1", "lpnorm_p1_last", "mvn_default_axes", "mvn_axes_last", "det_batched"}) checkRefCase(refCase(name));
}

TEST(AttentionRef, FullyMaskedRowIsZeroNotNan) {
  LayerCase l = fromRef(refCase("fully_masked_row_mode3"));
  auto outs = l.run();
  for (int64_t e = 0; e < 4; ++e) EXPECT_EQ(outs[0].getDouble(4 + e), 0.0);  // query row 1 of Y
  for (int64_t j = 0; j < 2; ++j) EXPECT_EQ(outs[3].getDouble(2 + j), 0.0);  // its probabilities
}

TEST(AttentionRef, ThreadCountDoesNotChangeResults) {
  LayerCase a = fromRef(refCase("gqa_3d_causal_past_present"));
  LayerCase b = fromRef(refCase("gqa_3d_causal_past_present"));
  auto x = a.run(1), y = b.run(4);
  for (size_t o = 0; o < x.size(); ++o)
    for (int64_t i = 0; i < x[o].count(); ++i) EXPECT_EQ(x[o].getDouble(i), y[o].getDouble(i));
}

// ---------------------------------------------------------------------------------------------
// Shape inference

TEST(AttentionInfer, ThreeDimensionalWithPastAndAllOutputs) {
  auto c = attention({2, -1, 12}, {2, 5, 6}, {2, 5, 10}, 4);
  c.attr("q_num_heads", int64_t(4)).attr("kv_num_heads", int64_t(2));
  c.missing().shape(DataType::kFLOAT, {2, 2, 7, 3}).shape(DataType::kFLOAT, {2, 2, 7, 5});
  c.infer();
  EXPECT_EQ(c.desc.outputs[0].dims, (Dims{2, -1, 20}));
  EXPECT_EQ(c.desc.outputs[1].dims, (Dims{2, 2, 12, 3}));
  EXPECT_EQ(c.desc.outputs[2].dims, (Dims{2, 2, 12, 5}));
  EXPECT_EQ(c.desc.outputs[3].dims, (Dims{2, 4, -1, 12}));
}

TEST(AttentionInfer, FourDimensionalAndRotary) {
  auto c = attention({1, 6, 3, 8}, {1, 2, 4, 8}, {1, 2, 4, 5});
  c.infer();
  EXPECT_EQ(c.desc.outputs[0].dims, (Dims{1, 6, 3, 5}));
  LayerCase r("RotaryEmbedding");
  r.shape(DataType::kFLOAT, {2, 3, 16}).shape(DataType::kFLOAT, {10, 2}).shape(DataType::kFLOAT, {10, 2}).shape(DataType::kINT64, {2, 3});
  r.attr("num_heads", int64_t(2)).attr("rotary_embedding_dim", int64_t(4));
  r.infer();
  EXPECT_EQ(r.desc.outputs[0].dims, (Dims{2, 3, 16}));
  LayerCase d("Det");
  d.shape(DataType::kFLOAT, {4, 3, 3});
  d.infer();
  EXPECT_EQ(d.desc.outputs[0].dims, (Dims{4}));
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(AttentionErrors, BadShapes) {
  auto a = attention({2, 4, 12}, {2, 5, 6}, {2, 5, 6});
  expectInferError(a, "q_num_heads and kv_num_heads");
  auto b = attention({2, 4, 12}, {2, 5, 6}, {2, 5, 6});
  b.attr("q_num_heads", int64_t(5)).attr("kv_num_heads", int64_t(2));
  expectInferError(b, "not a multiple of 5");
  auto c = attention({1, 6, 3, 8}, {1, 4, 4, 8}, {1, 4, 4, 8});
  expectInferError(c, "must be a multiple of kv_num_heads");
  auto d = attention({1, 2, 3, 8}, {1, 2, 4, 6}, {1, 2, 4, 8});
  expectInferError(d, "head sizes differ");
  auto e = attention({1, 2, 3, 8}, {1, 2, 4, 8}, {1, 2, 4});
  expectInferError(e, "same rank");
  auto f = attention({1, 2, 3, 8}, {1, 2, 4, 8}, {1, 2, 4, 8});
  f.missing().shape(DataType::kFLOAT, {1, 2, 3, 8});
  expectInferError(f, "past_key and past_value must be given together");
  auto g = attention({1, 2, 3, 8}, {1, 2, 4, 8}, {1, 2, 4, 8});
  g.missing().shape(DataType::kFLOAT, {1, 2, 3, 8}).shape(DataType::kFLOAT, {1, 2, 3, 8}).shape(DataType::kINT64, {1});
  expectInferError(g, "nonpad_kv_seqlen cannot be combined");
  auto h = attention({1, 2, 3, 8}, {1, 2, 4, 8}, {1, 2, 4, 8});
  h.shape(DataType::kFLOAT, {3, 3, 4});  // rank 3 is (heads, q, kv): 3 heads vs 2
  expectInferError(h, "cannot be broadcast");
  auto i = attention({1, 2, 3, 8}, {1, 2, 4, 8}, {1, 2, 4, 8});
  i.shape(DataType::kBOOL, {3, 5});
  expectInferError(i, "cannot be broadcast");
  auto j = attention({int64_t(1) << 40, 2, int64_t(1) << 40, 8}, {1, 2, 4, 8}, {1, 2, 4, 8});
  EXPECT_THROW(j.infer(), Error);
}

TEST(AttentionErrors, BadAttributesAndTypes) {
  auto a = attention({1, 2, 3, 8}, {1, 2, 4, 8}, {1, 2, 4, 8});
  a.attr("qk_matmul_output_mode", int64_t(4));
  expectInferError(a, "qk_matmul_output_mode");
  auto b = attention({1, 2, 3, 8}, {1, 2, 4, 8}, {1, 2, 4, 8});
  b.attr("softmax_precision", int64_t(7));
  expectInferError(b, "softmax_precision");
  auto c = attention({1, 2, 3, 8}, {1, 2, 4, 8}, {1, 2, 4, 8});
  c.attr("left_window_size", int64_t(-2));
  expectInferError(c, "window");
  auto d = attention({1, 2, 3, 8}, {1, 2, 4, 8}, {1, 2, 4, 8});
  d.attr("scale", -1.f);
  expectInferError(d, "scale");
  LayerCase e("Attention");
  e.shape(DataType::kINT32, {1, 2, 3, 8}).shape(DataType::kINT32, {1, 2, 4, 8}).shape(DataType::kINT32, {1, 2, 4, 8});
  expectInferError(e, "floating-point");
  auto f = attention({1, 2, 3, 8}, {1, 2, 4, 8}, {1, 2, 4, 8}, 5);
  expectInferError(f, "at most 4 outputs");
}

TEST(AttentionErrors, RotaryAndNorms) {
  LayerCase a("RotaryEmbedding");
  a.shape(DataType::kFLOAT, {2, 3, 16}).shape(DataType::kFLOAT, {10, 4}).shape(DataType::kFLOAT, {10, 4}).shape(DataType::kINT64, {2, 3});
  expectInferError(a, "num_heads");
  LayerCase b("RotaryEmbedding");
  b.shape(DataType::kFLOAT, {2, 2, 3, 8}).shape(DataType::kFLOAT, {10, 3}).shape(DataType::kFLOAT, {10, 3}).shape(DataType::kINT64, {2, 3});
  b.attr("rotary_embedding_dim", int64_t(5));
  expectInferError(b, "must be even");
  LayerCase c("RotaryEmbedding");
  c.shape(DataType::kFLOAT, {2, 2, 3, 8}).shape(DataType::kFLOAT, {10, 3}).shape(DataType::kFLOAT, {10, 3}).shape(DataType::kINT64, {2, 3});
  expectInferError(c, "cos_cache has shape");
  LayerCase d("LpNormalization");
  d.shape(DataType::kFLOAT, {2, 3}).attr("p", int64_t(3));
  expectInferError(d, "p must be 1 or 2");
  LayerCase e("LpNormalization");
  e.shape(DataType::kFLOAT, {2, 3}).attr("axis", int64_t(2));
  expectInferError(e, "out of range");
  LayerCase f("MeanVarianceNormalization");
  f.shape(DataType::kFLOAT, {2, 3, 4, 5}).attr("axes", std::vector<int64_t>{1, -3});
  expectInferError(f, "twice");
  LayerCase g("MeanVarianceNormalization");
  g.shape(DataType::kFLOAT, {2, 3});  // default axes [0, 2, 3] need rank 4
  expectInferError(g, "out of range");
  LayerCase h("Det");
  h.shape(DataType::kFLOAT, {3, 3, 4});  // rank 3 is (heads, q, kv): 3 heads vs 2
  expectInferError(h, "square");
  LayerCase i("Det");
  i.shape(DataType::kINT64, {3, 3});
  expectInferError(i, "floating-point");
}

TEST(AttentionErrors, RotaryPositionOutOfCacheAtRunTime) {
  LayerCase c("RotaryEmbedding");
  HostTensor x(DataType::kFLOAT, {1, 1, 2, 4}), cs(DataType::kFLOAT, {3, 2}), sn(DataType::kFLOAT, {3, 2});
  HostTensor pos(DataType::kINT64, {1, 2});
  pos.as<int64_t>()[0] = 1;
  pos.as<int64_t>()[1] = 3;  // the cache has 3 rows
  c.input(x).input(cs).input(sn).input(pos);
  try {
    c.run();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("position id 3"), std::string::npos) << e.what();
  }
}
