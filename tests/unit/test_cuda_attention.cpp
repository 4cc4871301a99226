// CUDA Attention tactics (attention_half_flash_m64/m128/m32, attention_fp_flash_simt, attention_half_cudnn_sdpa, attention_fp_general)
// against the CPU
// reference kernel: sequence lengths 1..512 (ViT's 197, tails of every tile size), masks of every
// broadcast form, short masks, bool masks, causal, cross attention, float32/float16/bfloat16; head
// sizes 16..256 (the flash kernels' padded tiles, cuDNN up to 256), GQA, constant masks as cuDNN's
// bias. The cuDNN bias helpers (attention_bias.h) are host code: their test runs without a GPU.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "backends/cuda/attention_bias.h"
#include "op_test_util.h"
#include "ops/attention_config.h"

using namespace kiln;
using kiln::test::OpCase;

namespace {

enum class Mask { kNone, kPadding, kFull, kPerHead, kBool, kShort };

struct Shape {
  int64_t b, h, sq, skv, d, dv;
};

HostTensor uniform(const Dims& d, uint32_t seed, float lo, float hi) {
  HostTensor t(DataType::kFLOAT, d);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.count(); ++i) t.as<float>()[i] = u(rng);
  return t;
}

//! The mask input (float32 or bool) of one kind.
HostTensor makeMask(Mask kind, const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  switch (kind) {
    case Mask::kPadding: {  // BERT: (1 - mask) * -10000 over [B, 1, 1, Skv]; batch b keeps skv - 3b keys
      HostTensor m(DataType::kFLOAT, {s.b, 1, 1, s.skv});
      for (int64_t b = 0; b < s.b; ++b)
        for (int64_t j = 0; j < s.skv; ++j) m.as<float>()[b * s.skv + j] = j < std::max<int64_t>(1, s.skv - 3 * b) ? 0.f : -10000.f;
      return m;
    }
    case Mask::kFull: return uniform({1, 1, s.sq, s.skv}, seed, -3.f, 3.f);  // shared by batches and heads
    case Mask::kPerHead: return uniform({s.b, s.h, s.sq, s.skv}, seed, -2.f, 2.f);
    case Mask::kBool: {  // [Sq, Skv], key 0 always visible
      HostTensor m(DataType::kBOOL, {s.sq, s.skv});
      for (int64_t i = 0; i < s.sq; ++i)
        for (int64_t j = 0; j < s.skv; ++j) m.as<uint8_t>()[i * s.skv + j] = j == 0 || rng() % 4 != 0;
      return m;
    }
    case Mask::kShort:  // [B, 1, Sq, Skv - 5]: the last 5 keys are masked (ONNX short masks)
      return uniform({s.b, 1, s.sq, std::max<int64_t>(1, s.skv - 5)}, seed, -1.f, 1.f);
    case Mask::kNone: break;
  }
  return HostTensor();
}

//! The case with its float32 inputs stored as `type`, and the float32 case of the same rounded
//! values (the reference's input). Bool and integer inputs stay as they are.
std::pair<OpCase, OpCase> roundedTo(const OpCase& c, DataType type) {
  OpCase typed = c, ref = c;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.inputs[i].valid() || c.inputs[i].type() != DataType::kFLOAT) continue;
    typed.inputs[i] = test::convertTo(c.inputs[i], type);
    ref.inputs[i] = test::convertTo(typed.inputs[i], DataType::kFLOAT);
  }
  return {typed, ref};
}

//! The case in `type` (inputs rounded to it) and the float32 case of the same rounded values.
std::pair<OpCase, OpCase> makeCases(const Shape& s, Mask mask, bool causal, DataType type, uint32_t seed) {
  OpCase c;
  c.op = "Attention";
  if (causal) c.attrs.set("is_causal", int64_t(1));
  if (seed % 2) c.attrs.set("scale", 0.2f);  // else the default 1/sqrt(d)
  c.inputs = {uniform({s.b, s.h, s.sq, s.d}, seed, -1.5f, 1.5f), uniform({s.b, s.h, s.skv, s.d}, seed + 1, -1.5f, 1.5f),
              uniform({s.b, s.h, s.skv, s.dv}, seed + 2, -1.f, 1.f)};
  if (mask != Mask::kNone) c.inputs.push_back(makeMask(mask, s, seed + 3));
  return roundedTo(c, type);
}

struct Tol {
  double rtol, atol;
};
Tol tolerance(DataType t) {
  if (t == DataType::kHALF) return {5e-3, 3e-3};
  if (t == DataType::kBF16) return {2e-2, 1.5e-2};
  return {1e-4, 2e-5};
}

//! Runs every tactic offered for the case; returns how many ran.
int checkAllTactics(Backend& gpu, const Shape& s, Mask mask, bool causal, DataType type, uint32_t seed) {
  auto [c, ref] = makeCases(s, mask, causal, type, seed);
  const HostTensor want = test::runReference(ref)[0];
  const Tol tol = tolerance(type);
  const auto names = test::tacticNames(gpu, c);
  for (const std::string& name : names) {
    const HostTensor got = test::runTactic(gpu, name, c)[0];
    test::expectClose(got, want, tol.rtol, tol.atol,
                      name + " " + toString(type) + " B" + std::to_string(s.b) + " H" + std::to_string(s.h) + " Sq" + std::to_string(s.sq) +
                          " Skv" + std::to_string(s.skv) + " D" + std::to_string(s.d) + " mask" + std::to_string(static_cast<int>(mask)) +
                          (causal ? " causal" : ""));
  }
  return static_cast<int>(names.size());
}

