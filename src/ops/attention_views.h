// kiln's strided Attention inputs (set by the GPU attention fusion, builder/passes/fuse_attention.cpp):
// Q, K and V are read in place from the buffers an exporter's head-splitting data movement started
// from (Reshape / Transpose / Gather / Split / Slice chains, e.g. one packed QKV projection), instead
// of from copies. Attributes (written and parsed by ops/fused_attrs.h):
//   kiln_view_dims   [B, H, Sq, Skv, D, Dv]: the logical [B, H, S, D] Q, K, V
//   kiln_q_view, kiln_k_view, kiln_v_view   [offset, stride_b, stride_h, stride_s] in elements of
//                    the Q / K / V input buffers (any shape; the head dim is contiguous)
//   kiln_o_view      [stride_b, stride_h, stride_s] and kiln_o_dims (the output's dims): the
//                    output holds O[b, h, s, :] at b*stride_b + h*stride_h + s*stride_s (heads
//                    merged back, sequence-first layouts: the exporter's data movement after the
//                    attention done by the write); without them the output is [B, H, Sq, Dv]
//   kiln_view_exprs  dynamic shapes: how each value above follows from the run's dims, 4 ints per
//                    value in viewValues' order, (c, ref, k0, k1) = c * prod(dims[k0:k1]) of the
//                    Q (ref 0), K (1) or V (2) input buffer or of the output (3, its kiln_o_dims);
//                    ref -1: the constant c. The plain attributes then hold -1 where a value is
//                    an expression. Fitted by the fusion at the profile's sample shapes
//                    (builder/passes/view_exprs.cpp) and checked again at every shape the layer runs.
#pragma once
#include <array>
#include <vector>

#include <string>

#include "kiln/types.h"

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

//! The values of the view attributes in kiln_view_exprs' order: the view dims (6), the Q, K and V
//! views (4 each), then, with an output view, its dims and its 3 strides.
std::vector<int64_t> viewValues(const QkvViews& v);
//! viewValues' inverse; `oRank`: the output view's rank (0: none). Throws Error on a size mismatch.
QkvViews viewsFromValues(const std::vector<int64_t>& values, size_t oRank);

constexpr size_t kViewExprInts = 4;  //!< c, ref, k0, k1
constexpr int64_t kViewRefOutput = 3;
//! One expression of kiln_view_exprs over `refs` (Q, K, V input dims and the output dims, which
//! may be null before they are known); -1 when a dim it reads is unknown (-1) or absent. Throws
//! Error (naming `what`) when the expression is malformed.
int64_t evalViewExpr(const int64_t* e, const std::array<const Dims*, 4>& refs, const std::string& what);

}  // namespace kiln
