// The attention fusion pass (GPU builds): the exported attention patterns become one Attention
// layer, and the fused network computes what the unfused one does (reference kernels, CPU).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "builder/passes/passes.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::randomTensor;

namespace {

HostTensor scalar(float v) {
  HostTensor t(DataType::kFLOAT, {});
  *t.as<float>() = v;
  return t;
}

HostTensor ints(std::vector<int64_t> v) {
  HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

Tensor* transpose(Network& n, Tensor* x, std::vector<int64_t> perm) {
  Attributes a;
  a.set("perm", perm);
  return n.addLayer("Transpose", {x}, 1, a)->outputs[0];
}

Tensor* softmax(Network& n, Tensor* x, int64_t axis = -1) { return n.addSoftmax(x, axis)->outputs[0]; }
Tensor* op(Network& n, const char* name, Tensor* a, Tensor* b) { return n.addElementWise(a, b, name)->outputs[0]; }

int count(const Network& n, const std::string& op) { return kiln::test::countOps(n, op); }
const Layer* attentionLayer(const Network& n) { return kiln::test::firstOp(n, "Attention"); }

void finish(Network& n, Tensor* y) {
  n.renameTensor(y, "y");
  n.markOutput(y);
}

//! Builds the network twice; fuses one copy with the pass; both must agree. Returns the fused
//! network's layers for checks through `inspect`.
void checkFused(const std::function<void(Network&)>& make, const std::map<std::string, HostTensor>& inputs, bool expectFused,
                const std::function<void(const Network&)>& inspect = nullptr) {
  Network net;
  const auto want = kiln::test::referenceAndCopy(make, inputs, net);
  const bool changed = fuseAttention(net);
  ASSERT_EQ(changed, expectFused);
  if (!expectFused) return;
  EXPECT_EQ(count(net, "Attention"), 1);
  EXPECT_EQ(count(net, "Softmax"), 0);
  int attentionMatMuls = 0;  // MatMuls of two activations (projections multiply by constant weights)
  for (auto& l : net.layers()) attentionMatMuls += l->op == "MatMul" && !l->inputs[1]->isConstant();
  EXPECT_EQ(attentionMatMuls, 0);
  if (inspect) inspect(net);
  auto got = kiln::test::evaluateReference(net, inputs);
  kiln::test::expectOutputsNear(got, want, 2e-5);
}

constexpr int64_t B = 2, H = 3, S = 9, D = 8;

HostTensor causalBool(int64_t sq, int64_t skv) {
  HostTensor c(DataType::kBOOL, {1, 1, sq, skv});
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < skv; ++j) c.as<uint8_t>()[i * skv + j] = j <= i;
  return c;
}

}  // namespace

// BERT: projections reshaped to [B, S, H, D] and transposed; K^T by a second Transpose; Div by
// sqrt(D); the (1 - mask) * -10000 additive mask; Softmax; MatMul with V.
TEST(PassAttention, BertPatternFuses) {
  auto make = [](Network& n) {
    Tensor* q = transpose(n, n.addInput("q", DataType::kFLOAT, {B, S, H, D}), {0, 2, 1, 3});
    Tensor* k = transpose(n, n.addInput("k", DataType::kFLOAT, {B, S, H, D}), {0, 2, 1, 3});
    Tensor* v = transpose(n, n.addInput("v", DataType::kFLOAT, {B, S, H, D}), {0, 2, 1, 3});
    Tensor* s = n.addMatMul(q, transpose(n, k, {0, 1, 3, 2}))->outputs[0];
    s = op(n, "Div", s, n.addConstant("", scalar(std::sqrt(static_cast<float>(D)))));
    Tensor* m = n.addInput("m", DataType::kFLOAT, {B, 1, 1, S});
    Tensor* add = op(n, "Mul", op(n, "Sub", n.addConstant("", scalar(1.f)), m), n.addConstant("", scalar(-10000.f)));
    s = op(n, "Add", s, add);
    Tensor* y = n.addMatMul(softmax(n, s), v)->outputs[0];
    finish(n, transpose(n, y, {0, 2, 1, 3}));
  };
  HostTensor mask(DataType::kFLOAT, {B, 1, 1, S});
  for (int64_t i = 0; i < mask.count(); ++i) mask.as<float>()[i] = (i % S) < (i / S == 0 ? S : 5) ? 1.f : 0.f;
  checkFused(make,
             {{"q", randomTensor({B, S, H, D}, 1)}, {"k", randomTensor({B, S, H, D}, 2)}, {"v", randomTensor({B, S, H, D}, 3)}, {"m", mask}},
             true, [](const Network& n) {
               const Layer* a = attentionLayer(n);
               ASSERT_NE(a, nullptr);
               EXPECT_EQ(a->inputs.size(), 4u);
               EXPECT_EQ(a->attrs.getInt("is_causal", 0), 0);
               EXPECT_NEAR(a->attrs.getFloat("scale", 0), 1 / std::sqrt(static_cast<float>(D)), 1e-7);
               EXPECT_EQ(count(n, "Transpose"), 0);  // Q, K, V read in place and the output written in place
               EXPECT_TRUE(a->attrs.has("kiln_view_dims"));
               for (int i = 0; i < 3; ++i) EXPECT_TRUE(a->inputs[i]->isInput) << i;
             });
}

