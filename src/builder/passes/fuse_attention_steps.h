// The three steps of the attention fusion (fuse_attention.cpp), shared by its files: the matcher
// (fuse_attention_match.cpp), the mask canonicalizer (fuse_attention_masks.cpp) and the rewriter
// (fuse_attention.cpp). Internal to the pass.
#pragma once
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "builder/passes/symbolic_dims.h"
#include "kiln/network.h"

namespace kiln::attention_fusion {

// Masked logits at or below this are treated as -inf (exp(-1e4) underflows in float).
constexpr double kVeryNegative = -1e4;

inline bool sameDim(int64_t a, int64_t b) { return a == b; }  // -1 == -1: trusted here; the matcher checks them at the samples

//! The profiles' sample shapes and one SymbolicDims over them, shared by the steps and by every
//! attention of one pass: each SymbolicDims infers everything above the tensors it is asked
//! about, so one per question cost seconds on a 36-attention T5. Built on first use; reset()
//! where a step changes what an existing tensor holds (a transpose sunk below a projection). The
//! pass's rewrites keep every other tensor's dims and values, and tensors outlive the pass
//! (removeDeadLayers runs after it), so the memo stays true.
class SampleDims {
 public:
  explicit SampleDims(const InputSamples& samples) : samples_(samples) {}
  size_t size() const { return samples_.size(); }
  bool empty() const { return samples_.empty(); }
  //! Null without samples (a static network, or the pass run alone).
  SymbolicDims* sym() {
    if (samples_.empty()) return nullptr;
    if (!sym_) sym_.emplace(samples_);
    return &*sym_;
  }
  //! Afresh, at the same address (the dims functions of a trace hold it).
  void reset() {
    if (sym_) sym_.emplace(samples_);
  }