//! Whether attention_general is the one tactic offered (the features only it runs).
bool onlyGeneral(Backend& gpu, const OpCase& c) { return test::tacticNames(gpu, c) == std::vector<std::string>{"attention_fp_general"}; }

bool offered(Backend& gpu, const OpCase& c, const std::string& name) {
  auto v = test::tacticNames(gpu, c);
  return std::find(v.begin(), v.end(), name) != v.end();
}

const DataType kTypes[] = {DataType::kFLOAT, DataType::kHALF, DataType::kBF16};

}  // namespace

TEST(CudaAttention, SequenceLengthsAndTypes) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const Shape shapes[] = {{1, 1, 1, 1, 64, 64},   {2, 3, 7, 7, 64, 64},    {1, 4, 64, 64, 64, 64},
                          {2, 6, 128, 128, 64, 64}, {2, 12, 197, 197, 64, 64}, {1, 2, 512, 512, 64, 64}};
  uint32_t seed = 1;
  for (const Shape& s : shapes)
    for (DataType t : kTypes) {
      const int n = checkAllTactics(*gpu, s, Mask::kNone, false, t, seed += 10);
      // 3 flash m64/m128/m32 + flash_simt + cudnn_sdpa (float16/bfloat16), and attention_fp_general
      EXPECT_EQ(n, t == DataType::kFLOAT ? 2 : 6) << toString(t) << " Sq" << s.sq;
    }
}

TEST(CudaAttention, MasksAndCausal) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const Shape shapes[] = {{2, 3, 7, 7, 64, 64}, {2, 4, 197, 197, 64, 64}, {1, 3, 130, 130, 64, 64}};
  uint32_t seed = 500;
  for (const Shape& s : shapes)
    for (DataType t : kTypes) {
      for (Mask m : {Mask::kPadding, Mask::kFull, Mask::kPerHead, Mask::kBool, Mask::kShort})
        EXPECT_GT(checkAllTactics(*gpu, s, m, false, t, seed += 10), 0);
      EXPECT_GT(checkAllTactics(*gpu, s, Mask::kNone, true, t, seed += 10), 0);
      EXPECT_GT(checkAllTactics(*gpu, s, Mask::kPadding, true, t, seed += 10), 0);  // GPT-2: causal + padding
      EXPECT_GT(checkAllTactics(*gpu, s, Mask::kPerHead, true, t, seed += 10), 0);  // T5's decoder: causal + bias
    }
}

TEST(CudaAttention, CrossAttentionAndHeadSizes) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const Shape shapes[] = {
      {2, 3, 7, 197, 64, 64},    // Sq < Skv (causal: top-left aligned)
      {1, 2, 150, 33, 64, 64},   // Sq > Skv
      {2, 2, 100, 100, 128, 128},  // head size 128 (tensor cores)
      {1, 3, 77, 77, 40, 24},    // Q/K and V head sizes differ: SIMT only
  };
  uint32_t seed = 900;
  for (const Shape& s : shapes)
    for (DataType t : kTypes) {
      EXPECT_GT(checkAllTactics(*gpu, s, Mask::kNone, false, t, seed += 10), 0);
      EXPECT_GT(checkAllTactics(*gpu, s, Mask::kNone, true, t, seed += 10), 0);
      EXPECT_GT(checkAllTactics(*gpu, s, Mask::kFull, false, t, seed += 10), 0);
    }
}

//! 3-D Q/K/V [B, S, H*D] (heads interleaved in the hidden dim, as the attention fusion hands
//! over projection outputs): every tactic against the reference, with a BERT padding mask.
TEST(CudaAttention, ThreeDimensionalInputs) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const Shape shapes[] = {{2, 12, 128, 128, 64, 64}, {1, 3, 77, 77, 64, 64}, {2, 2, 33, 50, 128, 128}, {1, 3, 20, 20, 40, 24}};
  uint32_t seed = 1300;
  for (const Shape& s : shapes)
    for (DataType t : kTypes)
      for (bool masked : {false, true}) {
        OpCase c;
        c.op = "Attention";
        c.attrs.set("q_num_heads", s.h);
        c.attrs.set("kv_num_heads", s.h);
        seed += 10;
        c.inputs = {uniform({s.b, s.sq, s.h * s.d}, seed, -1.5f, 1.5f), uniform({s.b, s.skv, s.h * s.d}, seed + 1, -1.5f, 1.5f),
                    uniform({s.b, s.skv, s.h * s.dv}, seed + 2, -1.f, 1.f)};
        if (masked) c.inputs.push_back(makeMask(Mask::kPadding, s, seed + 3));
        auto [typed, ref] = roundedTo(c, t);
        const HostTensor want = test::runReference(ref)[0];
        const auto names = test::tacticNames(*gpu, typed);
        EXPECT_EQ(names.size(), t == DataType::kFLOAT || s.d == 40 ? 2u : (masked ? 5u : 6u)) << toString(t) << " D" << s.d;
        for (const std::string& name : names)
          test::expectClose(test::runTactic(*gpu, name, typed)[0], want, tolerance(t).rtol, tolerance(t).atol,
                            "3-D " + name + " " + toString(t) + " Sq" + std::to_string(s.sq) + (masked ? " masked" : ""));
      }
}

