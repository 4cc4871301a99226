// Op definitions (shape inference + naive reference kernels + ONNX normalization): attention family.
// Attention (opsets 23-25: 3-D and 4-D inputs, GQA/MQA, bool or additive masks with broadcasting
// and short-mask padding, is_causal with the offset-aligned frontier, sliding windows, past/present
// KV cache, nonpad_kv_seqlen, scale, softcap, softmax_precision, qk_matmul_output_mode) and
// RotaryEmbedding (opset 23). The normalization helpers LpNormalization,
// MeanVarianceNormalization and Det live in attention_norms.cpp.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/thread_pool.h"
#include "ops/attention_config.h"
#include "ops/fused_attrs.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

[[noreturn]] void unsupported(const LayerDesc& l, const std::string& msg) {
  throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): " + msg);
}

//! f(T{}) for float32/float64 `t`; UnsupportedError naming the layer otherwise.
template <typename F>
void dispatchRefFloat(const LayerDesc& l, DataType t, F&& f) {
  dispatchType<kRefFloatTypes>(t, f, [&] { unsupported(l, std::string("no CPU kernel for data type ") + toString(t)); });
}

void requireDims(const LayerDesc& l, size_t i, const Dims& expected, const char* what) {
  const Dims& d = l.inputs[i].dims;
  bool ok = d.size() == expected.size();
  for (size_t k = 0; ok && k < d.size(); ++k) ok = dimsAgree(d[k], expected[k]);
  if (!ok) opError(l, std::string(what) + " has shape " + toString(d) + ", expected " + toString(expected));
}

void checkInputSizes(const LayerDesc& l) {
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (l.present(i) && isStatic(l.inputs[i].dims)) volume(l.inputs[i].dims);
}

//! `total / parts` when it divides evenly (-1 when `total` is unknown); throws otherwise.
int64_t exactDiv(const LayerDesc& l, int64_t total, int64_t parts, const char* what) {
  if (total < 0) return -1;
  if (total % parts != 0)
    opError(l, std::string(what) + " (" + std::to_string(total) + ") is not a multiple of " + std::to_string(parts));
  return total / parts;
}

//! Rounds x to the precision of ONNX data type `onnxType` (softmax_precision emulation).
double roundTo(int64_t onnxType, double x) {
  switch (onnxType) {
    case 1: return static_cast<float>(x);
    case 10: return halfToFloat(floatToHalf(static_cast<float>(x)));
    case 16: return bf16ToFloat(floatToBf16(static_cast<float>(x)));
    default: return x;
  }
}

// =============================================================================================
// Attention

constexpr size_t kQ = kAttentionQ, kK = kAttentionK, kV = kAttentionV, kMask = kAttentionMask,
                 kPastKey = kAttentionPastKey, kPastValue = kAttentionPastValue, kNonpad = kAttentionNonpad;

}  // namespace

AttentionConfig parseAttentionConfig(const LayerDesc& l) {
  AttentionConfig c;
  const Attributes& a = *l.attrs;
  if (a.has("scale")) {
    c.scale = a.getFloat("scale", 0.f);
    if (!std::isfinite(c.scale) || c.scale <= 0) opError(l, "scale must be a positive finite value, got " + std::to_string(c.scale));
  }
  c.softcap = a.getFloat("softcap", 0.f);
  if (!std::isfinite(c.softcap) || c.softcap < 0) opError(l, "softcap must be a finite value >= 0");
  c.softmaxPrecision = a.getInt("softmax_precision", 0);
  if (c.softmaxPrecision != 0 && c.softmaxPrecision != 1 && c.softmaxPrecision != 10 && c.softmaxPrecision != 11 &&
      c.softmaxPrecision != 16)
    opError(l, "softmax_precision must be 1 (float), 10 (float16), 11 (double) or 16 (bfloat16), got " +
                   std::to_string(c.softmaxPrecision));
  c.qkMode = a.getInt("qk_matmul_output_mode", 0);
  if (c.qkMode < 0 || c.qkMode > 3) opError(l, "qk_matmul_output_mode must be 0..3, got " + std::to_string(c.qkMode));
  int64_t causal = a.getInt("is_causal", 0);
  if (causal != 0 && causal != 1) opError(l, "is_causal must be 0 or 1");
  c.causal = causal == 1;
  c.leftWindow = a.getInt("left_window_size", -1);
  c.rightWindow = a.getInt("right_window_size", -1);
  if (c.leftWindow < -1 || c.rightWindow < -1) opError(l, "left_window_size and right_window_size must be >= -1");
  const int64_t bias = a.getInt(kAttentionMaskBiasAttr, 0);
  if (bias != 0 && bias != 1) opError(l, std::string(kAttentionMaskBiasAttr) + " must be 0 or 1");
  if (a.has(kAttentionMaskFillAttr)) {
    c.maskFill = a.getFloat(kAttentionMaskFillAttr, 0.f);
    if (!std::isfinite(c.maskFill) || c.maskFill > kAttentionMaskFillMax)
      opError(l, std::string(kAttentionMaskFillAttr) + " must be finite and <= -1e30, got " + std::to_string(c.maskFill));
  }
  c.maskPeriod = a.getInt(kAttentionMaskPeriodAttr, 0);
  if (c.maskPeriod < 0) opError(l, std::string(kAttentionMaskPeriodAttr) + " must be >= 0 (0: none), got " + std::to_string(c.maskPeriod));
  return c;
}

