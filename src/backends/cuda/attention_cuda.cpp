// CUDA tactics: attention family. Attention (ONNX opset 23 semantics, as src/ops/attention.cpp)
// for 4-D Q/K/V [B, H, S, D] or 3-D ones [B, S, H*D] (read in place through strides: the
// attention fusion hands the projections' outputs over without head transposes) with query heads a
// multiple of the K/V heads, an optional additive or bool mask
// (any broadcast to [B, H, Sq, Skv], possibly short in the key dim; bool key flags [B, 1, 1, Skv],
// as the fusion's key-padding analysis makes them, take the kernels' shared-memory path), is_causal,
// kiln_mask_fill (with key flags or no mask) and scale:
//  - "attention_half_flash_m64" / "_m128" / "_m32": tensor-core flash attention, float16/bfloat16,
//    head sizes up to 128 (equal for K and V), 64 / 128 / 32 query rows per block (small batches
//    need small blocks to fill the H200's 132 SMs).
//  - "attention_fp_flash_simt": float32/float16/bfloat16, head sizes up to 128 (CUDA cores, float32 math).
// GQA/MQA: query head h reads K/V head h / (query heads / K/V heads).
// Not handled (supports() is false; attention_general.cu runs them): KV cache (past_key/past_value),
// nonpad_kv_seqlen, softcap, sliding windows, softmax_precision other than float, extra outputs.
#include <algorithm>
#include <cmath>
#include <string>

#include "backends/cuda/attention_fallback.h"
#include "backends/cuda/attention_flash.h"
#include "backends/cuda/attention_geometry.h"
#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "ops/attention_config.h"