//! Q/K/V as strided views of one packed projection (kiln_*_view attributes, as the attention
//! fusion writes them for ViT's sequence-first [S, B, 3E] and GPT-2's [B, S, 3E]): every tactic
//! against the reference, plain and merged outputs, with and without a padding mask; the
//! batch-first (GPT-2) ones causal, which cuDNN's SDPA must be offered too.
TEST(CudaAttention, StridedViewsOfPackedQkv) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const int64_t b = 2, h = 3, sq = 77, d = 64, e = h * d;
  uint32_t seed = 1700;
  for (bool seqFirst : {true, false})
    for (bool merged : {false, true})
      for (DataType t : kTypes) {
        OpCase c;
        c.op = "Attention";
        c.attrs.set("kiln_view_dims", std::vector<int64_t>{b, h, sq, sq, d, d});
        if (!seqFirst) c.attrs.set("is_causal", int64_t(1));  // GPT-2: batch first and causal
        // element (b, h, s, :) of Q/K/V i: packed[s][b][i*E + h*D] (seq first) or packed[b][s][i*E + h*D]
        const int64_t sb = seqFirst ? 3 * e : sq * 3 * e, ss = seqFirst ? b * 3 * e : 3 * e;
        const char* names[3] = {"kiln_q_view", "kiln_k_view", "kiln_v_view"};
        for (int i = 0; i < 3; ++i) c.attrs.set(names[i], std::vector<int64_t>{i * e, sb, d, ss});
        if (merged) {  // heads merged back: O[b, h, s, :] at [b][s][h*D] (batch first) or [s][b][h*D] (seq first)
          c.attrs.set("kiln_o_view", seqFirst ? std::vector<int64_t>{e, d, b * e} : std::vector<int64_t>{sq * e, d, e});
          c.attrs.set("kiln_o_dims", seqFirst ? std::vector<int64_t>{sq * b, e} : std::vector<int64_t>{b, sq, e});
        }
        const Dims packed = seqFirst ? Dims{sq, b, 3 * e} : Dims{b, sq, 3 * e};
        HostTensor p = uniform(packed, seed += 10, -1.5f, 1.5f);
        c.inputs = {p, p, p};
        if (merged) c.inputs.push_back(makeMask(Mask::kPadding, Shape{b, h, sq, sq, d, d}, seed + 1));
        auto [typed, ref] = roundedTo(c, t);
        const HostTensor want = test::runReference(ref)[0];
        const auto names2 = test::tacticNames(*gpu, typed);
        EXPECT_FALSE(names2.empty()) << toString(t);
        if (t != DataType::kFLOAT && !merged)
          EXPECT_TRUE(std::find(names2.begin(), names2.end(), "attention_half_cudnn_sdpa") != names2.end()) << (seqFirst ? "seq-first" : "causal");
        for (const std::string& name : names2)
          test::expectClose(test::runTactic(*gpu, name, typed)[0], want, tolerance(t).rtol, tolerance(t).atol,
                            "views " + name + " " + toString(t) + (seqFirst ? " seq-first" : " batch-first") + (merged ? " merged" : ""));
      }
}

TEST(CudaAttention, FullyMaskedRowsAreZero) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const Shape s{1, 2, 9, 70, 64, 64};
  for (DataType t : kTypes) {
    auto [c, ref] = makeCases(s, Mask::kNone, false, t, 77);
    HostTensor m(DataType::kBOOL, {s.sq, s.skv});  // rows 0 and 5 see no key
    for (int64_t i = 0; i < s.sq; ++i)
      for (int64_t j = 0; j < s.skv; ++j) m.as<uint8_t>()[i * s.skv + j] = i != 0 && i != 5 && (j + i) % 3 != 0;
    c.inputs.push_back(m);
    ref.inputs.push_back(m);
    const HostTensor want = test::runReference(ref)[0];
    for (const std::string& name : test::tacticNames(*gpu, c)) {
      const HostTensor got = test::runTactic(*gpu, name, c)[0];
      test::expectClose(got, want, tolerance(t).rtol, tolerance(t).atol, name + " " + toString(t));
      for (int64_t h = 0; h < s.h; ++h)
        for (int64_t e = 0; e < s.dv; ++e) EXPECT_EQ(got.getDouble((h * s.sq + 5) * s.dv + e), 0.0) << name;
    }
  }
}