// GPT-2: Div by a constant, Where(constant causal bool, S, finfo.min), Add(attention mask).
TEST(PassAttention, Gpt2CausalWhereFuses) {
  auto make = [](Network& n) {
    Tensor* q = n.addInput("q", DataType::kFLOAT, {B, H, S, D});
    Tensor* k = n.addInput("k", DataType::kFLOAT, {B, H, S, D});
    Tensor* v = n.addInput("v", DataType::kFLOAT, {B, H, S, D});
    Tensor* s = n.addMatMul(q, transpose(n, k, {0, 1, 3, 2}))->outputs[0];
    s = op(n, "Div", s, n.addConstant("", scalar(std::sqrt(static_cast<float>(D)))));
    Tensor* cond = n.addConstant("bias", causalBool(S, S));
    s = n.addLayer("Where", {cond, s, n.addConstant("", scalar(std::numeric_limits<float>::lowest()))}, 1)->outputs[0];
    s = op(n, "Add", s, n.addInput("am", DataType::kFLOAT, {B, 1, 1, S}));
    finish(n, n.addMatMul(softmax(n, s), v)->outputs[0]);
  };
  HostTensor am(DataType::kFLOAT, {B, 1, 1, S});
  for (int64_t i = 0; i < am.count(); ++i) am.as<float>()[i] = (i % S == 2) ? -10000.f : 0.f;
  checkFused(make,
             {{"q", randomTensor({B, H, S, D}, 4)}, {"k", randomTensor({B, H, S, D}, 5)}, {"v", randomTensor({B, H, S, D}, 6)}, {"am", am}},
             true, [](const Network& n) {
               const Layer* a = attentionLayer(n);
               ASSERT_NE(a, nullptr);
               EXPECT_EQ(a->attrs.getInt("is_causal", 0), 1);
               ASSERT_EQ(a->inputs.size(), 4u);
               EXPECT_TRUE(a->inputs[3]->isInput);  // the causal Where left only the attention mask
               EXPECT_EQ(count(n, "Where"), 0);
             });
}

// torch SDPA decomposition: sqrt(scale) on Q and on K^T, K^T straight from [B, S, H, D] by one
// Transpose (0, 2, 3, 1), a constant additive causal mask; no other mask.
TEST(PassAttention, ScaledQAndKeyTransposeAndAdditiveCausalFuse) {
  auto make = [](Network& n) {
    const float r = std::sqrt(0.3f);
    Tensor* q = op(n, "Mul", n.addInput("q", DataType::kFLOAT, {B, H, S, D}), n.addConstant("", scalar(r)));
    Tensor* kt = transpose(n, n.addInput("k", DataType::kFLOAT, {B, S, H, D}), {0, 2, 3, 1});
    kt = op(n, "Mul", kt, n.addConstant("", scalar(r)));
    Tensor* s = n.addMatMul(q, kt)->outputs[0];
    HostTensor causal(DataType::kFLOAT, {S, S});
    for (int64_t i = 0; i < S; ++i)
      for (int64_t j = 0; j < S; ++j) causal.as<float>()[i * S + j] = j <= i ? 0.f : -std::numeric_limits<float>::infinity();
    s = op(n, "Add", s, n.addConstant("causal", causal));
    finish(n, n.addMatMul(softmax(n, s, 3), n.addInput("v", DataType::kFLOAT, {B, H, S, D}))->outputs[0]);
  };
  checkFused(make, {{"q", randomTensor({B, H, S, D}, 7)}, {"k", randomTensor({B, S, H, D}, 8)}, {"v", randomTensor({B, H, S, D}, 9)}},
             true, [](const Network& n) {
               const Layer* a = attentionLayer(n);
               ASSERT_NE(a, nullptr);
               EXPECT_EQ(a->inputs.size(), 3u);
               EXPECT_EQ(a->attrs.getInt("is_causal", 0), 1);
               EXPECT_NEAR(a->attrs.getFloat("scale", 0), 0.3f, 1e-6);
               EXPECT_EQ(count(n, "Mul"), 0);
               EXPECT_EQ(count(n, "Transpose"), 1);  // K from [B, S, H, D] by perm (0, 2, 1, 3)
             });
}

// Gemma-2's logit soft cap: scores * scaling, / cap, tanh, * cap, then the causal mask: the
// Attention op's softcap (applied before the mask) with the scale inside the tanh. Small caps
// (2.5) so that the tanh bends the scores. Caps that differ, or a mask added inside the tanh,
// leave the chain unfused.
TEST(PassAttention, GemmaLogitSoftCapFuses) {
  auto make = [](float inner, float outer, bool maskInside) {
    return [=](Network& n) {
      Tensor* s = n.addMatMul(n.addInput("q", DataType::kFLOAT, {B, H, S, D}),
                              transpose(n, n.addInput("k", DataType::kFLOAT, {B, H, S, D}), {0, 1, 3, 2}))->outputs[0];
      s = op(n, "Mul", s, n.addConstant("", scalar(0.7f)));
      HostTensor causal(DataType::kFLOAT, {S, S});
      for (int64_t i = 0; i < S; ++i)
        for (int64_t j = 0; j < S; ++j) causal.as<float>()[i * S + j] = j <= i ? 0.f : -std::numeric_limits<float>::infinity();
      if (maskInside) s = op(n, "Add", s, n.addConstant("causal", causal));
      s = op(n, "Div", s, n.addConstant("", scalar(inner)));
      s = n.addActivation(s, "Tanh")->outputs[0];
      s = op(n, "Mul", s, n.addConstant("", scalar(outer)));
      if (!maskInside) s = op(n, "Add", s, n.addConstant("causal", causal));
      finish(n, n.addMatMul(softmax(n, s), n.addInput("v", DataType::kFLOAT, {B, H, S, D}))->outputs[0]);
    };
  };
  const std::map<std::string, HostTensor> in{
      {"q", randomTensor({B, H, S, D}, 17, -2, 2)}, {"k", randomTensor({B, H, S, D}, 18, -2, 2)}, {"v", randomTensor({B, H, S, D}, 19)}};
  checkFused(make(2.5f, 2.5f, false), in, true, [](const Network& n) {
    const Layer* a = attentionLayer(n);
    ASSERT_NE(a, nullptr);
    EXPECT_NEAR(a->attrs.getFloat("softcap", 0), 2.5f, 1e-6);
    EXPECT_NEAR(a->attrs.getFloat("scale", 0), 0.7f, 1e-6);
    EXPECT_EQ(a->attrs.getInt("is_causal", 0), 1);
    EXPECT_EQ(count(n, "Tanh"), 0);
  });
  checkFused(make(2.5f, 3.f, false), in, false);
  checkFused(make(2.5f, 2.5f, true), in, false);
}

