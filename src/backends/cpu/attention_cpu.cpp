// "attention_f32_gemm_avx2": the ONNX Attention op (opset 23 exports write it) in float32 on the
// CPU: the scores S = scale * Q K^T and O = softmax(S + mask) V as two GEMMs (gemm.h, packed AVX2
// micro-kernels) around a row softmax, per (batch, head, block of query rows), with Q, K, V and O
// read and written through their strides (3-D [B, S, H*D] or 4-D [B, H, S, D]); only a [rows, Skv]
// score block per task is kept. (The builder's attention fusion does not target it: on unfused
// exports it did not beat the batched MatMuls; docs/internals.md, "Attention fusion".)
// Masks: none, bool (false = masked) or float (added), broadcast over batch, heads and query rows
// as ONNX says (or batch-periodic: kiln_mask_batch_period); is_causal; kiln_mask_fill. Not taken (the reference kernel runs them): a KV cache,
// nonpad_kv_seqlen, softcap, windows, the qk_matmul output, a softmax precision other than float.
// The masking rules are the reference kernel's (ops/attention.cpp): a masked key's logit is -inf
// (or kiln_mask_fill, once), and a row with every key at -inf gives zeros.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_tactics.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/softmax_row.h"
#include "core/thread_pool.h"
#include "ops/attention_config.h"
#include "ops/attention_views.h"
#include "ops/fused_attrs.h"

namespace kiln::cpu {

namespace {

//! Where row s of head h of image b starts in a buffer: off + b * sb + h * sh + s * ss.
struct Strided {
  int64_t off = 0, sb = 0, sh = 0, ss = 0;
  int64_t at(int64_t b, int64_t h, int64_t s) const { return off + b * sb + h * sh + s * ss; }
};

//! A 3-D [B, S, H*W] or 4-D [B, H, S, W] tensor's rows.
Strided packed(bool is3d, int64_t heads, int64_t seq, int64_t width) {
  return is3d ? Strided{0, seq * heads * width, width, heads * width} : Strided{0, heads * seq * width, seq * width, width};
}

struct AttentionState : KernelState {
  AttentionConfig cfg;
  AttentionShape shape;
  Strided q, k, v, o;
  int64_t kvGroup = 1;  // q heads per k/v head (1 with views: they index K and V by q head)
  Dims maskDims;        // right-aligned to rank 4; empty without a mask
  bool boolMask = false;
};

class AttentionGemmKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<AttentionState>();
    s->cfg = parseAttentionConfig(l);
    if (hasQkvViews(*l.attrs)) {
      const QkvViews v = parseQkvViews(l);
      AttentionShape& a = s->shape;
      a.batch = v.b, a.qHeads = a.kvHeads = v.h, a.qSeq = v.sq, a.kvSeq = v.skv, a.headSize = v.d, a.vHeadSize = v.dv;
      s->q = {v.q[0], v.q[1], v.q[2], v.q[3]};
      s->k = {v.k[0], v.k[1], v.k[2], v.k[3]};
      s->v = {v.v[0], v.v[1], v.v[2], v.v[3]};
      const std::array<int64_t, 4> os = v.outStrides();
      s->o = {0, os[0], os[1], os[2]};
    } else {
      AttentionShape& a = s->shape;
      a = attentionShape(l);
      s->q = packed(a.is3d, a.qHeads, a.qSeq, a.headSize);
      s->k = packed(a.is3d, a.kvHeads, a.kvSeq, a.headSize);
      s->v = packed(a.is3d, a.kvHeads, a.kvSeq, a.vHeadSize);
      s->o = packed(a.is3d, a.qHeads, a.qSeq, a.vHeadSize);
      s->kvGroup = a.qHeads / a.kvHeads;
    }
    if (l.present(kAttentionMask)) {
      const Dims& m = l.inputs[kAttentionMask].dims;
      s->maskDims = Dims(4 - m.size(), 1);
      s->maskDims.insert(s->maskDims.end(), m.begin(), m.end());
      s->boolMask = l.inputs[kAttentionMask].type == DataType::kBOOL;
    }
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const auto& s = *static_cast<const AttentionState*>(state);
    const AttentionShape& a = s.shape;
    const float* q = io.in[kAttentionQ].as<const float>();
    const float* k = io.in[kAttentionK].as<const float>();
    const float* v = io.in[kAttentionV].as<const float>();
    const void* mask = io.in.size() > kAttentionMask ? io.in[kAttentionMask].data : nullptr;
    float* y = io.out[0].as<float>();
    const float scale = static_cast<float>(s.cfg.scale > 0 ? s.cfg.scale : 1.0 / std::sqrt(static_cast<double>(a.headSize)));
    const int64_t sq = a.qSeq, skv = a.kvSeq, slices = a.batch * a.qHeads;
    // Tasks: blocks of query rows of one (batch, head), so that one head with many queries
    // (SegFormer's efficient attention: 1 head, 4096 queries over 64 keys) still fills the pool;
    // at least 32 rows a block, for the GEMMs (each packs K or V again).
    const int64_t threads = io.pool ? io.pool->size() : 1;
    const int64_t blocks = std::max<int64_t>(1, std::min((sq + 31) / 32, (4 * threads + slices - 1) / slices));
    const int64_t rows = (sq + blocks - 1) / blocks;
    auto tasks = [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> scores;
      if (scores.size() < static_cast<size_t>(rows * skv)) scores.resize(static_cast<size_t>(rows * skv));
      float* sc = scores.data();
      for (int64_t t = begin; t < end; ++t) {
        const int64_t bh = t / blocks, i0 = (t % blocks) * rows, m = std::min(rows, sq - i0);
        if (m <= 0) continue;
        const int64_t b = bh / a.qHeads, h = bh % a.qHeads, kh = h / s.kvGroup;
        // S = scale * Q K^T for queries [i0, i0 + m): [m, Skv] (K's rows are Q's columns: transB).
        sgemm(false, true, m, skv, a.headSize, scale, q + s.q.at(b, h, i0), s.q.ss, k + s.k.at(b, kh, 0), s.k.ss, 0.f, sc, skv,
              nullptr);
        for (int64_t i = 0; i < m; ++i) softmaxRow(s, mask, b, h, i0 + i, sc + i * skv);
        // O = P V, [m, Dv], written through O's strides.
        sgemm(false, false, m, a.vHeadSize, skv, 1.f, sc, skv, v + s.v.at(b, kh, 0), s.v.ss, 0.f, y + s.o.at(b, h, i0), s.o.ss,
              nullptr);
      }
    };
    const int64_t n = slices * blocks;
    if (io.pool) io.pool->parallelFor(n, 1, tasks);
    else tasks(0, n);
  }