// The flash and cuDNN tactics refuse what they cannot run; attention_general takes it.
TEST(CudaAttention, SupportsRefusesWhatItCannotRun) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const Shape s{1, 4, 8, 8, 64, 64};
  auto base = [&](DataType t) { return makeCases(s, Mask::kNone, false, t, 3).first; };
  // What runs: tensor cores for float16/bfloat16 with head size 64, SIMT for float32.
  EXPECT_TRUE(offered(*gpu, base(DataType::kHALF), "attention_half_flash_m64"));
  EXPECT_TRUE(offered(*gpu, base(DataType::kBF16), "attention_half_flash_m128"));
  EXPECT_TRUE(offered(*gpu, base(DataType::kHALF), "attention_half_flash_m32"));
  EXPECT_TRUE(offered(*gpu, base(DataType::kFLOAT), "attention_fp_flash_simt"));
  EXPECT_FALSE(offered(*gpu, base(DataType::kFLOAT), "attention_half_flash_m64"));
  // cuDNN SDPA: float16/bfloat16 without an attn_mask input.
  EXPECT_TRUE(offered(*gpu, base(DataType::kHALF), "attention_half_cudnn_sdpa"));
  EXPECT_FALSE(offered(*gpu, base(DataType::kFLOAT), "attention_half_cudnn_sdpa"));
  EXPECT_FALSE(offered(*gpu, makeCases(s, Mask::kPadding, false, DataType::kHALF, 3).first, "attention_half_cudnn_sdpa"));
  // softcap, sliding window, double softmax precision.
  for (const char* attr : {"softcap", "left_window", "precision"}) {
    OpCase c = base(DataType::kHALF);
    if (std::string(attr) == "softcap") c.attrs.set("softcap", 30.f);
    if (std::string(attr) == "left_window") c.attrs.set("left_window_size", int64_t(4));
    if (std::string(attr) == "precision") c.attrs.set("softmax_precision", int64_t(11));
    EXPECT_TRUE(onlyGeneral(*gpu, c)) << attr;
  }
  {  // past_key / past_value
    OpCase c = base(DataType::kHALF);
    c.inputs.push_back(HostTensor());
    c.inputs.push_back(test::convertTo(uniform({1, 4, 3, 64}, 1, -1, 1), DataType::kHALF));
    c.inputs.push_back(test::convertTo(uniform({1, 4, 3, 64}, 2, -1, 1), DataType::kHALF));
    EXPECT_TRUE(onlyGeneral(*gpu, c));
  }
  {  // GQA (4 query heads, 2 KV heads): the flash kernels and cuDNN's SDPA
    OpCase c = base(DataType::kHALF);
    c.inputs[1] = test::convertTo(uniform({1, 2, 8, 64}, 1, -1, 1), DataType::kHALF);
    c.inputs[2] = test::convertTo(uniform({1, 2, 8, 64}, 2, -1, 1), DataType::kHALF);
    EXPECT_TRUE(offered(*gpu, c, "attention_half_flash_m64"));
    EXPECT_TRUE(offered(*gpu, c, "attention_half_cudnn_sdpa"));
  }
  {  // qk_matmul_output (4 outputs)
    OpCase c = base(DataType::kHALF);
    c.nbOutputs = 4;
    EXPECT_TRUE(onlyGeneral(*gpu, c));
  }
  {  // head size 256 (cuDNN on Hopper, attention_general), integer mask
    auto [c, ref] = makeCases({1, 2, 8, 8, 256, 256}, Mask::kNone, false, DataType::kHALF, 5);
    EXPECT_EQ(test::tacticNames(*gpu, c), (std::vector<std::string>{"attention_half_cudnn_sdpa", "attention_fp_general"}));
    EXPECT_TRUE(onlyGeneral(*gpu, makeCases({1, 2, 8, 8, 256, 256}, Mask::kNone, false, DataType::kFLOAT, 5).first));
    OpCase m = base(DataType::kHALF);
    m.inputs.push_back(test::convertTo(uniform({8, 8}, 1, 0, 2), DataType::kINT32));
    EXPECT_TRUE(test::tacticNames(*gpu, m).empty());  // no tactic reads integer masks
  }
  {  // head size 40: the tensor-core kernels (a 64-column tile), SIMT and cuDNN; 36: not cuDNN
    auto [c, ref] = makeCases({1, 2, 8, 8, 40, 40}, Mask::kNone, false, DataType::kHALF, 5);
    EXPECT_TRUE(offered(*gpu, c, "attention_half_flash_m64"));
    EXPECT_TRUE(offered(*gpu, c, "attention_fp_flash_simt"));
    EXPECT_TRUE(offered(*gpu, c, "attention_half_cudnn_sdpa"));
    EXPECT_FALSE(offered(*gpu, makeCases({1, 2, 8, 8, 36, 36}, Mask::kNone, false, DataType::kHALF, 5).first, "attention_half_cudnn_sdpa"));
    // Q/K and V head sizes differ: SIMT (and attention_general) only
    EXPECT_EQ(test::tacticNames(*gpu, makeCases({1, 2, 8, 8, 40, 24}, Mask::kNone, false, DataType::kHALF, 5).first),
              (std::vector<std::string>{"attention_fp_flash_simt", "attention_fp_general"}));
  }
}