// transformers 5.17's GPT-2 at batch > 1: the causal mask expanded to the batch, [B, 1, S, S],
// constant after folding. It is still exactly causal: is_causal, no mask input (which is what
// lets cuDNN's SDPA take the layer). If one batch's slice differs, the mask stays an input (beside
// is_causal: every element above the diagonal masks, and each row keeps a key below it).
TEST(PassAttention, BatchExpandedCausalMaskFuses) {
  for (bool exact : {true, false}) {
    auto make = [exact](Network& n) {
      Tensor* q = n.addInput("q", DataType::kFLOAT, {B, H, S, D});
      Tensor* kt = transpose(n, n.addInput("k", DataType::kFLOAT, {B, H, S, D}), {0, 1, 3, 2});
      Tensor* s = op(n, "Mul", n.addMatMul(q, kt)->outputs[0], n.addConstant("", scalar(0.25f)));
      HostTensor causal(DataType::kFLOAT, {B, 1, S, S});
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < S; ++i)
          for (int64_t j = 0; j < S; ++j)
            causal.as<float>()[(b * S + i) * S + j] = j <= i ? 0.f : -std::numeric_limits<float>::infinity();
      if (!exact) causal.as<float>()[S * S + S] = -std::numeric_limits<float>::infinity();  // batch 1: row 1 loses key 0
      s = op(n, "Add", s, n.addConstant("causal", causal));
      finish(n, n.addMatMul(softmax(n, s, 3), n.addInput("v", DataType::kFLOAT, {B, H, S, D}))->outputs[0]);
    };
    checkFused(make, {{"q", randomTensor({B, H, S, D}, 17)}, {"k", randomTensor({B, H, S, D}, 18)}, {"v", randomTensor({B, H, S, D}, 19)}},
               true, [exact](const Network& n) {
                 const Layer* a = attentionLayer(n);
                 ASSERT_NE(a, nullptr);
                 EXPECT_EQ(a->attrs.getInt("is_causal", 0), 1);
                 EXPECT_EQ(a->inputs.size() > 3 && a->inputs[3] != nullptr, !exact);
               });
  }
}

// PyTorch's dynamo export of BERT's scaled_dot_product_attention: 3-D projections split into
// heads (Reshape + Transpose), sqrt(scale) on Q and on K^T (K^T by Transpose 0,2,3,1), an additive
// mask, Softmax, the NaN guard Where(IsNaN(P), 0, P), and the heads merged back. The fused layer
// takes and returns the 3-D tensors: no Transpose, Reshape, IsNaN or Where is left. A -inf mask
// hides every key from batch 1, so the guard's zeros are checked too.
TEST(PassAttention, TorchSdpaExportFusesThreeDimensional) {
  auto make = [](Network& n) {
    auto split = [&](const char* name) {
      Tensor* x = n.addInput(name, DataType::kFLOAT, {B, S, H * D});
      return n.addLayer("Reshape", {x, n.addConstant("", ints({B, S, H, D}))}, 1)->outputs[0];
    };
    const float r = std::sqrt(1 / std::sqrt(static_cast<float>(D)));
    Tensor* q = op(n, "Mul", transpose(n, split("q"), {0, 2, 1, 3}), n.addConstant("", scalar(r)));
    Tensor* kt = op(n, "Mul", transpose(n, split("k"), {0, 2, 3, 1}), n.addConstant("", scalar(r)));
    Tensor* v = transpose(n, split("v"), {0, 2, 1, 3});
    Tensor* s = op(n, "Add", n.addMatMul(q, kt)->outputs[0], n.addInput("m", DataType::kFLOAT, {B, 1, 1, S}));
    Tensor* p = softmax(n, s);
    Tensor* nan = n.addLayer("IsNaN", {p}, 1)->outputs[0];
    p = n.addLayer("Where", {nan, n.addConstant("", scalar(0.f)), p}, 1)->outputs[0];
    Tensor* y = transpose(n, n.addMatMul(p, v)->outputs[0], {0, 2, 1, 3});
    finish(n, n.addLayer("Reshape", {y, n.addConstant("", ints({B, S, H * D}))}, 1)->outputs[0]);
  };
  HostTensor mask(DataType::kFLOAT, {B, 1, 1, S});
  for (int64_t i = 0; i < mask.count(); ++i)
    mask.as<float>()[i] = i / S == 1 ? -std::numeric_limits<float>::infinity() : (i % S == 3 ? -1e4f : 0.f);
  checkFused(make,
             {{"q", randomTensor({B, S, H * D}, 21)}, {"k", randomTensor({B, S, H * D}, 22)}, {"v", randomTensor({B, S, H * D}, 23)},
              {"m", mask}},
             true, [](const Network& n) {
               const Layer* a = attentionLayer(n);
               ASSERT_NE(a, nullptr);
               ASSERT_EQ(a->inputs.size(), 4u);
               for (int i = 0; i < 3; ++i) EXPECT_TRUE(a->inputs[i]->isInput) << i;  // the 3-D projections themselves
               EXPECT_EQ(a->attrs.getInt("q_num_heads", 0), H);
               EXPECT_EQ(a->attrs.getInt("kv_num_heads", 0), H);
               EXPECT_NEAR(a->attrs.getFloat("scale", 0), 1 / std::sqrt(static_cast<float>(D)), 1e-6);
               for (const char* gone : {"Transpose", "Reshape", "IsNaN", "Where", "Mul"}) EXPECT_EQ(count(n, gone), 0) << gone;
             });
}