AttentionShape attentionShape(const LayerDesc& l) {
  const Dims &q = l.inputs[kQ].dims, &k = l.inputs[kK].dims, &v = l.inputs[kV].dims;
  if (q.size() != 3 && q.size() != 4) opError(l, "Q must have rank 3 or 4, got " + toString(q));
  if (k.size() != q.size() || v.size() != q.size())
    opError(l, "Q, K and V must have the same rank, got " + toString(q) + ", " + toString(k) + ", " + toString(v));
  AttentionShape s;
  s.is3d = q.size() == 3;
  const bool hasQH = l.attrs->has("q_num_heads"), hasKVH = l.attrs->has("kv_num_heads");
  const int64_t qh = l.attrs->getInt("q_num_heads", 0), kvh = l.attrs->getInt("kv_num_heads", 0);
  if ((hasQH && qh <= 0) || (hasKVH && kvh <= 0)) opError(l, "q_num_heads and kv_num_heads must be positive");
  s.batch = q[0];
  if (!dimsAgree(k[0], q[0]) || !dimsAgree(v[0], q[0])) opError(l, "Q, K and V must have the same batch size");
  if (s.is3d) {
    if (!hasQH || !hasKVH) opError(l, "3-D inputs need the q_num_heads and kv_num_heads attributes");
    s.qHeads = qh;
    s.kvHeads = kvh;
    s.qSeq = q[1];
    s.kvSeq = k[1];
    if (!dimsAgree(v[1], k[1])) opError(l, "K and V must have the same sequence length");
    s.headSize = exactDiv(l, q[2], qh, "the hidden size of Q");
    int64_t kHead = exactDiv(l, k[2], kvh, "the hidden size of K");
    if (!dimsAgree(kHead, s.headSize)) opError(l, "Q and K head sizes differ (" + std::to_string(s.headSize) + " vs " + std::to_string(kHead) + ")");
    s.vHeadSize = exactDiv(l, v[2], kvh, "the hidden size of V");
  } else {
    s.qHeads = q[1];
    s.kvHeads = k[1];
    if ((hasQH && !dimsAgree(qh, q[1])) || (hasKVH && !dimsAgree(kvh, k[1])))
      opError(l, "q_num_heads/kv_num_heads disagree with the head dims of 4-D Q/K");
    if (!dimsAgree(v[1], k[1])) opError(l, "K and V must have the same number of heads");
    s.qSeq = q[2];
    s.kvSeq = k[2];
    if (!dimsAgree(v[2], k[2])) opError(l, "K and V must have the same sequence length");
    s.headSize = q[3];
    if (!dimsAgree(k[3], q[3])) opError(l, "Q and K head sizes differ (" + std::to_string(q[3]) + " vs " + std::to_string(k[3]) + ")");
    s.vHeadSize = v[3];
  }
  if (s.qHeads > 0 && s.kvHeads > 0 && s.qHeads % s.kvHeads != 0)
    opError(l, "q_num_heads (" + std::to_string(s.qHeads) + ") must be a multiple of kv_num_heads (" + std::to_string(s.kvHeads) + ")");
  return s;
}