//! One attention_general case: every output against the reference (run in float32 on the same
//! rounded inputs). `extra` adds inputs 3..6 (mask, past_key, past_value, nonpad_kv_seqlen).
void checkGeneral(Backend& gpu, OpCase c, DataType t, const std::string& what) {
  auto [typed, ref] = roundedTo(c, t);
  const std::vector<HostTensor> want = test::runReference(ref);
  ASSERT_TRUE(offered(gpu, typed, "attention_fp_general")) << what << " " << toString(t);
  const std::vector<HostTensor> got = test::runTactic(gpu, "attention_fp_general", typed);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t o = 0; o < want.size(); ++o) {
    // qk_matmul_output holds raw scores (|x| up to ~E * 2.25 * scale): scale the absolute bound.
    const double scale = o == 3 ? 10.0 : 1.0;
    test::expectClose(test::convertTo(got[o], DataType::kFLOAT), test::convertTo(want[o], DataType::kFLOAT), tolerance(t).rtol,
                      tolerance(t).atol * scale, what + " " + toString(t) + " output " + std::to_string(o));
  }
}

// attention_general against the reference for each feature it runs: GQA/MQA (4-D and 3-D; the
// flash kernels too), the past/present KV cache (present outputs compared too), nonpad_kv_seqlen with causal,
// softcap, sliding windows, softmax_precision, qk_matmul_output in all four modes, head size 256.
TEST(CudaAttention, GeneralCoversEveryFeature) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  uint32_t seed = 5000;
  auto qkv4 = [&](int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t skv, int64_t d, int64_t dv) {
    OpCase c;
    c.op = "Attention";
    seed += 10;
    c.inputs = {uniform({b, hq, sq, d}, seed, -1.5f, 1.5f), uniform({b, hkv, skv, d}, seed + 1, -1.5f, 1.5f),
                uniform({b, hkv, skv, dv}, seed + 2, -1.f, 1.f)};
    return c;
  };
  for (DataType t : kTypes) {
    {  // GQA 8 query heads on 2 KV heads, causal, per-head additive mask
      OpCase c = qkv4(2, 8, 2, 9, 9, 32, 32);
      c.attrs.set("is_causal", int64_t(1));
      c.inputs.push_back(uniform({2, 8, 9, 9}, seed + 3, -1.f, 1.f));
      checkGeneral(*gpu, c, t, "gqa causal mask");
    }
    {  // MQA with 3-D inputs, different head sizes for V, scale
      OpCase c;
      c.op = "Attention";
      c.attrs.set("q_num_heads", int64_t(4));
      c.attrs.set("kv_num_heads", int64_t(1));
      c.attrs.set("scale", 0.3f);
      c.inputs = {uniform({2, 5, 4 * 16}, seed, -1.5f, 1.5f), uniform({2, 7, 16}, seed + 1, -1.5f, 1.5f),
                  uniform({2, 7, 24}, seed + 2, -1.f, 1.f)};
      checkGeneral(*gpu, c, t, "3-D mqa");
    }
    {  // KV cache: past 6 + 3 new keys, GQA, bool mask, present_key/present_value outputs
      OpCase c = qkv4(1, 4, 2, 3, 3, 16, 16);
      HostTensor m(DataType::kBOOL, {3, 9});
      for (int64_t i = 0; i < 27; ++i) m.as<uint8_t>()[i] = i % 4 != 1;
      c.inputs.push_back(m);
      c.inputs.push_back(uniform({1, 2, 6, 16}, seed + 4, -1.5f, 1.5f));
      c.inputs.push_back(uniform({1, 2, 6, 16}, seed + 5, -1.f, 1.f));
      c.nbOutputs = 3;
      checkGeneral(*gpu, c, t, "past/present");
      c.attrs.set("is_causal", int64_t(1));
      checkGeneral(*gpu, c, t, "past/present causal");
    }
    {  // nonpad_kv_seqlen (per batch) with causal decoding frontier
      OpCase c = qkv4(3, 2, 2, 2, 10, 16, 16);
      c.attrs.set("is_causal", int64_t(1));
      c.inputs.push_back(HostTensor());
      c.inputs.push_back(HostTensor());
      c.inputs.push_back(HostTensor());
      HostTensor np(DataType::kINT64, {3});
      np.as<int64_t>()[0] = 10, np.as<int64_t>()[1] = 4, np.as<int64_t>()[2] = 7;
      c.inputs.push_back(np);
      checkGeneral(*gpu, c, t, "nonpad");
    }
    {  // softcap, windows, softmax precision, qk_matmul_output modes 0..3
      for (int64_t mode = 0; mode < 4; ++mode) {
        OpCase c = qkv4(1, 2, 2, 6, 11, 32, 32);
        c.attrs.set("softcap", 2.5f);
        c.attrs.set("qk_matmul_output_mode", mode);
        c.attrs.set("left_window_size", int64_t(3));
        c.attrs.set("right_window_size", int64_t(2));
        c.attrs.set("softmax_precision", mode % 2 ? int64_t(1) : int64_t(16));
        c.inputs.push_back(uniform({6, 11}, seed + 3, -1.f, 1.f));
        c.nbOutputs = 4;
        c.inputs.resize(6);  // past_key/past_value absent: present outputs = the new keys/values
        checkGeneral(*gpu, c, t, "softcap/window/qk mode " + std::to_string(mode));
      }
    }
    {  // head size 256, 300 keys (several per thread), short float mask
      OpCase c = qkv4(1, 2, 2, 4, 300, 256, 256);
      c.inputs.push_back(uniform({1, 1, 4, 290}, seed + 3, -1.f, 1.f));
      checkGeneral(*gpu, c, t, "head 256");
    }
  }
}