namespace {

HostTensor scalarInt(int64_t v) {
  HostTensor t(DataType::kINT64, {});
  *t.as<int64_t>() = v;
  return t;
}

Tensor* reshape(Network& n, Tensor* x, std::vector<int64_t> shape) {
  return n.addLayer("Reshape", {x, n.addConstant("", ints(std::move(shape)))}, 1)->outputs[0];
}

//! softmax(Q K^T * scale) V with sqrt(scale) on Q and on K^T (the SDPA export's form).
Tensor* sdpa(Network& n, Tensor* q, Tensor* kt, Tensor* v) {
  const float r = std::sqrt(1 / std::sqrt(static_cast<float>(D)));
  q = op(n, "Mul", q, n.addConstant("", scalar(r)));
  kt = op(n, "Mul", kt, n.addConstant("", scalar(r)));
  return n.addMatMul(softmax(n, n.addMatMul(q, kt)->outputs[0]), v)->outputs[0];
}

}  // namespace

// torchvision ViT (nn.MultiheadAttention, sequence first): the input transposed to [S, B, E], one
// packed projection [S, B, 3E] unbound by Reshape/Unsqueeze/Transpose/Squeeze/Gather, heads split
// by Reshape/Transpose, and merged back to [S*B, E]. The projection moves before the Transpose, Q,
// K and V become strided views of its output and the merge becomes the attention's write: no
// Gather or Transpose is left, and the fused layer computes what the unfused graph does.
TEST(PassAttention, PackedSequenceFirstQkvIsReadInPlace) {
  constexpr int64_t E = H * D;
  auto make = [](Network& n) {
    // The in-projection of the batch-first input, made sequence first by a Transpose (it moves
    // below the projection and into the views).
    Tensor* x = transpose(n, n.addInput("x", DataType::kFLOAT, {B, S, E}), {1, 0, 2});
    Tensor* p = n.addMatMul(x, n.addConstant("w_in", randomTensor({E, 3 * E}, 33, -0.3f, 0.3f)))->outputs[0];
    p = op(n, "Add", n.addConstant("b_in", randomTensor({3 * E}, 34)), p);
    Tensor* u = reshape(n, p, {S, B, 3, E});
    u = n.addLayer("Unsqueeze", {u, n.addConstant("", ints({0}))}, 1)->outputs[0];
    u = transpose(n, u, {3, 1, 2, 0, 4});
    u = n.addLayer("Squeeze", {u, n.addConstant("", ints({3}))}, 1)->outputs[0];  // [3, S, B, E]
    Tensor* qkv[3];
    for (int i = 0; i < 3; ++i) {
      Attributes g;
      g.set("axis", int64_t(0));
      Tensor* x = n.addLayer("Gather", {u, n.addConstant("", scalarInt(i))}, 1, g)->outputs[0];  // [S, B, E]
      x = transpose(n, reshape(n, x, {S, B * H, D}), {1, 0, 2});
      qkv[i] = reshape(n, x, {B, H, S, D});
    }
    Tensor* y = sdpa(n, qkv[0], transpose(n, qkv[1], {0, 1, 3, 2}), qkv[2]);
    finish(n, reshape(n, transpose(n, y, {2, 0, 1, 3}), {S * B, E}));
  };
  checkFused(make, {{"x", randomTensor({B, S, E}, 31)}}, true, [](const Network& n) {
    const Layer* a = attentionLayer(n);
    ASSERT_NE(a, nullptr);
    EXPECT_TRUE(a->attrs.has("kiln_view_dims"));
    for (int i = 0; i < 3; ++i) EXPECT_EQ(a->inputs[i]->producer->op, "Add") << i;  // the projection's output, in place
    const Layer* mm = a->inputs[0]->producer->inputs[0]->producer;  // Add(MatMul(x, W), b)
    ASSERT_NE(mm, nullptr);
    EXPECT_EQ(mm->op, "MatMul");
    EXPECT_TRUE(mm->inputs[0]->isInput);  // the projection reads x itself: its Transpose is gone
    EXPECT_EQ(count(n, "Gather"), 0);
    EXPECT_EQ(count(n, "Transpose"), 0);  // the sequence-first merge is the attention's write
    EXPECT_TRUE(a->attrs.has("kiln_o_view"));
  });
}