void checkPastAndNonpad(const LayerDesc& l, AttentionShape& s, DataType t) {
  const bool pk = l.present(kPastKey), pv = l.present(kPastValue);
  if (pk != pv) opError(l, "past_key and past_value must be given together");
  if (pk) {
    if (l.inputs[kPastKey].type != t || l.inputs[kPastValue].type != t) opError(l, "past_key/past_value must have Q's type");
    const Dims& pkd = l.inputs[kPastKey].dims;
    if (pkd.size() != 4) opError(l, "past_key must have rank 4, got " + toString(pkd));
    s.pastSeq = pkd[2];
    requireDims(l, kPastKey, {s.batch, s.kvHeads, s.pastSeq, s.headSize}, "past_key");
    requireDims(l, kPastValue, {s.batch, s.kvHeads, s.pastSeq, s.vHeadSize}, "past_value");
  }
  if (l.present(kNonpad)) {
    if (pk) opError(l, "nonpad_kv_seqlen cannot be combined with past_key/past_value");
    if (l.inputs[kNonpad].type != DataType::kINT64) opError(l, "nonpad_kv_seqlen must be int64");
    requireDims(l, kNonpad, {s.batch}, "nonpad_kv_seqlen");
  }
}

namespace {

//! The mask must broadcast to (batch, q_heads, q_seq, total); its last dim may be shorter.
void checkMask(const LayerDesc& l, const AttentionShape& s) {
  const Dims& m = l.inputs[kMask].dims;
  DataType mt = l.inputs[kMask].type;
  if (mt == DataType::kHALF || mt == DataType::kBF16 || mt == DataType::kFLOAT || mt == DataType::kDOUBLE || mt == DataType::kBOOL ||
      isInteger(mt)) {
  } else {
    opError(l, std::string("attn_mask has unsupported type ") + toString(mt));
  }
  if (m.empty() || m.size() > 4) opError(l, "attn_mask must have rank 1..4, got " + toString(m));
  const int64_t period = parseAttentionConfig(l).maskPeriod;
  if (period > 0 && (m.size() != 4 || m[0] != period || (s.batch > 0 && s.batch % period != 0)))
    opError(l, std::string(kAttentionMaskPeriodAttr) + " " + std::to_string(period) + " needs a 4-D attn_mask with that many batches dividing the batch " +
                   std::to_string(s.batch) + ", got " + toString(m));
  const Dims target{period > 0 ? period : s.batch, s.qHeads, s.qSeq, s.total()};
  const size_t off = 4 - m.size();
  for (size_t k = 0; k < m.size(); ++k) {
    int64_t want = target[off + k];
    bool last = k + 1 == m.size();
    bool ok = last ? (m[k] < 0 || want < 0 || m[k] <= want) : (m[k] == 1 || dimsAgree(m[k], want));
    if (!ok) opError(l, "attn_mask of shape " + toString(m) + " cannot be broadcast to " + toString(target));
  }
}

//! Attention over strided views of its Q/K/V buffers (ops/attention_views.h): attn_mask is the
//! only other input; one output.
void inferViewAttention(LayerDesc& l) {
  requireInputs(l, 3, 4);
  const QkvViews v = parseQkvViews(l);
  const DataType t = l.inputs[kQ].type;
  if (!isFloat(t) || l.inputs[kK].type != t || l.inputs[kV].type != t) opError(l, "Q, K and V must share a floating-point type");
  if (std::max<size_t>(l.outputs.size(), 1) > 1) opError(l, "strided Q/K/V: one output only");
  parseAttentionConfig(l);
  AttentionShape s;
  s.batch = v.b, s.qHeads = v.h, s.kvHeads = v.h, s.qSeq = v.sq, s.kvSeq = v.skv, s.headSize = v.d, s.vHeadSize = v.dv;
  if (l.present(kMask)) checkMask(l, s);
  setOutput(l, 0, t, v.outDims());
}

void inferAttention(LayerDesc& l) {
  if (hasQkvViews(*l.attrs)) return inferViewAttention(l);
  requireInputs(l, 3, 7);
  checkInputSizes(l);
  parseAttentionConfig(l);
  const DataType t = l.inputs[kQ].type;
  if (!isFloat(t)) opError(l, std::string("Q must be a floating-point tensor, got ") + toString(t));
  if (l.inputs[kK].type != t) opError(l, "K must have Q's type");
  if (l.inputs[kV].type != t) unsupported(l, "V with a type different from Q is not supported");
  AttentionShape s = attentionShape(l);
  checkPastAndNonpad(l, s, t);
  if (l.present(kMask)) checkMask(l, s);
  size_t nOut = std::max<size_t>(l.outputs.size(), 1);
  if (nOut > 4) opError(l, "has at most 4 outputs, the layer has " + std::to_string(nOut));
  const int64_t total = s.total();
  Dims y = s.is3d ? Dims{s.batch, s.qSeq, s.vHeadSize < 0 ? -1 : s.qHeads * s.vHeadSize}
                  : Dims{s.batch, s.qHeads, s.qSeq, s.vHeadSize};
  Dims qk{s.batch, s.qHeads, s.qSeq, total};
  if (isStatic(qk)) volume(qk);
  setOutput(l, 0, t, y);
  if (nOut > 1) setOutput(l, 1, t, {s.batch, s.kvHeads, total, s.headSize});
  if (nOut > 2) setOutput(l, 2, t, {s.batch, s.kvHeads, total, s.vHeadSize});
  if (nOut > 3) setOutput(l, 3, t, qk);
}

//! Element offsets of Q/K/V rows (3-D inputs hold heads interleaved in the hidden dim).
struct HeadLayout {
  bool is3d;
  int64_t heads, seq, width;  // width: head size
  int64_t row(int64_t b, int64_t h, int64_t s) const {
    return is3d ? (b * seq + s) * heads * width + h * width : ((b * heads + h) * seq + s) * width;
  }
};

//! The additive bias of one (batch, head) slice: mask + causal + window + key padding.
class AttentionBias {
 public:
  AttentionBias(const KernelIO& io, const AttentionConfig& cfg, const AttentionShape& s) : cfg_(cfg), s_(s) {
    if (io.in.size() > kMask && io.in[kMask].data) loadMask(io.in[kMask]);
    if (io.in.size() > kNonpad && io.in[kNonpad].data) {
      const int64_t* np = io.in[kNonpad].as<int64_t>();
      nonpad_.assign(np, np + s.batch);
    }
  }