// GQA/MQA on every tactic offered (flash kernels and attention_general), 4-D and 3-D inputs, with
// masks and causal, in every type.
TEST(CudaAttention, GroupedQueryAttentionOnEveryTactic) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  struct G {
    int64_t b, hq, hkv, sq, skv, d;
    bool threeD, causal, mask;
  };
  const G cases[] = {{2, 8, 2, 70, 70, 64, false, true, false}, {1, 4, 1, 33, 100, 128, false, false, true},
                     {2, 6, 3, 128, 128, 64, true, false, true}, {1, 8, 1, 1, 257, 64, true, true, false}};
  uint32_t seed = 7000;
  for (const G& g : cases)
    for (DataType t : kTypes) {
      OpCase c;
      c.op = "Attention";
      seed += 10;
      if (g.causal) c.attrs.set("is_causal", int64_t(1));
      if (g.threeD) {
        c.attrs.set("q_num_heads", g.hq);
        c.attrs.set("kv_num_heads", g.hkv);
        c.inputs = {uniform({g.b, g.sq, g.hq * g.d}, seed, -1.5f, 1.5f), uniform({g.b, g.skv, g.hkv * g.d}, seed + 1, -1.5f, 1.5f),
                    uniform({g.b, g.skv, g.hkv * g.d}, seed + 2, -1.f, 1.f)};
      } else {
        c.inputs = {uniform({g.b, g.hq, g.sq, g.d}, seed, -1.5f, 1.5f), uniform({g.b, g.hkv, g.skv, g.d}, seed + 1, -1.5f, 1.5f),
                    uniform({g.b, g.hkv, g.skv, g.d}, seed + 2, -1.f, 1.f)};
      }
      if (g.mask) c.inputs.push_back(uniform({g.b, 1, g.sq, g.skv}, seed + 3, -2.f, 2.f));
      auto [typed, ref] = roundedTo(c, t);
      const HostTensor want = test::runReference(ref)[0];
      const auto names = test::tacticNames(*gpu, typed);
      EXPECT_TRUE(std::find(names.begin(), names.end(), "attention_fp_flash_simt") != names.end()) << toString(t);
      for (const std::string& name : names)
        test::expectClose(test::runTactic(*gpu, name, typed)[0], want, tolerance(t).rtol, tolerance(t).atol,
                          "gqa " + name + " " + toString(t) + " Hq" + std::to_string(g.hq) + " Hkv" + std::to_string(g.hkv) +
                              (g.threeD ? " 3-D" : "") + (g.causal ? " causal" : "") + (g.mask ? " mask" : ""));
    }
}

// The cuDNN bias helpers (host code, no GPU): which constant masks leave every query row a key,
// and the dense bias they become.
TEST(CudaAttention, CudnnBiasOnlyWhereNoRowIsHidden) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const Dims target{2, 3, 4, 6};  // [B, H, Sq, Skv]
  auto floats = [](const Dims& d, std::vector<float> v) {
    HostTensor t(DataType::kFLOAT, d);
    std::copy(v.begin(), v.end(), t.as<float>());
    return t;
  };
  // padding [B, 1, 1, Skv]: batch 1 hides keys 0..3 only, then every key
  HostTensor pad = floats({2, 1, 1, 6}, {0, 0, 0, 0, 0, 0, -1e4f, -1e4f, -1e4f, -1e4f, 0, ninf});
  EXPECT_TRUE(cuda::sdpaMaskLeavesRowsOpen(pad, target, false));
  EXPECT_FALSE(cuda::sdpaMaskLeavesRowsOpen(pad, target, true));  // causal: batch 1's row 0 sees key 0 only
  pad.as<float>()[10] = -1e9f;
  EXPECT_FALSE(cuda::sdpaMaskLeavesRowsOpen(pad, target, false));  // batch 1 sees nothing
  // short bool mask [Sq, 2]: keys 2.. are hidden; row 3 keeps key 1
  HostTensor b(DataType::kBOOL, {4, 2});
  for (int64_t i = 0; i < 8; ++i) b.as<uint8_t>()[i] = i % 2 == 1;
  EXPECT_TRUE(cuda::sdpaMaskLeavesRowsOpen(b, target, false));
  EXPECT_FALSE(cuda::sdpaMaskLeavesRowsOpen(b, target, true));  // causal: row 0 sees only key 0, hidden
  // masks that do not broadcast, or are longer than the keys
  EXPECT_FALSE(cuda::sdpaMaskLeavesRowsOpen(floats({2, 2, 4, 6}, std::vector<float>(48, 0.f)), target, false));
  EXPECT_FALSE(cuda::sdpaMaskLeavesRowsOpen(floats({4, 7}, std::vector<float>(28, 0.f)), target, false));
  // the dense bias keeps the batch and head broadcasts, expands the query rows, hides short keys
  EXPECT_EQ(cuda::sdpaBiasDims(b.dims(), target), (Dims{1, 1, 4, 6}));
  EXPECT_EQ(cuda::sdpaBiasDims(pad.dims(), target), (Dims{2, 1, 4, 6}));
  const HostTensor bb = cuda::denseSdpaBias(b, target, DataType::kHALF);
  ASSERT_EQ(bb.dims(), (Dims{1, 1, 4, 6}));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j) EXPECT_EQ(bb.getDouble(i * 6 + j), j == 1 ? 0.0 : -INFINITY) << i << "," << j;
  const HostTensor pb = cuda::denseSdpaBias(pad, target, DataType::kBF16);
  ASSERT_EQ(pb.dims(), (Dims{2, 1, 4, 6}));
  for (int64_t b1 = 0; b1 < 2; ++b1)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 6; ++j)
        EXPECT_EQ(pb.getDouble((b1 * 4 + i) * 6 + j), bf16ToFloat(floatToBf16(pad.as<float>()[b1 * 6 + j]))) << b1 << "," << i << "," << j;
}