// GPT-2: the packed projection [B, S, 3E] Split in three, heads split, K through a one-input
// Concat (the empty KV cache), output merged back through an identity Reshape: views of the
// packed tensor, merged 3-D output, no Split, Concat or Transpose left.
TEST(PassAttention, SplitPackedQkvIsReadInPlace) {
  constexpr int64_t E = H * D;
  auto make = [](Network& n) {
    Tensor* p = n.addInput("p", DataType::kFLOAT, {B, S, 3 * E});
    Attributes sa;
    sa.set("axis", int64_t(2));
    Layer* split = n.addLayer("Split", {p, n.addConstant("", ints({E, E, E}))}, 3, sa);
    Tensor* heads[3];
    for (int i = 0; i < 3; ++i) heads[i] = transpose(n, reshape(n, split->outputs[i], {B, S, H, D}), {0, 2, 1, 3});
    Attributes ca;
    ca.set("axis", int64_t(-2));
    Tensor* k = n.addLayer("Concat", {heads[1]}, 1, ca)->outputs[0];
    Tensor* y = sdpa(n, heads[0], transpose(n, k, {0, 1, 3, 2}), heads[2]);
    y = reshape(n, y, {B, H, S, D});
    finish(n, reshape(n, transpose(n, y, {0, 2, 1, 3}), {B, S, E}));
  };
  checkFused(make, {{"p", randomTensor({B, S, 3 * E}, 32)}}, true, [](const Network& n) {
    const Layer* a = attentionLayer(n);
    ASSERT_NE(a, nullptr);
    EXPECT_TRUE(a->attrs.has("kiln_o_view"));  // heads merged back by the write
    for (const char* gone : {"Split", "Concat", "Transpose", "Reshape"}) EXPECT_EQ(count(n, gone), 0) << gone;
  });
}

// Cross attention (Sq != Skv), Mul by the scale, a constant non-causal bool Where (inverted
// operands) becomes a constant additive mask.
TEST(PassAttention, CrossAttentionWithConstantWhereMaskFuses) {
  constexpr int64_t Sq = 5, Skv = 11;
  auto make = [](Network& n) {
    Tensor* q = n.addInput("q", DataType::kFLOAT, {B, H, Sq, D});
    Tensor* kt = n.addInput("kt", DataType::kFLOAT, {B, H, D, Skv});
    Tensor* s = op(n, "Mul", n.addMatMul(q, kt)->outputs[0], n.addConstant("", scalar(0.25f)));
    HostTensor cond(DataType::kBOOL, {Sq, Skv});  // true = masked (Where(cond, fill, S))
    for (int64_t i = 0; i < cond.count(); ++i) cond.as<uint8_t>()[i] = (i * 7) % 3 == 0;
    s = n.addLayer("Where", {n.addConstant("c", cond), n.addConstant("", scalar(-1e9f)), s}, 1)->outputs[0];
    finish(n, n.addMatMul(softmax(n, s), n.addInput("v", DataType::kFLOAT, {B, H, Skv, 6}))->outputs[0]);
  };
  checkFused(make,
             {{"q", randomTensor({B, H, Sq, D}, 10)}, {"kt", randomTensor({B, H, D, Skv}, 11)}, {"v", randomTensor({B, H, Skv, 6}, 12)}},
             true, [](const Network& n) {
               const Layer* a = attentionLayer(n);
               ASSERT_NE(a, nullptr);
               ASSERT_EQ(a->inputs.size(), 4u);
               EXPECT_TRUE(a->inputs[3]->isConstant());
               EXPECT_EQ(a->attrs.getInt("is_causal", 0), 0);
               EXPECT_EQ(count(n, "Transpose"), 1);  // K from the given K^T
             });
}

// Constant masks that mask nothing (PyTorch's dynamo export of BERT without an attention_mask:
// Where(all true, 0, -FLT_MAX) folds to an all-zero [B, 1, S, S] additive mask) are dropped, so
// the fused layer has no mask input and cuDNN's SDPA can take it. A mask with one nonzero stays.
TEST(PassAttention, ConstantMasksThatMaskNothingAreDropped) {
  for (int form = 0; form < 3; ++form) {  // 0: additive zeros, 1: Where keeping everything, 2: one -1e4
    auto make = [form](Network& n) {
      Tensor* q = n.addInput("q", DataType::kFLOAT, {B, H, S, D});
      Tensor* kt = transpose(n, n.addInput("k", DataType::kFLOAT, {B, H, S, D}), {0, 1, 3, 2});
      Tensor* s = op(n, "Mul", n.addMatMul(q, kt)->outputs[0], n.addConstant("", scalar(0.25f)));
      if (form == 1) {
        HostTensor keepAll(DataType::kBOOL, {B, 1, S, S});
        for (int64_t i = 0; i < keepAll.count(); ++i) keepAll.as<uint8_t>()[i] = 1;
        s = n.addLayer("Where", {n.addConstant("c", keepAll), s, n.addConstant("", scalar(-1e9f))}, 1)->outputs[0];
      } else {
        HostTensor zeros(DataType::kFLOAT, {B, 1, S, S});
        for (int64_t i = 0; i < zeros.count(); ++i) zeros.as<float>()[i] = 0.f;
        if (form == 2) zeros.as<float>()[S + 2] = -1e4f;
        s = op(n, "Add", s, n.addConstant("mask", zeros));
      }
      finish(n, n.addMatMul(softmax(n, s, 3), n.addInput("v", DataType::kFLOAT, {B, H, S, D}))->outputs[0]);
    };
    checkFused(make, {{"q", randomTensor({B, H, S, D}, 27)}, {"k", randomTensor({B, H, S, D}, 28)}, {"v", randomTensor({B, H, S, D}, 29)}},
               true, [form](const Network& n) {
                 const Layer* a = attentionLayer(n);
                 ASSERT_NE(a, nullptr);
                 EXPECT_EQ(a->inputs.size() > 3 && a->inputs[3] != nullptr, form == 2) << "form " << form;
                 EXPECT_EQ(a->attrs.getInt("is_causal", 0), 0);
               });
  }
}

