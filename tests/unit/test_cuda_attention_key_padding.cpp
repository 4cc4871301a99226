// CUDA Attention with the key-padding form the attention fusion makes of transformers' runtime masks
// (fuse_attention_key_padding.cpp): bool key flags [B, 1, 1, Skv] (the flash kernels' shared-memory
// path), is_causal (tile skipping, per-element compares on diagonal tiles only) and kiln_mask_fill
// (a row with every key masked is uniform over all keys, so causal blocks holding one read every
// key). Every tactic offered against the CPU reference kernel: right / left padding, holes, an
// all-padding sequence, GQA, head sizes 40/64/96/128, sequence lengths off the 64-key tiles,
// float16/bfloat16 (tensor cores) and float32 (SIMT). Skipped without a GPU.
#include <gtest/gtest.h>

#include <algorithm>

#include "ops/attention_config.h"
#include "op_test_util.h"

using namespace kiln;
using kiln::test::OpCase;

namespace {

struct KeyCase {
  int64_t b, hq, hkv, s, d;
};

enum class Flags { kRight, kLeft, kHoles, kAllPaddingRow };

//! Key flags [B, 1, 1, S] (1 = attend). kRight: batch b keeps S - 5b keys (at least 1); kLeft: the first
//! 3b + 1 keys masked (rows before them have no key under causal); kHoles: every third key of odd
//! batches masked; kAllPaddingRow: right padding with batch 1 all padding.
HostTensor keyFlags(Flags f, int64_t B, int64_t S) {
  HostTensor m(DataType::kBOOL, {B, 1, 1, S});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < S; ++j) {
      bool keep = true;
      if (f == Flags::kRight || f == Flags::kAllPaddingRow) keep = j < std::max<int64_t>(1, S - 5 * b);
      if (f == Flags::kLeft) keep = j >= std::min<int64_t>(S - 1, 3 * b + 1);
      if (f == Flags::kHoles) keep = b % 2 == 0 || j % 3 != 0;
      if (f == Flags::kAllPaddingRow && b == 1) keep = false;
      m.as<uint8_t>()[b * S + j] = keep;
    }
  return m;
}

struct Tol {
  double rtol, atol;
};
Tol tolerance(DataType t) {
  if (t == DataType::kHALF) return {5e-3, 3e-3};
  if (t == DataType::kBF16) return {2e-2, 1.5e-2};
  return {1e-4, 2e-5};
}

//! The case in `type` and the float32 case of the same rounded values (the reference's input).
std::pair<OpCase, OpCase> keyPaddingCases(const KeyCase& k, Flags flags, bool causal, bool fill, DataType type, uint32_t seed) {
  OpCase c;
  c.op = "Attention";
  if (causal) c.attrs.set("is_causal", int64_t(1));
  if (fill) c.attrs.set(kAttentionMaskFillAttr, -3.4028235e38f);  // transformers' finfo(float32).min
  c.inputs = {test::uniformOfType({k.b, k.hq, k.s, k.d}, type, seed, -1.5, 1.5),
              test::uniformOfType({k.b, k.hkv, k.s, k.d}, type, seed + 1, -1.5, 1.5),
              test::uniformOfType({k.b, k.hkv, k.s, k.d}, type, seed + 2, -1.0, 1.0), keyFlags(flags, k.b, k.s)};
  OpCase ref = c;
  for (size_t i = 0; i < 3; ++i) ref.inputs[i] = test::convertTo(c.inputs[i], DataType::kFLOAT);
  return {c, ref};
}

bool has(const std::vector<std::string>& names, const std::string& n) { return std::find(names.begin(), names.end(), n) != names.end(); }

const DataType kTypes[] = {DataType::kHALF, DataType::kBF16, DataType::kFLOAT};

}  // namespace