 private:
  //! Row i of (b, h): the mask and causal rules, then softmax in place (the reference's rules).
  static void softmaxRow(const AttentionState& s, const void* mask, int64_t b, int64_t h, int64_t i, float* row) {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    const int64_t skv = s.shape.kvSeq;
    const float fill = static_cast<float>(s.cfg.maskFill);
    if (mask) {
      const Dims& md = s.maskDims;
      const int64_t mb = md[0] == 1 ? 0 : (s.cfg.maskPeriod > 0 ? b % s.cfg.maskPeriod : b), mh = md[1] == 1 ? 0 : h, mi = md[2] == 1 ? 0 : i;
      const int64_t base = ((mb * md[1] + mh) * md[2] + mi) * md[3], width = std::min(md[3], skv);
      if (s.boolMask) {
        const bool* m = static_cast<const bool*>(mask) + base;
        for (int64_t j = 0; j < width; ++j)
          if (!m[j]) row[j] = kNegInf;
      } else {
        const float* m = static_cast<const float*>(mask) + base;
        for (int64_t j = 0; j < width; ++j) row[j] += m[j];
      }
      for (int64_t j = width; j < skv; ++j) row[j] = kNegInf;  // keys beyond the mask's last dim
    }
    if (s.cfg.causal)
      for (int64_t j = i + 1; j < skv; ++j) row[j] = kNegInf;
    bool allMasked = true, nan = false;
    for (int64_t j = 0; j < skv; ++j) {
      if (row[j] == kNegInf) row[j] = fill;  // masked: -inf, or kiln_mask_fill once
      allMasked = allMasked && row[j] == kNegInf;
      nan = nan || std::isnan(row[j]);
    }
    if (allMasked || nan) {
      std::fill(row, row + skv, allMasked ? 0.f : std::numeric_limits<float>::quiet_NaN());
      return;
    }
    softmaxRowAvx2(row, row, skv, false);
  }
};

bool supportsAttentionGemm(const LayerDesc& l) {
  if (l.op != "Attention" || l.inputs.size() < 3) return false;
  for (size_t i = 0; i < 3; ++i)
    if (l.inputs[i].type != DataType::kFLOAT) return false;
  if (l.outputs.size() != 1) return false;  // present_key / present_value / qk output: reference
  for (size_t i = kAttentionPastKey; i < l.inputs.size(); ++i)
    if (l.present(i)) return false;  // KV cache, nonpad_kv_seqlen: reference
  if (l.present(kAttentionMask)) {
    const TensorDesc& m = l.inputs[kAttentionMask];
    if ((m.type != DataType::kFLOAT && m.type != DataType::kBOOL) || m.dims.empty() || m.dims.size() > 4) return false;
  }
  try {
    const AttentionConfig c = parseAttentionConfig(l);
    if (c.softcap != 0 || c.leftWindow >= 0 || c.rightWindow >= 0 || c.qkMode != 0) return false;
    if (c.softmaxPrecision != 0 && c.softmaxPrecision != 1) return false;  // float only
    if (!hasQkvViews(*l.attrs)) {
      const AttentionShape s = attentionShape(l);
      if (s.qHeads > 0 && s.kvHeads > 0 && s.qHeads % s.kvHeads != 0) return false;
    }
  } catch (const Error&) {
    return false;
  }
  return true;
}

std::unique_ptr<Kernel> createAttentionGemm(const LayerDesc&) { return std::make_unique<AttentionGemmKernel>(); }

}  // namespace

KernelFactory attentionGemmAvx2() { return {supportsAttentionGemm, createAttentionGemm}; }

}  // namespace kiln::cpu