  //! Fills bias[0..total) for query `i` of batch `b`, head `h`.
  void row(int64_t b, int64_t h, int64_t i, double* bias) const {
    const int64_t total = s_.total();
    // The causal/window frontier: keys are absolute positions, queries start at `offset`.
    const int64_t offset = s_.pastSeq > 0 ? s_.pastSeq : (nonpad_.empty() ? 0 : nonpad_[b] - s_.qSeq);
    const int64_t p = offset + i;
    const double* m = mask_.empty() ? nullptr : maskRow(b, h, i);
    for (int64_t j = 0; j < total; ++j) {
      double v = 0;
      if (m) v = j < maskDims_[3] ? m[j] : kNegInf;
      if (cfg_.causal && j > p) v += kNegInf;
      if (cfg_.leftWindow >= 0 && p - j > cfg_.leftWindow) v += kNegInf;
      if (cfg_.rightWindow >= 0 && j - p > cfg_.rightWindow) v += kNegInf;
      if (!nonpad_.empty() && j >= nonpad_[b]) v += kNegInf;
      bias[j] = v == kNegInf ? cfg_.maskFill : v;  // masked: -inf, or kiln_mask_fill once
    }
  }

 private:
  void loadMask(const TensorView& m) {
    maskDims_ = Dims(4 - m.dims.size(), 1);
    maskDims_.insert(maskDims_.end(), m.dims.begin(), m.dims.end());
    mask_.resize(static_cast<size_t>(m.count));
    if (m.type == DataType::kBOOL) {
      for (int64_t k = 0; k < m.count; ++k) mask_[k] = m.as<bool>()[k] ? 0.0 : kNegInf;
    } else {
      dispatchNumeric(m.type, [&](auto z) {
        using M = decltype(z);
        for (int64_t k = 0; k < m.count; ++k) mask_[k] = static_cast<double>(m.as<M>()[k]);
      });
    }
  }
  const double* maskRow(int64_t b, int64_t h, int64_t i) const {
    int64_t bb = maskDims_[0] == 1 ? 0 : (cfg_.maskPeriod > 0 ? b % cfg_.maskPeriod : b), hh = maskDims_[1] == 1 ? 0 : h, ii = maskDims_[2] == 1 ? 0 : i;
    return mask_.data() + ((bb * maskDims_[1] + hh) * maskDims_[2] + ii) * maskDims_[3];
  }