// transformers' causal mask at a batch whose expanded mask is above the builder's fold limit
// (GPT-2 at batch 32: [32, 1, 512, 512] > 2^22 elements): Where(Expand(constant lower triangle),
// 0, finfo.min) stays a runtime layer. Its source is constant up to broadcasting, so the layer is
// still is_causal with no mask input; a sliding window becomes is_causal and the smaller constant
// [1, 1, S, S] (the band below the diagonal), and the Expand/Where layers are gone either way.
TEST(PassAttention, ExpandedMaskAboveFoldLimitIsReadAsItsSource) {
  static constexpr int64_t Sm = 64, Bm = (int64_t(1) << 22) / (Sm * Sm) + 1, Hm = 1, Dm = 8;  // [Bm, 1, Sm, Sm] is not folded
  for (bool causal : {true, false}) {
    auto make = [causal](Network& n) {
      Tensor* q = n.addInput("q", DataType::kFLOAT, {Bm, Hm, Sm, Dm});
      Tensor* kt = transpose(n, n.addInput("k", DataType::kFLOAT, {Bm, Hm, Sm, Dm}), {0, 1, 3, 2});
      Tensor* s = op(n, "Mul", n.addMatMul(q, kt)->outputs[0], n.addConstant("", scalar(0.35f)));
      HostTensor keep(DataType::kBOOL, {1, 1, Sm, Sm});
      for (int64_t i = 0; i < Sm; ++i)
        for (int64_t j = 0; j < Sm; ++j) keep.as<uint8_t>()[i * Sm + j] = j <= i && (causal || i - j < 5);
      Tensor* cond = n.addLayer("Expand", {n.addConstant("tril", keep), n.addConstant("", ints({Bm, 1, Sm, Sm}))}, 1)->outputs[0];
      Tensor* mask = n.addLayer("Where", {cond, n.addConstant("", scalar(0.f)), n.addConstant("", scalar(std::numeric_limits<float>::lowest()))}, 1)
                         ->outputs[0];
      s = op(n, "Add", s, mask);
      finish(n, n.addMatMul(softmax(n, s), n.addInput("v", DataType::kFLOAT, {Bm, Hm, Sm, Dm}))->outputs[0]);
    };
    checkFused(make,
               {{"q", randomTensor({Bm, Hm, Sm, Dm}, 41)}, {"k", randomTensor({Bm, Hm, Sm, Dm}, 42)}, {"v", randomTensor({Bm, Hm, Sm, Dm}, 43)}},
               true, [causal](const Network& n) {
                 const Layer* a = attentionLayer(n);
                 ASSERT_NE(a, nullptr);
                 EXPECT_EQ(a->attrs.getInt("is_causal", 0), 1);
                 if (causal) {
                   EXPECT_EQ(a->inputs.size(), 3u);
                 } else {
                   ASSERT_EQ(a->inputs.size(), 4u);
                   EXPECT_TRUE(a->inputs[3]->isConstant());
                   EXPECT_EQ(a->inputs[3]->dims, (Dims{1, 1, Sm, Sm}));
                 }
                 EXPECT_EQ(count(n, "Expand"), 0);
                 EXPECT_EQ(count(n, "Where"), 0);
               });
  }
}

// LLaMA-style GQA: K and V with 1 head repeated to H by repeat_kv, a causal constant mask. The
// Attention layer reads the 1-head K/V (no Expand copies), 4-D and 3-D (heads merged back) forms.
TEST(PassAttention, RepeatedKvBecomesGroupedQueryAttention) {
  static constexpr int64_t Hkv = 1;
  for (bool threeD : {false, true}) {
    auto make = [threeD](Network& n) {
      auto heads = [&](const char* name, int64_t h) {
        if (!threeD) return n.addInput(name, DataType::kFLOAT, {B, h, S, D});
        Tensor* x = n.addInput(name, DataType::kFLOAT, {B, S, h * D});
        return transpose(n, reshape(n, x, {B, S, h, D}), {0, 2, 1, 3});
      };
      Tensor* q = heads("q", H);
      Tensor* k = heads("k", Hkv);
      Tensor* v = heads("v", Hkv);
      auto rep = [&](Tensor* x) {
        Tensor* u = n.addLayer("Unsqueeze", {x, n.addConstant("", ints({2}))}, 1)->outputs[0];
        Tensor* e = n.addLayer("Expand", {u, n.addConstant("", ints({B, Hkv, H / Hkv, S, D}))}, 1)->outputs[0];
        return reshape(n, e, {B, H, S, D});
      };
      Tensor* s = op(n, "Mul", n.addMatMul(q, transpose(n, rep(k), {0, 1, 3, 2}))->outputs[0], n.addConstant("", scalar(0.3f)));
      HostTensor causal(DataType::kFLOAT, {1, 1, S, S});
      for (int64_t i = 0; i < S; ++i)
        for (int64_t j = 0; j < S; ++j) causal.as<float>()[i * S + j] = j <= i ? 0.f : std::numeric_limits<float>::lowest();
      s = op(n, "Add", s, n.addConstant("causal", causal));
      Tensor* y = n.addMatMul(softmax(n, s), rep(v))->outputs[0];
      finish(n, threeD ? reshape(n, transpose(n, y, {0, 2, 1, 3}), {B, S, H * D}) : y);
    };
    const Dims qd = threeD ? Dims{B, S, H * D} : Dims{B, H, S, D}, kd = threeD ? Dims{B, S, Hkv * D} : Dims{B, Hkv, S, D};
    checkFused(make, {{"q", randomTensor(qd, 51)}, {"k", randomTensor(kd, 52)}, {"v", randomTensor(kd, 53)}}, true,
               [threeD](const Network& n) {
                 const Layer* a = attentionLayer(n);
                 ASSERT_NE(a, nullptr);
                 ASSERT_EQ(a->inputs.size(), 3u);
                 EXPECT_EQ(a->attrs.getInt("is_causal", 0), 1);
                 for (int i = 0; i < 3; ++i) EXPECT_TRUE(a->inputs[i]->isInput) << i;
                 if (threeD) {
                   EXPECT_EQ(a->attrs.getInt("q_num_heads", 0), H);
                   EXPECT_EQ(a->attrs.getInt("kv_num_heads", 0), Hkv);
                 }
                 EXPECT_EQ(count(n, "Expand"), 0);
               });
  }
}

