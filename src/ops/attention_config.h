// Attention's attributes and sizes as the ONNX spec defines them (opsets 23-25), parsed and
// validated once, for the reference kernel (ops/attention.cpp) and the CUDA tactics, so that
// every implementation agrees on GQA head groups, the past/present KV cache and the masks.
#pragma once
#include <cstdint>
#include <limits>

#include "ir/layer_desc.h"

namespace kiln {

//! Input slots of Attention.
constexpr size_t kAttentionQ = 0, kAttentionK = 1, kAttentionV = 2, kAttentionMask = 3, kAttentionPastKey = 4,
                 kAttentionPastValue = 5, kAttentionNonpad = 6;

//! kiln-internal attribute (the attention fusion's key-padding analysis): a finite value <= -1e30
//! that keys masked by a bool attn_mask, is_causal, a window or nonpad_kv_seqlen take as their
//! logit's addend instead of -inf (added once however many rules mask the key). It reproduces the
//! exporters' finfo.min masks exactly: a row with every key masked is uniform over all keys
//! instead of zero. The value absorbs any realistic score (s + c == c), so kernels may use c.
constexpr const char* kAttentionMaskFillAttr = "kiln_mask_fill";
constexpr double kAttentionMaskFillMax = -1e30;
//! kiln-internal attribute (the attention fusion): 1 when a runtime float attn_mask is proven to
//! be a bias, finite and above -1e4 everywhere (a relative position bias gathered from a constant
//! table), with the scores' Sq and Skv as its last two dims. It masks no key, so no row is ever
//! fully masked, and cuDNN's SDPA computes what kiln's kernels do: it may take it as its bias
//! (otherwise it takes constant masks only). An assertion about values; the math is unchanged.
constexpr const char* kAttentionMaskBiasAttr = "kiln_mask_bias";
//! kiln-internal attribute (the attention fusion): P > 0 when the batch is P-periodic in the mask:
//! attn_mask is 4-D with P as its first dim, P divides the batch, and batch b reads mask batch
//! b % P. Swin's shifted windows: the scores [B * nW, H, S, S] are viewed as [B, nW, H, S, S] to
//! add a per-window mask [1, nW, 1, S, S]; the fused attention takes it as [nW, 1, S, S] with
//! period nW instead of a mask tiled B times.
constexpr const char* kAttentionMaskPeriodAttr = "kiln_mask_batch_period";

struct AttentionConfig {
  double scale = 0;  //!< 0: 1/sqrt(head_size)
  double softcap = 0;
  int64_t softmaxPrecision = 0;  //!< ONNX type id; 0: the input type
  int64_t qkMode = 0;            //!< qk_matmul_output_mode
  bool causal = false;
  int64_t leftWindow = -1, rightWindow = -1;
  double maskFill = -std::numeric_limits<double>::infinity();  //!< kiln_mask_fill; -inf when absent
  int64_t maskPeriod = 0;  //!< kiln_mask_batch_period; 0 when absent
};
//! Throws kiln::Error on invalid attribute values.
AttentionConfig parseAttentionConfig(const LayerDesc& l);

//! Sizes of one Attention call (any of them -1 at build time when unknown).
struct AttentionShape {
  bool is3d = false;
  int64_t batch = -1, qHeads = -1, kvHeads = -1, qSeq = -1, kvSeq = -1, pastSeq = 0, headSize = -1, vHeadSize = -1;
  int64_t total() const { return kvSeq < 0 || pastSeq < 0 ? -1 : kvSeq + pastSeq; }
};
//! Q/K/V ranks, head counts and sizes (3-D inputs: from q_num_heads/kv_num_heads).
AttentionShape attentionShape(const LayerDesc& l);
//! Validates past_key/past_value and nonpad_kv_seqlen against `s` and sets s.pastSeq.
void checkPastAndNonpad(const LayerDesc& l, AttentionShape& s, DataType t);

}  // namespace kiln