namespace kiln {

namespace {

using cuda::FlashMask;
using cuda::FlashParams;

using cuda::HeadDims;
using cuda::headDims;
constexpr size_t kQ = cuda::kAttnQ, kK = cuda::kAttnK, kV = cuda::kAttnV, kMask = cuda::kAttnMask;

//! What every attention tactic needs (build-time dims may be -1).
bool supportsCommon(const LayerDesc& l) {
  if (l.inputs.size() < 3 || l.inputs.size() > 7) return false;
  for (size_t i = 4; i < l.inputs.size(); ++i)
    if (l.present(i)) return false;  // past_key, past_value, nonpad_kv_seqlen
  if (l.outputs.size() != 1) return false;  // present_key/value, qk_matmul_output
  const DataType t = l.inputs[kQ].type;
  if (!isFloatType(t) || l.inputs[kK].type != t || l.inputs[kV].type != t) return false;
  HeadDims h;
  if (!headDims(l, h)) return false;
  if (h.qHeads <= 0 || h.kvHeads <= 0 || h.qHeads % h.kvHeads != 0) return false;  // unknown head counts
  if (h.d <= 0 || h.dv <= 0) return false;                    // head sizes must be known
  const Attributes& a = *l.attrs;
  if (a.getFloat("softcap", 0.f) != 0.f) return false;
  const int64_t prec = a.getInt("softmax_precision", 0);
  if (prec != 0 && prec != 1) return false;
  if (a.getInt("left_window_size", -1) != -1 || a.getInt("right_window_size", -1) != -1) return false;
  if (l.present(kMask)) {
    if (cuda::flashMaskOf(l.inputs[kMask].type) == FlashMask::kNone) return false;
    if (l.inputs[kMask].dims.empty() || l.inputs[kMask].dims.size() > 4) return false;
    // kiln_mask_fill: the kernels' fully-masked-row rule is written for key flags only.
    const Dims m4 = cuda::maskLayout(l.inputs[kMask].dims).dims4;
    if (a.has(kAttentionMaskFillAttr) && (l.inputs[kMask].type != DataType::kBOOL || m4[1] != 1 || m4[2] != 1)) return false;
  }
  return true;
}

bool supportsTc(const LayerDesc& l, int warps) {
  HeadDims h;
  if (!supportsCommon(l) || !headDims(l, h)) return false;
  return cuda::flashTcSupported(l.inputs[kQ].type, static_cast<int>(h.d), static_cast<int>(h.dv), warps);
}
bool supportsTc2(const LayerDesc& l) { return supportsTc(l, 2); }
bool supportsTc4(const LayerDesc& l) { return supportsTc(l, 4); }
bool supportsTc8(const LayerDesc& l) { return supportsTc(l, 8); }

bool supportsSimt(const LayerDesc& l) {
  HeadDims h;
  return supportsCommon(l) && headDims(l, h) && h.d <= cuda::kFlashSimtMaxD && h.dv <= cuda::kFlashSimtMaxD;
}

struct FlashState : KernelState {
  FlashParams p;  // everything but the pointers
  int64_t qOffset = 0, kOffset = 0, vOffset = 0;  // strided views: elements into the buffers
};

int toInt(const LayerDesc& l, int64_t v, const char* what) {
  if (v < 0 || v > INT32_MAX) throw UnsupportedError("layer '" + l.name + "' (Attention): " + what + " " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}

class FlashKernel : public Kernel {
 public:
  FlashKernel(const LayerDesc& l, int warps) : type_(l.inputs[kQ].type), warps_(warps) {
    HeadDims h;
    if (!headDims(l, h)) throw UnsupportedError("layer '" + l.name + "' (Attention): Q/K/V ranks are not supported");
    if (warps_ > 0) cuda::prepareFlashTc(type_, static_cast<int>(h.d), warps_);
  }

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto fail = [&](const std::string& m) { throw UnsupportedError("layer '" + l.name + "' (Attention): " + m); };
    const cuda::AttentionGeometry g = cuda::attentionGeometry(l);
    const Dims &q = g.q, &k = g.k;
    auto st = std::make_unique<FlashState>();
    FlashParams& p = st->p;
    p.qs = g.qs, p.ks = g.ks, p.vs = g.vs, p.os = g.os;
    st->qOffset = g.qOffset, st->kOffset = g.kOffset, st->vOffset = g.vOffset;
    p.batch = toInt(l, q[0], "batch");
    p.heads = toInt(l, q[1], "head count");
    p.group = toInt(l, q[1] / k[1], "query heads per K/V head");  // 1 unless GQA/MQA
    p.sq = toInt(l, q[2], "query length");
    p.skv = toInt(l, k[2], "key length");
    p.d = toInt(l, q[3], "head size");
    p.dv = toInt(l, g.v[3], "value head size");
    toInt(l, q[0] * q[1], "batch * heads");
    if (warps_ > 0 ? !cuda::flashTcSupported(type_, p.d, p.dv, warps_) : (p.d > cuda::kFlashSimtMaxD || p.dv > cuda::kFlashSimtMaxD))
      fail("head sizes " + std::to_string(p.d) + "/" + std::to_string(p.dv) + " are not supported by this tactic");
    const Attributes& a = *l.attrs;
    const double scale = a.has("scale") ? a.getFloat("scale", 0.f) : 1.0 / std::sqrt(static_cast<double>(p.d));
    p.scaleLog2 = static_cast<float>(scale * 1.4426950408889634);
    p.causal = a.getInt("is_causal", 0) != 0;
    if (a.has(kAttentionMaskFillAttr))  // finite: the exp2-domain logit of a masked key (absorbs any score)
      p.maskedLog2 = static_cast<float>(std::max(a.getFloat(kAttentionMaskFillAttr, 0.f) * 1.4426950408889634, -3.4028234663852886e38));
    if (l.present(kMask)) {
      const Dims& md = l.inputs[kMask].dims;
      const cuda::MaskLayout m = cuda::maskLayout(md);
      const int64_t period = a.getInt(kAttentionMaskPeriodAttr, 0);
      const Dims target{period > 0 ? period : q[0], q[1], q[2], k[2]};
      if (period > 0 && (md.size() != 4 || md[0] != period || q[0] % period != 0))
        fail("attn_mask " + toString(md) + " with batch period " + std::to_string(period) + " for batch " + std::to_string(q[0]));
      for (int i = 0; i < 3; ++i)
        if (m.dims4[i] != 1 && m.dims4[i] != target[i]) fail("attn_mask " + toString(md) + " does not broadcast to " + toString(target));
      if (m.len > target[3]) fail("attn_mask " + toString(md) + " is longer than the keys");
      p.mask = nullptr;
      p.maskType = cuda::flashMaskOf(l.inputs[kMask].type);
      p.maskLen = static_cast<int>(m.len);
      p.maskStrideQ = m.strideQ, p.maskStrideH = m.strideH, p.maskStrideB = m.strideB;
      p.maskPeriodB = static_cast<int>(period);
      // Key flags are read per batch without the period (the generic mask path takes it).
      p.keyPad = period == 0 && p.maskType == FlashMask::kBool && m.strideH == 0 && m.strideQ == 0 && m.len == target[3];
      if (a.has(kAttentionMaskFillAttr) && !p.keyPad) fail("kiln_mask_fill needs bool key flags [B, 1, 1, Skv], got attn_mask " + toString(md));
    }
    state = std::move(st);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const auto* st = static_cast<FlashState*>(state);
    FlashParams p = st->p;
    if (static_cast<int64_t>(p.batch) * p.heads * p.sq == 0 || p.dv == 0) return;
    const size_t es = elementSize(type_);
    p.q = static_cast<const char*>(io.in[kQ].data) + st->qOffset * static_cast<int64_t>(es);
    p.k = static_cast<const char*>(io.in[kK].data) + st->kOffset * static_cast<int64_t>(es);
    p.v = static_cast<const char*>(io.in[kV].data) + st->vOffset * static_cast<int64_t>(es);
    p.o = io.out[0].data;
    if (p.maskType != FlashMask::kNone) p.mask = io.in[kMask].data;
    auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
    auto rows16 = [&](const cuda::FlashStrides& s) { return (s.row * es) % 16 == 0 && (s.h * es) % 16 == 0 && (s.b * es) % 16 == 0; };
    p.vec = aligned(p.q) && aligned(p.k) && aligned(p.v) && aligned(p.o) && (p.d * es) % 16 == 0 && (p.dv * es) % 16 == 0 &&
            rows16(p.qs) && rows16(p.ks) && rows16(p.vs) && rows16(p.os);
    if (warps_ > 0) cuda::launchFlashTc(p, type_, warps_, cuda::streamOf(io));
    else cuda::launchFlashSimt(p, type_, cuda::streamOf(io));
    KILN_CUDA_CHECK_LAUNCH();
  }

 private:
  DataType type_;
  int warps_;  // tensor-core kernel with 4 or 8 warps; 0: SIMT kernel
};

}  // namespace

namespace cuda {
KernelFactory flashAttentionM64() {
  return {supportsTc4, [](const LayerDesc& l) -> std::unique_ptr<Kernel> { return std::make_unique<FlashKernel>(l, 4); }};
}
KernelFactory flashAttentionM128() {
  return {supportsTc8, [](const LayerDesc& l) -> std::unique_ptr<Kernel> { return std::make_unique<FlashKernel>(l, 8); }};
}
KernelFactory flashAttentionM32() {
  return {supportsTc2, [](const LayerDesc& l) -> std::unique_ptr<Kernel> { return std::make_unique<FlashKernel>(l, 2); }};
}
KernelFactory flashAttentionSimt() {
  return {supportsSimt, [](const LayerDesc& l) -> std::unique_ptr<Kernel> { return std::make_unique<FlashKernel>(l, 0); }};
}
std::unique_ptr<Kernel> makeFlashTcFallback(const LayerDesc& l, int warps) {
  if (!supportsTc(l, warps)) return nullptr;
  return std::make_unique<FlashKernel>(l, warps);
}
void setFlashSkip(KernelState* state, const int* skipWhen) { static_cast<FlashState*>(state)->p.skipWhen = skipWhen; }
}  // namespace cuda

}  // namespace kiln