TEST(CudaAttentionKeyPadding, EveryTacticMatchesTheReference) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const KeyCase cases[] = {
      {2, 4, 4, 7, 64},     // shorter than one tile
      {3, 4, 2, 197, 64},   // GQA, S off the 64-key tiles
      {2, 8, 2, 130, 128},  // head 128, GQA 4:1
      {2, 2, 1, 100, 40},   // MQA, head 40 (a padded 64-column tile)
      {2, 3, 3, 128, 96},   // S a multiple of every tile
      {1, 2, 2, 513, 64},   // several causal blocks per sequence
  };
  uint32_t seed = 7000;
  for (const KeyCase& k : cases)
    for (DataType t : kTypes)
      for (Flags f : {Flags::kRight, Flags::kLeft, Flags::kHoles, Flags::kAllPaddingRow})
        for (bool causal : {true, false})
          for (bool fill : {true, false}) {
            auto [c, ref] = keyPaddingCases(k, f, causal, fill, t, seed += 10);
            const HostTensor want = test::runReference(ref)[0];
            const auto names = test::tacticNames(*gpu, c);
            ASSERT_FALSE(names.empty()) << "no tactic for the key-padding form";
            if (t != DataType::kFLOAT && k.d <= 128) {  // the tensor-core kernels take key flags
              EXPECT_TRUE(has(names, "attention_half_flash_m64")) << toString(t) << " D" << k.d;
              EXPECT_TRUE(has(names, "attention_half_flash_m128")) << toString(t) << " D" << k.d;
              // cuDNN's padding mask with the flash fallback for rows it cannot express
              EXPECT_EQ(has(names, "attention_half_cudnn_sdpa"), k.d % 8 == 0) << toString(t) << " D" << k.d;
            }
            const std::string what = std::string(toString(t)) + " B" + std::to_string(k.b) + " Hq" + std::to_string(k.hq) + " Hkv" +
                                     std::to_string(k.hkv) + " S" + std::to_string(k.s) + " D" + std::to_string(k.d) + " flags" +
                                     std::to_string(static_cast<int>(f)) + (causal ? " causal" : "") + (fill ? " fill" : "");
            const Tol tol = tolerance(t);
            for (const std::string& name : names)
              test::expectClose(test::runTactic(*gpu, name, c)[0], want, tol.rtol, tol.atol, name + " " + what);
          }
}

//! BERT after pack_qkv_projections: Q, K and V are views of one packed [B, S, 3E] projection
//! (offsets 0, E, 2E; stride_s 3E), the output is merged back to [B, S, E] by an output view, and the
//! key flags come with kiln_mask_fill: every tactic offered against the reference.
TEST(CudaAttentionKeyPadding, PackedProjectionViews) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const int64_t b = 3, h = 4, s = 77, d = 64, e = h * d;
  uint32_t seed = 7900;
  for (DataType t : kTypes)
    for (Flags f : {Flags::kRight, Flags::kHoles, Flags::kAllPaddingRow})
      for (bool causal : {false, true}) {
        OpCase c;
        c.op = "Attention";
        if (causal) c.attrs.set("is_causal", int64_t(1));
        c.attrs.set(kAttentionMaskFillAttr, -3.4028235e38f);
        c.attrs.set("kiln_view_dims", std::vector<int64_t>{b, h, s, s, d, d});
        const char* views[3] = {"kiln_q_view", "kiln_k_view", "kiln_v_view"};
        for (int64_t i = 0; i < 3; ++i) c.attrs.set(views[i], std::vector<int64_t>{i * e, s * 3 * e, d, 3 * e});
        c.attrs.set("kiln_o_view", std::vector<int64_t>{s * e, d, e});
        c.attrs.set("kiln_o_dims", std::vector<int64_t>{b, s, e});
        const HostTensor packed = test::uniformOfType({b, s, 3 * e}, t, seed += 10, -1.5, 1.5);
        c.inputs = {packed, packed, packed, keyFlags(f, b, s)};
        OpCase ref = c;
        const HostTensor packed32 = test::convertTo(packed, DataType::kFLOAT);
        ref.inputs[0] = ref.inputs[1] = ref.inputs[2] = packed32;
        const HostTensor want = test::runReference(ref)[0];
        ASSERT_EQ(want.dims(), (Dims{b, s, e}));
        const auto names = test::tacticNames(*gpu, c);
        ASSERT_FALSE(names.empty()) << "no tactic for packed views with key flags";
        const std::string what = std::string(toString(t)) + " flags" + std::to_string(static_cast<int>(f)) + (causal ? " causal" : "");
        const Tol tol = tolerance(t);
        for (const std::string& name : names)
          test::expectClose(test::runTactic(*gpu, name, c)[0], want, tol.rtol, tol.atol, name + " packed views " + what);
      }
}