  const AttentionConfig& cfg_;
  const AttentionShape& s_;
  std::vector<double> mask_;
  Dims maskDims_;
  std::vector<int64_t> nonpad_;
};

template <typename T>
class AttentionRunner {
 public:
  AttentionRunner(const KernelIO& io, const AttentionConfig& cfg, const AttentionShape& s)
      : io_(io), cfg_(cfg), s_(s), bias_(io, cfg, s),
        qLayout_{s.is3d, s.qHeads, s.qSeq, s.headSize},
        kLayout_{s.is3d, s.kvHeads, s.kvSeq, s.headSize},
        vLayout_{s.is3d, s.kvHeads, s.kvSeq, s.vHeadSize} {
    const double scale = cfg.scale > 0 ? cfg.scale : 1.0 / std::sqrt(static_cast<double>(s.headSize));
    // Q and K are each scaled by sqrt(scale) (in T) before the product, as the ONNX function.
    sqrtScale_ = static_cast<T>(std::sqrt(scale));
  }

  //! Copies past + new keys/values into present_key / present_value when requested.
  void writePresent() const {
    writePresentOne(1, kPastKey, kK, kLayout_);
    writePresentOne(2, kPastValue, kV, vLayout_);
  }

  //! Computes every query row of the (batch, q_head) slices [begin, end).
  void run(int64_t begin, int64_t end) const {
    const int64_t total = s_.total(), E = s_.headSize, Ev = s_.vHeadSize;
    std::vector<double> bias(total), logits(total), probs(total), acc(Ev);
    std::vector<T> qRow(E);
    T* y = io_.out[0].as<T>();
    T* qkOut = io_.out.size() > 3 && io_.out[3].data ? io_.out[3].as<T>() : nullptr;
    const HeadLayout yLayout{s_.is3d, s_.qHeads, s_.qSeq, Ev};
    const int64_t group = s_.qHeads / s_.kvHeads;
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / s_.qHeads, h = bh % s_.qHeads, kh = h / group;
      for (int64_t i = 0; i < s_.qSeq; ++i) {
        const T* q = io_.in[kQ].as<T>() + qLayout_.row(b, h, i);
        for (int64_t e = 0; e < E; ++e) qRow[e] = static_cast<T>(q[e] * sqrtScale_);
        bias_.row(b, h, i, bias.data());
        T* qkRow = qkOut ? qkOut + ((b * s_.qHeads + h) * s_.qSeq + i) * total : nullptr;
        scores(b, kh, qRow.data(), bias.data(), logits.data(), qkRow);
        softmax(bias.data(), logits.data(), probs.data());
        if (qkRow && cfg_.qkMode == 3)
          for (int64_t j = 0; j < total; ++j) qkRow[j] = static_cast<T>(probs[j]);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < total; ++j) {
          double pj = static_cast<T>(probs[j]);  // the probabilities are cast to T before P @ V
          if (pj == 0) continue;
          const T* v = keyOrValue(kPastValue, kV, vLayout_, b, kh, j);
          for (int64_t e = 0; e < Ev; ++e) acc[e] += pj * static_cast<double>(v[e]);
        }
        T* yr = y + yLayout.row(b, h, i);
        for (int64_t e = 0; e < Ev; ++e) yr[e] = static_cast<T>(acc[e]);
      }
    }
  }

 private:
  //! Row j of the concatenated (past, new) keys or values of kv head `kh`.
  const T* keyOrValue(size_t pastIn, size_t newIn, const HeadLayout& lay, int64_t b, int64_t kh, int64_t j) const {
    if (j < s_.pastSeq) return io_.in[pastIn].as<T>() + ((b * s_.kvHeads + kh) * s_.pastSeq + j) * lay.width;
    return io_.in[newIn].as<T>() + lay.row(b, kh, j - s_.pastSeq);
  }

  //! logits = softcap(qRow . K^T) + bias; fills the qk_matmul_output row for modes 0..2.
  void scores(int64_t b, int64_t kh, const T* qRow, const double* bias, double* logits, T* qkRow) const {
    const int64_t total = s_.total(), E = s_.headSize;
    for (int64_t j = 0; j < total; ++j) {
      const T* k = keyOrValue(kPastKey, kK, kLayout_, b, kh, j);
      double dot = 0;
      for (int64_t e = 0; e < E; ++e) dot += static_cast<double>(qRow[e]) * static_cast<double>(static_cast<T>(k[e] * sqrtScale_));
      double raw = static_cast<T>(dot);
      double capped = cfg_.softcap > 0 ? cfg_.softcap * std::tanh(raw / cfg_.softcap) : raw;
      logits[j] = capped + bias[j];
      if (qkRow && cfg_.qkMode < 3) qkRow[j] = static_cast<T>(cfg_.qkMode == 0 ? raw : (cfg_.qkMode == 1 ? capped : logits[j]));
    }
  }

  //! Softmax in the requested precision; a row whose bias is -inf everywhere is all zero.
  void softmax(const double* bias, double* logits, double* probs) const {
    const int64_t total = s_.total();
    const int64_t prec = cfg_.softmaxPrecision != 0 ? cfg_.softmaxPrecision : (std::is_same_v<T, float> ? 1 : 11);
    bool fullyMasked = true;
    double mx = kNegInf;
    for (int64_t j = 0; j < total; ++j) {
      fullyMasked = fullyMasked && bias[j] == kNegInf;
      logits[j] = roundTo(prec, logits[j]);
      mx = std::max(mx, logits[j]);
      if (std::isnan(logits[j])) mx = logits[j];
    }
    if (std::isnan(mx)) {
      for (int64_t j = 0; j < total; ++j) probs[j] = std::numeric_limits<double>::quiet_NaN();
    } else {
      const double safeMax = mx == kNegInf ? 0.0 : mx;
      double sum = 0;
      for (int64_t j = 0; j < total; ++j) sum += probs[j] = std::exp(logits[j] - safeMax);
      if (sum == 0) sum = 1;
      for (int64_t j = 0; j < total; ++j) probs[j] = roundTo(prec, probs[j] / sum);
    }
    if (fullyMasked) std::fill(probs, probs + total, 0.0);
  }

  void writePresentOne(size_t out, size_t pastIn, size_t newIn, const HeadLayout& lay) const {
    if (io_.out.size() <= out || !io_.out[out].data) return;
    T* dst = io_.out[out].as<T>();
    const int64_t total = s_.total();
    for (int64_t b = 0; b < s_.batch; ++b)
      for (int64_t kh = 0; kh < s_.kvHeads; ++kh)
        for (int64_t j = 0; j < total; ++j) {
          const T* src = keyOrValue(pastIn, newIn, lay, b, kh, j);
          std::copy(src, src + lay.width, dst + ((b * s_.kvHeads + kh) * total + j) * lay.width);
        }
  }

  const KernelIO& io_;
  const AttentionConfig& cfg_;
  const AttentionShape& s_;
  AttentionBias bias_;
  HeadLayout qLayout_, kLayout_, vLayout_;
  T sqrtScale_;
};

