// kiln's strided Attention inputs (set by the GPU attention fusion, builder/passes/fuse_attention.cpp):
// Q, K and V are read in place from the buffers an exporter's head-splitting data movement started
// from (Reshape / Transpose / Gather / Split / Slice chains, e.g. one packed QKV projection), instead
// of from copies. Attributes:
//   kiln_view_dims   [B, H, Sq, Skv, D, Dv]: the logical [B, H, S, D] Q, K, V
//   kiln_q_view, kiln_k_view, kiln_v_view   [offset, stride_b, stride_h, stride_s] in elements of
//                    the Q / K / V input buffers (any shape; the head dim is contiguous)
//   kiln_o_view      [stride_b, stride_h, stride_s] and kiln_o_dims (the output's dims): the
//                    output holds O[b, h, s, :] at b*stride_b + h*stride_h + s*stride_s (heads
//                    merged back, sequence-first layouts: the exporter's data movement after the
//                    attention done by the write); without them the output is [B, H, Sq, Dv]
#pragma once
#include <array>
#include <string>

#include "ir/layer_desc.h"
#include "ops/op_util.h"

namespace kiln {

struct QkvViews {
  int64_t b = 0, h = 0, sq = 0, skv = 0, d = 0, dv = 0;
  std::array<int64_t, 4> q{}, k{}, v{};  //!< offset, stride b, stride h, stride s
  bool outView = false;
  std::array<int64_t, 3> o{};  //!< output strides (b, h, s) when outView
  Dims oDims;
  Dims qDims() const { return {b, h, sq, d}; }
  Dims kDims() const { return {b, h, skv, d}; }
  Dims vDims() const { return {b, h, skv, dv}; }
  Dims outDims() const { return outView ? oDims : Dims{b, h, sq, dv}; }
  //! Output strides of (b, h, s, d).
  std::array<int64_t, 4> outStrides() const {
    return outView ? std::array<int64_t, 4>{o[0], o[1], o[2], 1} : std::array<int64_t, 4>{h * sq * dv, sq * dv, dv, 1};
  }
};

inline bool hasQkvViews(const Attributes& a) { return a.has("kiln_view_dims"); }

//! Parses and checks the view attributes: positive sizes, non-negative offsets and strides, and
//! (for inputs of known size) every element inside its buffer.
inline QkvViews parseQkvViews(const LayerDesc& l) {
  const Attributes& a = *l.attrs;
  const std::vector<int64_t> d = a.getInts("kiln_view_dims");
  if (d.size() != 6) opError(l, "kiln_view_dims must hold 6 sizes");
  for (int64_t x : d)
    if (x <= 0) opError(l, "kiln_view_dims must be positive");
  QkvViews v;
  v.b = d[0], v.h = d[1], v.sq = d[2], v.skv = d[3], v.d = d[4], v.dv = d[5];
  if (a.has("kiln_o_view")) {
    const std::vector<int64_t> o = a.getInts("kiln_o_view");
    v.oDims = a.getInts("kiln_o_dims");
    if (o.size() != 3 || v.oDims.empty()) opError(l, "kiln_o_view needs 3 strides and kiln_o_dims");
    for (int64_t x : v.oDims)
      if (x <= 0) opError(l, "kiln_o_dims must be positive");
    int64_t last = v.dv - 1;
    const int64_t sizes[3] = {v.b, v.h, v.sq};
    for (int k = 0; k < 3; ++k) {
      if (o[k] < 0) opError(l, "kiln_o_view must not be negative");
      v.o[k] = o[k];
      last += (sizes[k] - 1) * o[k];
    }
    if (volume(v.oDims) != v.b * v.h * v.sq * v.dv || last >= volume(v.oDims))
      opError(l, "kiln_o_view does not fit kiln_o_dims " + toString(v.oDims));
    v.outView = true;
  }
  const char* names[3] = {"kiln_q_view", "kiln_k_view", "kiln_v_view"};
  std::array<int64_t, 4>* views[3] = {&v.q, &v.k, &v.v};
  const Dims shapes[3] = {v.qDims(), v.kDims(), v.vDims()};
  for (int i = 0; i < 3; ++i) {
    const std::vector<int64_t> s = a.getInts(names[i]);
    if (s.size() != 4) opError(l, std::string(names[i]) + " must hold an offset and 3 strides");
    int64_t last = s[0];
    for (int k = 0; k < 4; ++k) {
      if (s[k] < 0) opError(l, std::string(names[i]) + " must not be negative");
      (*views[i])[k] = s[k];
    }
    for (int k = 0; k < 3; ++k) last += (shapes[i][k] - 1) * s[k + 1];
    last += shapes[i][3] - 1;
    if (l.inputs.size() > static_cast<size_t>(i) && isStatic(l.inputs[i].dims) && last >= volume(l.inputs[i].dims))
      opError(l, std::string(names[i]) + " reaches past the end of its input " + toString(l.inputs[i].dims));
  }
  return v;
}

}  // namespace kiln