//! A fully masked row under kiln_mask_fill is the mean of V over every key (the exporters' finfo.min
//! semantics), under -inf it is zero: checked directly, not only against the reference.
TEST(CudaAttentionKeyPadding, FullyMaskedRows) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const KeyCase k{2, 2, 2, 150, 64};
  for (DataType t : kTypes)
    for (bool fill : {true, false}) {
      auto [c, ref] = keyPaddingCases(k, Flags::kAllPaddingRow, true, fill, t, 8100);
      const HostTensor& v = ref.inputs[2];
      HostTensor want(DataType::kFLOAT, {1, k.hq, k.s, k.d});  // batch 1: every row fully masked
      for (int64_t h = 0; h < k.hq; ++h)
        for (int64_t e = 0; e < k.d; ++e) {
          double mean = 0;
          for (int64_t j = 0; j < k.s; ++j) mean += v.as<float>()[((1 * k.hkv + h) * k.s + j) * k.d + e];
          mean /= static_cast<double>(k.s);
          for (int64_t i = 0; i < k.s; ++i) want.as<float>()[(h * k.s + i) * k.d + e] = fill ? static_cast<float>(mean) : 0.f;
        }
      for (const std::string& name : test::tacticNames(*gpu, c)) {
        const HostTensor got = test::convertTo(test::runTactic(*gpu, name, c)[0], DataType::kFLOAT);
        HostTensor row1(DataType::kFLOAT, want.dims());
        std::copy(got.as<float>() + want.count(), got.as<float>() + 2 * want.count(), row1.as<float>());
        test::expectClose(row1, want, tolerance(t).rtol, tolerance(t).atol, name + " " + std::string(toString(t)) + (fill ? " fill" : " -inf"));
      }
    }
}

//! kiln_mask_fill is taken with key flags or no mask only; the general kernel leaves it, cuDNN
//! takes key flags (as sequence lengths, with the flash fallback).
TEST(CudaAttentionKeyPadding, SupportsOnlyKeyFlagsWithFill) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  auto [c, ref] = keyPaddingCases({2, 4, 4, 64, 64}, Flags::kRight, true, true, DataType::kHALF, 9000);
  const auto names = test::tacticNames(*gpu, c);
  EXPECT_FALSE(has(names, "attention_fp_general"));
  EXPECT_TRUE(has(names, "attention_half_cudnn_sdpa"));
  OpCase dense = c;  // a float [B, 1, S, S] mask with the fill: no flash tactic
  dense.inputs[3] = test::uniformOfType({2, 1, 64, 64}, DataType::kHALF, 9001, -1.0, 0.0);
  for (const std::string& n : test::tacticNames(*gpu, dense)) EXPECT_EQ(n.find("flash"), std::string::npos) << n;
}

//! cuDNN SDPA with key flags shared by every batch ([1, 1, 1, S]: one row, one length for all):
//! right padding runs on cuDNN alone, left padding on the flash fallback; both as the reference.
TEST(CudaAttentionKeyPadding, CudnnSharedKeyFlags) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const KeyCase k{3, 4, 2, 200, 64};
  for (bool right : {true, false})
    for (bool causal : {true, false}) {
      auto [c, ref] = keyPaddingCases(k, Flags::kRight, causal, true, DataType::kHALF, 9100);
      HostTensor flags(DataType::kBOOL, {1, 1, 1, k.s});
      for (int64_t j = 0; j < k.s; ++j) flags.as<uint8_t>()[j] = right ? j < 150 : j >= 20;
      c.inputs[3] = ref.inputs[3] = flags;
      const auto names = test::tacticNames(*gpu, c);
      ASSERT_TRUE(has(names, "attention_half_cudnn_sdpa"));
      test::expectClose(test::runTactic(*gpu, "attention_half_cudnn_sdpa", c)[0], test::runReference(ref)[0], 5e-3, 3e-3,
                        std::string(right ? "right" : "left") + (causal ? " causal" : ""));
    }
}