template <typename T>
void runAttention(const LayerDesc& l, const KernelIO& io) {
  const AttentionConfig cfg = parseAttentionConfig(l);
  AttentionShape s = attentionShape(l);  // `l` is concrete: every dim is known
  checkPastAndNonpad(l, s, io.in[kQ].type);
  AttentionRunner<T> runner(io, cfg, s);
  runner.writePresent();
  const int64_t slices = s.batch * s.qHeads;
  if (io.pool) io.pool->parallelFor(slices, 1, [&](int64_t b, int64_t e) { runner.run(b, e); });
  else runner.run(0, slices);
}

//! Strided Q/K/V: copies the views out as [B, H, S, D] tensors, runs the plain computation, and
//! writes the output through its strides.
template <typename T>
void runViewAttention(const LayerDesc& l, const KernelIO& io) {
  const QkvViews v = parseQkvViews(l);
  auto gather = [&](const TensorView& buf, const std::array<int64_t, 4>& view, const Dims& dims) {
    HostTensor t(io.in[kQ].type, dims);
    const T* src = buf.as<T>();
    T* dst = t.as<T>();
    for (int64_t b = 0; b < dims[0]; ++b)
      for (int64_t h = 0; h < dims[1]; ++h)
        for (int64_t r = 0; r < dims[2]; ++r, dst += dims[3]) {
          const T* row = src + view[0] + b * view[1] + h * view[2] + r * view[3];
          std::copy(row, row + dims[3], dst);
        }
    return t;
  };
  HostTensor q = gather(io.in[kQ], v.q, v.qDims()), k = gather(io.in[kK], v.k, v.kDims()), vv = gather(io.in[kV], v.v, v.vDims());
  HostTensor out(io.in[kQ].type, {v.b, v.h, v.sq, v.dv});
  LayerDesc c = l;
  KernelIO cio = io;
  const HostTensor* parts[3] = {&q, &k, &vv};
  for (size_t i = 0; i < 3; ++i) {
    c.inputs[i].dims = parts[i]->dims();
    cio.in[i] = TensorView{const_cast<void*>(parts[i]->data()), parts[i]->type(), parts[i]->dims(), parts[i]->count()};
  }
  c.outputs.resize(1);
  c.outputs[0].dims = out.dims();
  cio.out.resize(1);
  cio.out[0] = TensorView{out.data(), out.type(), out.dims(), out.count()};
  runAttention<T>(c, cio);
  T* y = io.out[0].as<T>();
  const T* o = out.as<T>();
  const std::array<int64_t, 4> st = v.outStrides();
  for (int64_t b = 0; b < v.b; ++b)  // O[b, h, s, :] to its place in the output
    for (int64_t h = 0; h < v.h; ++h)
      for (int64_t r = 0; r < v.sq; ++r)
        std::copy(o + ((b * v.h + h) * v.sq + r) * v.dv, o + ((b * v.h + h) * v.sq + r + 1) * v.dv, y + b * st[0] + h * st[1] + r * st[2]);
}

