// Attention's attributes and sizes as the ONNX spec defines them (opsets 23-25), parsed and
// validated once, for the reference kernel (ops/attention.cpp) and the CUDA tactics, so that
// every implementation agrees on GQA head groups, the past/present KV cache and the masks.
#pragma once
#include <cstdint>

#include "ir/layer_desc.h"

namespace kiln {

//! Input slots of Attention.
constexpr size_t kAttentionQ = 0, kAttentionK = 1, kAttentionV = 2, kAttentionMask = 3, kAttentionPastKey = 4,
                 kAttentionPastValue = 5, kAttentionNonpad = 6;

struct AttentionConfig {
  double scale = 0;  //!< 0: 1/sqrt(head_size)
  double softcap = 0;
  int64_t softmaxPrecision = 0;  //!< ONNX type id; 0: the input type
  int64_t qkMode = 0;            //!< qk_matmul_output_mode
  bool causal = false;
  int64_t leftWindow = -1, rightWindow = -1;
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