// Patterns that must stay as they are.
TEST(PassAttention, NonMatchingPatternsStay) {
  auto base = [](Network& n, int64_t axis, bool scaleAfterMask, bool probsOut) {
    Tensor* q = n.addInput("q", DataType::kFLOAT, {B, H, S, D});
    Tensor* k = n.addInput("k", DataType::kFLOAT, {B, H, S, D});
    Tensor* s = n.addMatMul(q, transpose(n, k, {0, 1, 3, 2}))->outputs[0];
    Tensor* m = n.addInput("m", DataType::kFLOAT, {B, 1, 1, S});
    if (scaleAfterMask) s = op(n, "Div", op(n, "Add", s, m), n.addConstant("", scalar(2.f)));
    else s = op(n, "Add", op(n, "Div", s, n.addConstant("", scalar(2.f))), m);
    Tensor* p = softmax(n, s, axis);
    if (probsOut) {
      n.renameTensor(p, "probs");
      n.markOutput(p);
    }
    finish(n, n.addMatMul(p, n.addInput("v", DataType::kFLOAT, {B, H, S, D}))->outputs[0]);
  };
  std::map<std::string, HostTensor> in{{"q", randomTensor({B, H, S, D}, 1)}, {"k", randomTensor({B, H, S, D}, 2)},
                                       {"v", randomTensor({B, H, S, D}, 3)}, {"m", randomTensor({B, 1, 1, S}, 4)}};
  checkFused([&](Network& n) { base(n, 2, false, false); }, in, false);  // softmax over queries
  checkFused([&](Network& n) { base(n, -1, true, false); }, in, false);  // the mask is scaled too
  checkFused([&](Network& n) { base(n, -1, false, true); }, in, false);  // probabilities are an output
  checkFused([&](Network& n) { base(n, -1, false, false); }, in, true);  // the control: fuses
}

// The builder runs the pass on the GPU only: a CPU build keeps the original layers.
TEST(PassAttention, CpuBuildKeepsLayers) {
  Network n;
  Tensor* q = n.addInput("q", DataType::kFLOAT, {1, 2, 4, 8});
  Tensor* k = n.addInput("k", DataType::kFLOAT, {1, 2, 4, 8});
  Tensor* s = n.addMatMul(q, transpose(n, k, {0, 1, 3, 2}))->outputs[0];
  finish(n, n.addMatMul(softmax(n, s), n.addInput("v", DataType::kFLOAT, {1, 2, 4, 8}))->outputs[0]);
  BuilderConfig cfg;
  cfg.setThreads(1);
  auto engine = Builder().build(n, cfg);
  std::string info = engine->getLayerInformation();
  EXPECT_EQ(info.find("\"op\":\"Attention\""), std::string::npos) << info;
  EXPECT_NE(info.find("\"op\":\"Softmax\""), std::string::npos) << info;
}

// On the GPU the pass fuses only where a fused kernel runs the result: head size 64 becomes one
// Attention layer; head size 256 (beyond the flash kernels; only the plain attention_general
// could run it, slower than the unfused matmuls) keeps its MatMul/Softmax layers.
TEST(PassAttention, GpuBuildFusesOnlyForFusedKernels) {
  if (!gpuAvailable()) GTEST_SKIP() << "no GPU on this machine: CUDA test skipped";
  for (int64_t d : {64, 256}) {
    Network n;
    Tensor* q = n.addInput("q", DataType::kFLOAT, {1, 2, 16, d});
    Tensor* k = n.addInput("k", DataType::kFLOAT, {1, 2, 16, d});
    Tensor* s = n.addMatMul(q, transpose(n, k, {0, 1, 3, 2}))->outputs[0];
    finish(n, n.addMatMul(softmax(n, s), n.addInput("v", DataType::kFLOAT, {1, 2, 16, d}))->outputs[0]);
    BuilderConfig cfg;
    cfg.setDevice(DeviceType::kGPU);
    auto engine = Builder().build(n, cfg);
    const std::string info = engine->getLayerInformation();
    EXPECT_EQ(info.find("\"op\":\"Attention\"") != std::string::npos, d == 64) << "head size " << d << ": " << info;
  }
}