void refAttention(const LayerDesc& l, const KernelIO& io) {
  if (hasQkvViews(*l.attrs)) {
    return dispatchRefFloat(l, io.in[kQ].type, [&](auto tag) { runViewAttention<decltype(tag)>(l, io); });
  }
  dispatchRefFloat(l, io.in[kQ].type, [&](auto tag) { runAttention<decltype(tag)>(l, io); });
}

// =============================================================================================
// RotaryEmbedding

struct RotaryShape {
  int64_t batch, heads, seq, headSize, rotaryDim;
  bool is3d;
};

void inferRotary(LayerDesc& l) {
  requireInputs(l, 3, 4);
  checkInputSizes(l);
  const DataType t = l.inputs[0].type;
  if (!isFloat(t)) opError(l, std::string("X must be a floating-point tensor, got ") + toString(t));
  if (l.inputs[1].type != t || l.inputs[2].type != t) opError(l, "cos_cache and sin_cache must have X's type");
  const Dims& x = l.inputs[0].dims;
  if (x.size() != 3 && x.size() != 4) opError(l, "X must have rank 3 or 4, got " + toString(x));
  const int64_t interleaved = l.attrs->getInt("interleaved", 0);
  if (interleaved != 0 && interleaved != 1) opError(l, "interleaved must be 0 or 1");
  const int64_t numHeads = l.attrs->getInt("num_heads", 0);
  if (numHeads < 0) opError(l, "num_heads must be positive");
  int64_t headSize, batch = x[0], seq;
  const RotaryColumns cols = rotaryColumns(l);
  if (cols.set() && x.size() != 3) opError(l, "a column range needs a 3-D X, got " + toString(x));
  if (cols.set() && x[2] >= 0 && cols.offset + cols.width > x[2])
    opError(l, "columns [" + std::to_string(cols.offset) + ", " + std::to_string(cols.offset + cols.width) + ") exceed X's rows of " +
                   std::to_string(x[2]));
  Dims y = x;  // the output: X, or its column range
  if (cols.set()) y[2] = cols.width;
  if (x.size() == 3) {
    if (numHeads == 0) opError(l, "3-D input needs the num_heads attribute");
    headSize = exactDiv(l, y[2], numHeads, "the hidden size");
    seq = x[1];
  } else {
    headSize = x[3];
    seq = x[2];
  }
  int64_t rd = l.attrs->getInt("rotary_embedding_dim", 0);
  if (rd < 0) opError(l, "rotary_embedding_dim must be >= 0");
  if (rd == 0) rd = headSize;
  if (rd >= 0 && headSize >= 0 && (rd > headSize || rd % 2 != 0))
    opError(l, "rotary_embedding_dim (" + std::to_string(rd) + ") must be even and at most the head size (" + std::to_string(headSize) + ")");
  const int64_t half = rd < 0 ? -1 : rd / 2;
  if (l.present(3)) {
    if (l.inputs[3].type != DataType::kINT64) opError(l, "position_ids must be int64");
    requireDims(l, 3, {batch, seq}, "position_ids");
    if (l.inputs[1].dims.size() != 2) opError(l, "cos_cache must have rank 2 with position_ids, got " + toString(l.inputs[1].dims));
    requireDims(l, 1, {-1, half}, "cos_cache");
    requireDims(l, 2, l.inputs[1].dims, "sin_cache");
  } else {
    requireDims(l, 1, {batch, seq, half}, "cos_cache");
    requireDims(l, 2, {batch, seq, half}, "sin_cache");
  }
  setOutput(l, 0, t, y);
}