namespace {

//! One case on every tactic offered; `cudnn`: whether cuDNN's SDPA must be among them.
void checkOffered(Backend& gpu, const OpCase& c, DataType t, bool cudnn, const std::string& what) {
  auto [typed, ref] = roundedTo(c, t);
  const HostTensor want = test::runReference(ref)[0];
  const auto names = test::tacticNames(gpu, typed);
  EXPECT_EQ(std::find(names.begin(), names.end(), "attention_half_cudnn_sdpa") != names.end(), cudnn) << what << " " << toString(t);
  for (const std::string& name : names)
    test::expectClose(test::runTactic(gpu, name, typed)[0], want, tolerance(t).rtol, tolerance(t).atol, what + " " + name + " " + toString(t));
}

OpCase qkvCase(int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t skv, int64_t d, uint32_t seed) {
  OpCase c;
  c.op = "Attention";
  c.inputs = {uniform({b, hq, sq, d}, seed, -1.5f, 1.5f), uniform({b, hkv, skv, d}, seed + 1, -1.5f, 1.5f),
              uniform({b, hkv, skv, d}, seed + 2, -1.f, 1.f)};
  return c;
}

}  // namespace

// cuDNN's SDPA beyond equal heads and head sizes up to 128: GQA/MQA, causal, head sizes 32..256,
// sequence lengths that are no multiple of a tile, Sq != Skv; every other offered tactic too.
TEST(CudaAttention, CudnnSdpaGqaCausalAndHeadSizes) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  struct G {
    int64_t b, hq, hkv, sq, skv, d;
    bool causal;
  };
  const G cases[] = {{2, 8, 2, 77, 77, 64, true},    {1, 6, 1, 130, 130, 128, true}, {2, 4, 4, 49, 49, 32, false},
                     {1, 4, 2, 50, 131, 80, false},  {1, 4, 2, 131, 50, 80, true},   {1, 2, 1, 200, 200, 256, true},
                     {2, 2, 2, 33, 300, 256, false}, {1, 12, 12, 512, 512, 64, true}};
  uint32_t seed = 9000;
  for (const G& g : cases)
    for (DataType t : {DataType::kHALF, DataType::kBF16}) {
      OpCase c = qkvCase(g.b, g.hq, g.hkv, g.sq, g.skv, g.d, seed += 10);
      if (g.causal) c.attrs.set("is_causal", int64_t(1));
      checkOffered(*gpu, c, t, true,
                   "Hq" + std::to_string(g.hq) + " Hkv" + std::to_string(g.hkv) + " Sq" + std::to_string(g.sq) + " Skv" +
                       std::to_string(g.skv) + " D" + std::to_string(g.d) + (g.causal ? " causal" : ""));
    }
}

// Constant masks become cuDNN's bias where every query row keeps a key: Swin's relative-position
// bias [1, H, 49, 49] at head size 32, T5's bias with a causal mask folded in, a BERT padding mask
// as a constant, a short bool mask, with GQA; a constant mask hiding a whole row, and runtime
// masks, stay with the flash kernels.
TEST(CudaAttention, ConstantMasksAsCudnnBias) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const float ninf = -std::numeric_limits<float>::infinity();
  uint32_t seed = 9500;
  for (DataType t : {DataType::kHALF, DataType::kBF16}) {
    {  // Swin: window attention, relative-position bias per head
      OpCase c = qkvCase(16, 3, 3, 49, 49, 32, seed += 10);
      c.inputs.push_back(uniform({1, 3, 49, 49}, seed + 3, -2.f, 2.f));
      c.constant = {false, false, false, true};
      checkOffered(*gpu, c, t, true, "swin bias");
      c.constant.clear();
      checkOffered(*gpu, c, t, false, "runtime bias");
      // T5's dynamic export: a runtime position bias the fusion proved bounded (kiln_mask_bias),
      // alone and with is_causal; read in place by cuDNN each run
      c.attrs.set(kAttentionMaskBiasAttr, int64_t(1));
      checkOffered(*gpu, c, t, true, "runtime bounded bias");
      c.attrs.set("is_causal", int64_t(1));
      checkOffered(*gpu, c, t, true, "runtime bounded bias causal");
    }
    {  // T5 decoder: bias + causal (finfo.min above the diagonal), one constant [1, H, S, S]
      OpCase c = qkvCase(2, 4, 4, 70, 70, 64, seed += 10);
      HostTensor m = uniform({1, 4, 70, 70}, seed + 3, -1.f, 1.f);
      for (int64_t h = 0; h < 4; ++h)
        for (int64_t i = 0; i < 70; ++i)
          for (int64_t j = i + 1; j < 70; ++j) m.as<float>()[(h * 70 + i) * 70 + j] = std::numeric_limits<float>::lowest();
      c.inputs.push_back(m);
      c.constant = {false, false, false, true};
      checkOffered(*gpu, c, t, true, "t5 bias");
    }
    {  // BERT padding mask (constant), GQA, Sq != Skv, and a short bool mask
      const Shape s{3, 4, 40, 90, 64, 64};
      OpCase c = qkvCase(s.b, s.h, 2, s.sq, s.skv, s.d, seed += 10);
      c.inputs.push_back(makeMask(Mask::kPadding, s, seed + 3));
      c.constant = {false, false, false, true};
      checkOffered(*gpu, c, t, true, "constant padding");
      c.inputs[3] = makeMask(Mask::kBool, s, seed + 4);
      checkOffered(*gpu, c, t, true, "constant bool");
      c.inputs[3] = makeMask(Mask::kShort, s, seed + 5);
      checkOffered(*gpu, c, t, true, "constant short");
      c.attrs.set("is_causal", int64_t(1));
      checkOffered(*gpu, c, t, true, "constant short causal");
    }
    {  // a constant mask hiding rows 0 and 5 entirely: not cuDNN, and those rows are zero
      OpCase c = qkvCase(1, 2, 2, 9, 70, 64, seed += 10);
      HostTensor m(DataType::kFLOAT, {9, 70});
      for (int64_t i = 0; i < 9; ++i)
        for (int64_t j = 0; j < 70; ++j) m.as<float>()[i * 70 + j] = i == 0 || i == 5 || (i + j) % 3 == 0 ? ninf : 0.f;
      c.inputs.push_back(m);
      c.constant = {false, false, false, true};
      checkOffered(*gpu, c, t, false, "hidden rows");
    }
  }
}

