// Q/K/V/O geometry of an Attention layer for the CUDA tactics (attention_cuda.cpp: flash kernels,
// attention_cudnn.cpp: cuDNN SDPA): 4-D [B, H, S, D] tensors or 3-D [B, S, H*D] ones (heads
// interleaved in the hidden dim), both described as logical [B, H, S, D] with element strides.
#pragma once
#include <string>

#include "backends/backend.h"
#include "backends/cuda/attention_flash.h"
#include "ops/fused_attrs.h"

namespace kiln::cuda {

constexpr size_t kAttnQ = 0, kAttnK = 1, kAttnV = 2, kAttnMask = 3;

//! Head counts and sizes: from the dims of 4-D inputs, from q_num_heads/kv_num_heads for 3-D
//! ones. False for other ranks or unknown/indivisible hidden dims (build-time dims may be -1).
struct HeadDims {
  bool is3d = false;
  int64_t qHeads = 0, kvHeads = 0, d = 0, dv = 0;
};
inline bool headDims(const LayerDesc& l, HeadDims& h) {
  if (hasQkvViews(*l.attrs)) {  // strided Q/K/V (ops/attention_views.h)
    try {
      const QkvViews v = parseQkvViews(l);
      h = HeadDims{false, v.h, v.h, v.d, v.dv};
      return v.h > 0 && v.d > 0 && v.dv > 0;
    } catch (const Error&) {
      return false;
    }
  }
  const Dims &q = l.inputs[kAttnQ].dims, &k = l.inputs[kAttnK].dims, &v = l.inputs[kAttnV].dims;
  if (q.size() == 4 && k.size() == 4 && v.size() == 4) {
    h = HeadDims{false, q[1], k[1] == v[1] ? k[1] : -1, q[3] == k[3] ? q[3] : -1, v[3]};
    return true;
  }
  if (q.size() != 3 || k.size() != 3 || v.size() != 3) return false;
  h.is3d = true;
  h.qHeads = l.attrs->getInt("q_num_heads", 0);
  h.kvHeads = l.attrs->getInt("kv_num_heads", 0);
  if (h.qHeads <= 0 || h.kvHeads <= 0 || q[2] <= 0 || k[2] <= 0 || v[2] <= 0) return false;
  if (q[2] % h.qHeads || k[2] % h.kvHeads || v[2] % h.kvHeads || q[2] / h.qHeads != k[2] / h.kvHeads) return false;
  h.d = q[2] / h.qHeads;
  h.dv = v[2] / h.kvHeads;
  return true;
}

//! The mask element type the kernels read (kNone: a type no kernel reads).
inline FlashMask flashMaskOf(DataType t) {
  switch (t) {
    case DataType::kFLOAT: return FlashMask::kFloat;
    case DataType::kHALF: return FlashMask::kHalf;
    case DataType::kBF16: return FlashMask::kBf16;
    case DataType::kBOOL: return FlashMask::kBool;
    default: return FlashMask::kNone;
  }
}

//! An attn_mask of dims `md` (rank 1..4) as 4-D (leading 1s) with its element strides for batch,
//! head and query row (0 where it broadcasts); keys have stride 1, and `len` of them are given
//! (ONNX short masks: keys past it are masked).
struct MaskLayout {
  Dims dims4;
  int64_t strideB = 0, strideH = 0, strideQ = 0, len = 0;
};
inline MaskLayout maskLayout(const Dims& md) {
  MaskLayout m;
  m.dims4.assign(4 - md.size(), 1);
  m.dims4.insert(m.dims4.end(), md.begin(), md.end());
  const Dims& d = m.dims4;
  m.len = d[3];
  m.strideQ = d[2] == 1 ? 0 : d[3];
  m.strideH = d[1] == 1 ? 0 : d[2] * d[3];
  m.strideB = d[0] == 1 ? 0 : d[1] * d[2] * d[3];
  return m;
}

//! Concrete geometry: logical [B, H, S, D] dims of Q, K, V, O and their strides.
struct AttentionGeometry {
  Dims q, k, v, o;
  FlashStrides qs, ks, vs, os;
  int64_t qOffset = 0, kOffset = 0, vOffset = 0;  //!< elements into the Q/K/V buffers (strided views)
};

//! Throws UnsupportedError (naming the layer) unless Q/K/V are [B, H, S, D] or [B, S, H*D] with
//! equal batch counts, query heads a multiple of the K/V heads (GQA/MQA) and matching sizes.
inline AttentionGeometry attentionGeometry(const LayerDesc& l) {
  auto fail = [&](const std::string& m) { throw UnsupportedError("layer '" + l.name + "' (Attention): " + m); };
  if (hasQkvViews(*l.attrs)) {
    const QkvViews v = parseQkvViews(l);
    AttentionGeometry g;
    g.q = v.qDims(), g.k = v.kDims(), g.v = v.vDims(), g.o = {v.b, v.h, v.sq, v.dv};
    g.qs = {v.q[1], v.q[2], v.q[3]}, g.ks = {v.k[1], v.k[2], v.k[3]}, g.vs = {v.v[1], v.v[2], v.v[3]};
    g.qOffset = v.q[0], g.kOffset = v.k[0], g.vOffset = v.v[0];
    const std::array<int64_t, 4> os = v.outStrides();
    g.os = {os[0], os[1], os[2]};
    return g;
  }
  const Dims &qIn = l.inputs[kAttnQ].dims, &kIn = l.inputs[kAttnK].dims, &vIn = l.inputs[kAttnV].dims;
  const std::string shapes = "Q " + toString(qIn) + ", K " + toString(kIn) + " and V " + toString(vIn);
  HeadDims h;
  if (!headDims(l, h) || h.qHeads <= 0 || h.kvHeads <= 0 || h.qHeads % h.kvHeads != 0 || h.d <= 0 || h.dv <= 0)
    fail(shapes + " are not [B, H, S, D] or [B, S, H*D] with query heads a multiple of the K/V heads");
  auto view = [&](const Dims& x, int64_t heads, int64_t size, FlashStrides& st) {
    if (!h.is3d) {
      st = {x[1] * x[2] * x[3], x[2] * x[3], x[3]};
      return x;
    }
    st = {x[1] * x[2], size, x[2]};
    return Dims{x[0], heads, x[1], size};
  };
  AttentionGeometry g;
  g.q = view(qIn, h.qHeads, h.d, g.qs);
  g.k = view(kIn, h.kvHeads, h.d, g.ks);
  g.v = view(vIn, h.kvHeads, h.dv, g.vs);
  g.o = {g.q[0], g.q[1], g.q[2], g.v[3]};
  if (h.is3d) g.os = {g.o[2] * g.o[1] * g.o[3], g.o[3], g.o[1] * g.o[3]};
  else g.os = {g.o[1] * g.o[2] * g.o[3], g.o[2] * g.o[3], g.o[3]};
  const Dims &q = g.q, &k = g.k, &v = g.v;
  if (q[0] != k[0] || k[0] != v[0] || k[1] <= 0 || q[1] % k[1] != 0 || k[1] != v[1] || q[3] != k[3] || k[2] != v[2])
    fail(shapes + " need equal batch counts and query heads a multiple of the K/V heads");
  return g;
}

}  // namespace kiln::cuda