template <typename T>
void runRotary(const LayerDesc& l, const KernelIO& io) {
  const Dims& x = io.in[0].dims;
  RotaryShape s;
  s.is3d = x.size() == 3;
  s.batch = x[0];
  s.heads = s.is3d ? l.attrs->getInt("num_heads", 0) : x[1];
  s.seq = s.is3d ? x[1] : x[2];
  // A column range: X's rows are xRow elements apart, the rotated part starts xOffset into each.
  const RotaryColumns cols = rotaryColumns(l);
  const int64_t width = cols.set() ? cols.width : (s.is3d ? x[2] : 0);
  const int64_t xRow = s.is3d ? x[2] : 0, xOffset = cols.set() ? cols.offset : 0;
  s.headSize = s.is3d ? width / s.heads : x[3];
  s.rotaryDim = l.attrs->getInt("rotary_embedding_dim", 0);
  if (s.rotaryDim == 0) s.rotaryDim = s.headSize;
  const bool interleaved = l.attrs->getInt("interleaved", 0) != 0;
  const int64_t half = s.rotaryDim / 2;
  const T* in = io.in[0].as<T>();
  const T* cosC = io.in[1].as<T>();
  const T* sinC = io.in[2].as<T>();
  const int64_t* pos = io.in.size() > 3 && io.in[3].data ? io.in[3].as<int64_t>() : nullptr;
  const int64_t maxPos = pos ? io.in[1].dims[0] : 0;
  T* out = io.out[0].as<T>();
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t t = 0; t < s.seq; ++t) {
      int64_t cacheRow = b * s.seq + t;
      if (pos) {
        cacheRow = pos[b * s.seq + t];
        if (cacheRow < 0 || cacheRow >= maxPos)
          opError(l, "position id " + std::to_string(cacheRow) + " is outside the cache [0, " + std::to_string(maxPos) + ")");
      }
      const T* c = cosC + cacheRow * half;
      const T* sn = sinC + cacheRow * half;
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t off = s.is3d ? (b * s.seq + t) * s.heads * s.headSize + h * s.headSize
                                   : ((b * s.heads + h) * s.seq + t) * s.headSize;
        const T* xi = in + (s.is3d ? (b * s.seq + t) * xRow + xOffset + h * s.headSize : off);
        T* yo = out + off;
        for (int64_t k = 0; k < half; ++k) {
          // Pairs (2k, 2k+1) when interleaved, (k, k + half) otherwise.
          const int64_t a = interleaved ? 2 * k : k, bIdx = interleaved ? 2 * k + 1 : k + half;
          const T x1 = xi[a], x2 = xi[bIdx];
          yo[a] = c[k] * x1 - sn[k] * x2;
          yo[bIdx] = sn[k] * x1 + c[k] * x2;
        }
        std::copy(xi + s.rotaryDim, xi + s.headSize, yo + s.rotaryDim);
      }
    }
}

void refRotary(const LayerDesc& l, const KernelIO& io) {
  dispatchRefFloat(l, io.in[0].type, [&](auto tag) { runRotary<decltype(tag)>(l, io); });
}

}  // namespace

void registerAttentionNormOps(OpRegistry& r);  // attention_norms.cpp

void registerAttentionOps(OpRegistry& r) {
  OpDef att;
  att.name = "Attention";
  att.infer = inferAttention;
  att.ref = refAttention;
  att.minOpset = 23;
  r.add(att);

  OpDef rope;
  rope.name = "RotaryEmbedding";
  rope.infer = inferRotary;
  rope.ref = refRotary;
  rope.minOpset = 23;
  r.add(rope);

  registerAttentionNormOps(r);
}

}  // namespace kiln