 private:
  const InputSamples& samples_;
  std::optional<SymbolicDims> sym_;
};
//! The layers from the Q K^T MatMul to the P V MatMul.
struct ScoreChain {
  Layer *qk = nullptr, *softmax = nullptr, *pv = nullptr;
  std::vector<Layer*> layers;  // qk .. pv, all removed
  double scale = 1;
  //! A scale per head: scores * c with c constant [.., H, 1, 1] (Swin-V2's cosine attention: the
  //! clamped, exponentiated logit scale of each head). The fusion moves it onto Q.
  Tensor* headScale = nullptr;
  std::vector<Tensor*> masks;  // additive masks (broadcastable to the scores)
  Layer* where = nullptr;      // Where(cond, S, c) (or Where(cond, c, S) when whereKeepsTrue is false)
  bool whereKeepsTrue = true;
  double whereFill = 0;
  //! A mask added to the scores viewed as [B, P, H, Sq, Skv] between two Reshapes (Swin's shifted
  //! windows: a mask per window, the same in every image): the mask as the graph has it, its 4-D
  //! form [P|1, H|1, Sq|1, Skv] and the batch period P (0 when B is 1: a plain broadcast then).
  Tensor* windowMask = nullptr;
  Dims windowMaskDims;
  int64_t windowPeriod = 0;
  //! Max(scores, c) with c <= -1e30 (XGLM clamps its finfo.min-masked scores): no effect on a row with
  //! a key left; a fully masked row is uniform, which the fused layer reproduces only where its mask
  //! fill is c or no row can be fully masked (no mask besides is_causal). 0 when absent.
  double clampFloor = 0;
  //! Mul(Tanh(scores / c), c) between the scaled scores and the masks (Gemma-2's logit soft cap):
  //! the Attention op's softcap (applied before the mask, as ops/attention.cpp). 0 when absent.
  double softcap = 0;
};

//! A matched attention: the score chain and Q, K = transpose(kRoot, kPerm), V.
struct AttentionMatch {
  ScoreChain chain;
  DataType type = DataType::kFLOAT;
  Dims scores;  // [B, H, Sq, Skv]
  double scale = 1;
  Tensor *q = nullptr, *kRoot = nullptr, *v = nullptr;
  std::vector<int64_t> kPerm;  // K dim i = kRoot dim kPerm[i]
  Dims kDims;
};

//! The masks as the Attention layer takes them.
struct CanonicalMask {
  bool causal = false;
  Tensor* mask = nullptr;  // additive (or, after compactKeyPaddingMask, bool key flags), broadcastable to the scores; null when none
  double maskFill = -std::numeric_limits<double>::infinity();  // finite: kiln_mask_fill (ops/attention.cpp)
  bool bias = false;  // kiln_mask_bias (ops/attention_config.h): a runtime mask proven a bounded bias
  int64_t period = 0;  // kiln_mask_batch_period: batch b reads mask batch b % period (0: none)
};

//! True for a layer that passes its single input on unchanged: Identity, a one-input Concat, or
//! a Reshape/Squeeze/Unsqueeze whose output dims equal its input's (GPT-2 exports all three).
bool isIdentityLayer(const Layer* l);
//! `t` with identity layers above it skipped.
Tensor* throughIdentity(Tensor* t);

//! Walks from Softmax `sm` up to the Q K^T MatMul and down to the P V MatMul (sm's only reader,
//! through a NaN guard); fills the chain, scale and mask parts. Any rank; changes nothing.
bool matchScores(const Network& net, Layer* sm, ScoreChain& m);

//! Matcher: proves the subgraph ending in Softmax `sm` is an attention and finds Q, K, V (changes
//! nothing). Dims unknown statically are compared at the profiles' `samples`.
bool matchAttention(const Network& net, Layer* sm, AttentionMatch& am, SampleDims& samples);

//! Canonicalizer: one additive mask and is_causal. Every refusal comes before the first change to
//! the network. A dynamic network's masks are checked at its `samples` where their dims are unknown.
bool canonicalizeMasks(Network& net, const AttentionMatch& am, const Layer* sm, CanonicalMask& cm, SampleDims& samples);

//! Key-padding analysis (fuse_attention_key_padding.cpp): when the runtime mask provably is
//! "key flags k[b, j] ? (0 or causal) : masked", cm becomes is_causal + k as a bool
//! [B|1, 1, 1, Skv] mask (+ maskFill); false (cm unchanged) when that cannot be proven. A dynamic
//! network is proven at each of its `samples` (symbolic_dims.h).
bool compactKeyPaddingMask(Network& net, const AttentionMatch& am, CanonicalMask& cm, SampleDims& samples);

//! Whether runtime mask `m` is, at its static dims or at every sample, zero everywhere (*causal
//! false) or the exact causal pattern (*causal true) with a masking value, with no padded key: a
//! dynamic export's masks of the shapes alone (an ids-only call), which a fixed export folds.
//! Changes nothing.
bool maskIsPatternOnly(const AttentionMatch& am, Tensor* m, SampleDims& samples, bool* causal);
//! The values of runtime tensor `t` when it is a value of the shapes alone (constants and shape
//! arithmetic through elementwise ops and data movement): one at its static dims, or one per
//! sample; each at the dims it broadcasts from (Expand skipped), with the scores' dims at that
//! sample. False when it reads run-time data.
struct ShapeOnlyValue {
  HostTensor value;
  Dims scores;  // the scores' dims there
};
bool shapeOnlyValues(const AttentionMatch& am, Tensor* t, SampleDims& samples, std::vector<ShapeOnlyValue>& values);
//! Whether cm's runtime float mask is a bounded bias (fuse_attention_bias.cpp): its values come
//! from constants whose values are finite and above kVeryNegative through data movement, casts and
//! sums that keep them so, and its last two dims are the scores' Sq and Skv (statically or at
//! every sample). Changes nothing.
bool maskIsBoundedBias(const AttentionMatch& am, const CanonicalMask& cm, SampleDims& samples);
//! A tensor's type, dims and (when known) value: its own, or at one sample shape of a dynamic network.
using DescOf = std::function<TensorDesc(const Tensor*)>;
//! Whether check(desc, scores) holds wherever `t` is evaluated: once at its own dims when they and
//! the scores' are static, else at each of the profiles' samples (false with fewer than two), with
//! the scores' dims there. The static-or-every-sample dispatch of the mask analyses.
bool holdsAtEveryShape(const AttentionMatch& am, const Tensor* t, SampleDims& samples,
                       const std::function<bool(const DescOf& desc, const Dims& scores)>& check);
//! NumPy broadcast of two dims known to broadcast (the network's own inference checked them).
Dims broadcastOf(const Dims& a, const Dims& b);

}  // namespace kiln::attention_fusion