namespace {

//! Swin's shifted-window attention: scores [B * P, H, S, S] + a relative-position bias, viewed as
//! [B, P, H, S, S] to add a per-window mask, viewed back, softmax, times V. `perImageMask`: the
//! mask varies over the images too ([B, P, 1, S, S]); `runtimeMask`: it is a network input.
void windowAttention(Network& n, int64_t b, int64_t p, bool perImageMask, bool runtimeMask) {
  Tensor* q = n.addInput("q", DataType::kFLOAT, {b * p, H, S, D});
  Tensor* k = n.addInput("k", DataType::kFLOAT, {b * p, H, S, D});
  Tensor* v = n.addInput("v", DataType::kFLOAT, {b * p, H, S, D});
  q = op(n, "Mul", q, n.addConstant("", scalar(0.35f)));
  Tensor* s = n.addMatMul(q, transpose(n, k, {0, 1, 3, 2}))->outputs[0];
  s = op(n, "Add", s, n.addConstant("relbias", randomTensor({1, H, S, S}, 7)));
  s = reshape(n, s, {b, p, H, S, S});
  const Dims md{perImageMask ? b : 1, p, 1, S, S};
  HostTensor mv(DataType::kFLOAT, md);
  for (int64_t i = 0; i < mv.count(); ++i) mv.as<float>()[i] = (i * 7919 % 13) < 4 ? -100.f : 0.f;  // Swin's -100 / 0
  Tensor* mask = runtimeMask ? n.addInput("mask", DataType::kFLOAT, md) : n.addConstant("window_mask", mv);
  s = op(n, "Add", s, mask);
  s = reshape(n, s, {b * p, H, S, S});
  finish(n, n.addMatMul(softmax(n, s), v)->outputs[0]);
}

std::map<std::string, HostTensor> windowInputs(int64_t b, int64_t p, bool perImageMask, bool runtimeMask) {
  std::map<std::string, HostTensor> in{{"q", randomTensor({b * p, H, S, D}, 1)}, {"k", randomTensor({b * p, H, S, D}, 2)},
                                       {"v", randomTensor({b * p, H, S, D}, 3)}};
  HostTensor mv(DataType::kFLOAT, {perImageMask ? b : 1, p, 1, S, S});
  for (int64_t i = 0; i < mv.count(); ++i) mv.as<float>()[i] = (i * 7919 % 13) < 4 ? -100.f : 0.f;
  if (runtimeMask) in["mask"] = mv;
  return in;
}

}  // namespace

// Swin's shifted windows: the per-window mask added between two Reshapes joins the attention as a
// [P, 1, S, S] mask read with batch period P (kiln_mask_batch_period), summed with the relative
// position bias; at one image it is a plain mask. The fused layer (reference kernel, which reads
// the period) computes what the unfused graph does. A mask that varies over the images too is
// not taken.
TEST(PassAttention, ShiftedWindowMaskFusesWithBatchPeriod) {
  constexpr int64_t P = 3;
  for (bool runtime : {false, true}) {
    for (int64_t b : {int64_t(2), int64_t(1)}) {
      SCOPED_TRACE("batch " + std::to_string(b) + (runtime ? ", runtime mask" : ", constant mask"));
      checkFused([&](Network& n) { windowAttention(n, b, P, false, runtime); }, windowInputs(b, P, false, runtime), true,
                 [&](const Network& n) {
                   const Layer* a = attentionLayer(n);
                   ASSERT_NE(a, nullptr);
                   ASSERT_EQ(a->inputs.size(), 4u);
                   EXPECT_EQ(a->attrs.getInt("kiln_mask_batch_period", 0), b > 1 ? P : 0);
                   EXPECT_EQ(count(n, "Reshape"), runtime ? 1 : 0);  // only the runtime mask's own reshape
                 });
    }
  }
  checkFused([&](Network& n) { windowAttention(n, 2, P, true, false); }, windowInputs(2, P, true, false), false);
  checkFused([&](Network& n) { windowAttention(n, 2, P, true, true); }, windowInputs(2, P, true, true), false);
}

// Swin-V2's cosine attention: the scores times a constant per-head scale [H, 1, 1] (the clamped,
// exponentiated logit scale), plus a relative-position bias. The scale moves onto Q (a Mul by
// [1, H, 1, 1] before the Attention, scale 1) and the fused network computes what the unfused one
// does. A scale that varies over the queries ([H, S, 1]) is not a per-head scale: no fusion.
TEST(PassAttention, PerHeadScaleMovesOntoTheQuery) {
  for (bool perQuery : {false, true}) {
    SCOPED_TRACE(perQuery ? "per-query scale" : "per-head scale");
    auto make = [perQuery](Network& n) {
      Tensor* q = n.addInput("q", DataType::kFLOAT, {B, H, S, D});
      Tensor* s = n.addMatMul(q, transpose(n, n.addInput("k", DataType::kFLOAT, {B, H, S, D}), {0, 1, 3, 2}))->outputs[0];
      s = op(n, "Mul", s, n.addConstant("logit_scale", randomTensor(perQuery ? Dims{H, S, 1} : Dims{H, 1, 1}, 5, 1.f, 20.f)));
      s = op(n, "Add", s, n.addConstant("relbias", randomTensor({1, H, S, S}, 6)));
      finish(n, n.addMatMul(softmax(n, s, 3), n.addInput("v", DataType::kFLOAT, {B, H, S, D}))->outputs[0]);
    };
    checkFused(make, {{"q", randomTensor({B, H, S, D}, 7)}, {"k", randomTensor({B, H, S, D}, 8)}, {"v", randomTensor({B, H, S, D}, 9)}},
               !perQuery, [](const Network& n) {
                 const Layer* a = attentionLayer(n);
                 ASSERT_NE(a, nullptr);
                 EXPECT_NEAR(a->attrs.getFloat("scale", 0), 1.f, 1e-6);
                 ASSERT_NE(a->inputs[0]->producer, nullptr);
                 EXPECT_EQ(a->inputs[0]->producer->op, "Mul");  // Q * scale[h]
                 EXPECT_EQ(a->inputs[0]->producer->inputs[1]->dims, (Dims{1, H, 1, 1}));
               });
  }
}