// The tensor-core flash kernels at head sizes that run in padded tiles (16 -> 32, 36/48 -> 64,
// 80 -> 96, 120 -> 128) and at 32 and 96, causal or with a padding mask; 36 also takes the
// unvectorized copies (its 72-byte rows are no multiple of 16 bytes).
TEST(CudaAttention, FlashPaddedHeadSizes) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  uint32_t seed = 9900;
  for (int64_t d : {16, 32, 36, 48, 80, 96, 120})
    for (DataType t : {DataType::kHALF, DataType::kBF16})
      for (Mask m : {Mask::kNone, Mask::kPadding}) {
        const Shape s{2, 3, 70, 130, d, d};
        auto [c, ref] = makeCases(s, m, m == Mask::kNone, t, seed += 10);
        const HostTensor want = test::runReference(ref)[0];
        const auto names = test::tacticNames(*gpu, c);
        for (const char* n : {"attention_half_flash_m32", "attention_half_flash_m64", "attention_half_flash_m128"})
          EXPECT_TRUE(std::find(names.begin(), names.end(), n) != names.end()) << n << " D" << d;
        for (const std::string& name : names)
          test::expectClose(test::runTactic(*gpu, name, c)[0], want, tolerance(t).rtol, tolerance(t).atol,
                            "padded " + name + " " + toString(t) + " D" + std::to_string(d) + (m == Mask::kNone ? " causal" : " mask"));
      }
}

// kiln_mask_batch_period (Swin's shifted windows, fused): a [P, H|1, Sq, Skv] mask read by batch
// b % P. Every tactic offered matches the reference (which reads the period); cuDNN's SDPA, whose
// bias cannot, is not offered.
TEST(CudaAttention, BatchPeriodicWindowMask) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  struct Case {
    Shape s;
    int64_t period, maskHeads;
  };
  const Case cases[] = {{{8, 3, 49, 49, 32, 32}, 4, 3}, {{6, 2, 17, 17, 64, 64}, 3, 1}, {{4, 4, 64, 64, 64, 64}, 2, 4}};
  uint32_t seed = 900;
  for (const Case& k : cases)
    for (DataType t : kTypes) {
      auto [c, ref] = makeCases(k.s, Mask::kNone, false, t, seed += 10);
      HostTensor m = uniform({k.period, k.maskHeads, k.s.sq, k.s.skv}, seed + 5, -3.f, 3.f);
      for (int64_t i = 0; i < m.count(); i += 7) m.as<float>()[i] = -100.f;  // Swin's masked pairs
      for (OpCase* x : {&c, &ref}) x->attrs.set(kAttentionMaskPeriodAttr, k.period);
      c.inputs.push_back(t == DataType::kFLOAT ? m : test::convertTo(m, t));
      ref.inputs.push_back(test::convertTo(c.inputs.back(), DataType::kFLOAT));
      const HostTensor want = test::runReference(ref)[0];
      const Tol tol = tolerance(t);
      const auto names = test::tacticNames(*gpu, c);
      EXPECT_GE(names.size(), 2u) << toString(t);
      for (const std::string& name : names) {
        EXPECT_NE(name, "attention_half_cudnn_sdpa");
        const HostTensor got = test::runTactic(*gpu, name, c)[0];
        test::expectClose(got, want, tol.rtol, tol.atol, name + " " + toString(t) + " B" + std::to_string(k.s.b) + " period " + std::to_string(k.period));
      }
    }
}
