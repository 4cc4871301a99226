// The fusion contract: the kiln-internal attributes that builder passes and ONNX normalizers write
// on layers and that reference kernels, tactics and the runtime read (docs/internals.md, "The
// fusion contract"). Plans store them as ordinary attributes, so every name below is part of the
// plan format: change one only with a plan format bump (src/plan/plan_file.cpp). Everything else
// uses the typed accessors, never the names.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/layer_desc.h"
#include "ops/activation.h"
#include "ops/attention_views.h"

namespace kiln {

//! The stored names (the only place they are spelled).
namespace attr {
// Fused activation of Conv / ConvTranspose / Gemm / MatMul (fuse_activation).
constexpr const char* kActivation = "kiln_activation";  //!< string: an ActivationInfo name
constexpr const char* kActAlpha = "kiln_act_alpha";     //!< float, when the kind uses alpha
constexpr const char* kActBeta = "kiln_act_beta";       //!< float, when the kind uses beta
// Physical layouts (cpu_layout / gpu_layout passes; LayoutConvert's own attributes).
constexpr const char* kLayoutIn = "kiln_layout_in";    //!< string (ops/conv_layout.h), X
constexpr const char* kLayoutOut = "kiln_layout_out";  //!< string, Y and Conv's residual
// LayerNormalization with a residual 4th input (fuse_skip_layernorm).
constexpr const char* kSkip = "kiln_skip";  //!< int 1
// Older-opset semantics kept by the ONNX normalizers (ops/normalization.cpp).
constexpr const char* kPerActivation = "kiln_per_activation";     //!< int 1: BatchNormalization-7 spatial=0
constexpr const char* kPerGroupAffine = "kiln_per_group_affine";  //!< int 1: GroupNormalization < 21
constexpr const char* kCoerce2d = "kiln_coerce_2d";               //!< int 1: Softmax family < 13
// QLinearConv's float output type when y_scale is omitted (assign_precision: the engine's
// float16 / bfloat16 on the GPU); float32 when absent.
constexpr const char* kFloatOutType = "kiln_float_out_type";  //!< int: ONNX type code 1, 10 or 16
// Precision pin (builder: BuilderFlag::kTF32 off on the GPU).
constexpr const char* kTf32 = "kiln_tf32";  //!< int 0: no TF32 for this float32 matmul/conv
// Strided Attention inputs and output (fuse_attention; ops/attention_views.h).
constexpr const char* kViewDims = "kiln_view_dims";  //!< ints [B, H, Sq, Skv, D, Dv]
constexpr const char* kQView = "kiln_q_view";        //!< ints [offset, stride_b, stride_h, stride_s]
constexpr const char* kKView = "kiln_k_view";
constexpr const char* kVView = "kiln_v_view";
constexpr const char* kOView = "kiln_o_view";  //!< ints [stride_b, stride_h, stride_s]
constexpr const char* kODims = "kiln_o_dims";  //!< ints: the output's dims
constexpr const char* kViewExprs = "kiln_view_exprs";  //!< ints: dynamic shapes, 4 per value (attention_views.h)
// RotaryEmbedding reading one column range of a packed 3-D X (rotary_packed_columns).
constexpr const char* kRotaryColumns = "kiln_rotary_columns";  //!< ints [offset, width]
// PointwiseChain's program (fuse_pointwise), one entry per step.
constexpr const char* kChainSteps = "steps";      //!< strings: op names
constexpr const char* kChainOperand = "operand";  //!< ints: input index of a binary step's operand, -1
constexpr const char* kChainSwapped = "swapped";  //!< ints: 1 when the chain value is the right operand
constexpr const char* kChainAlpha = "alpha";      //!< floats: activation parameters
constexpr const char* kChainBeta = "beta";        //!< floats
}  // namespace attr

// Fused activation. Absent means ActKind::kNone.
bool hasFusedActivation(const Attributes& a);
//! Throws kiln::Error on an unknown kind name.
Activation fusedActivation(const Attributes& a);
//! Writes the kind and only the parameters it uses (as fuse_activation always has).
void setFusedActivation(Attributes& a, const Activation& act);
//! The kind named `name` (an ActivationInfo name); false when there is none.
bool activationKindOf(const std::string& name, ActKind* kind);

// Physical layouts: a channel block (ops/conv_layout.h) per side; absent means plain (1).
//! X's block: 1 when absent, 0 when the value is not a known layout.
int64_t inLayoutBlock(const LayerDesc& l);
//! Y's (and Conv's residual's) block, like inLayoutBlock.
int64_t outLayoutBlock(const LayerDesc& l);
//! True when the layer reads and writes plain NCHW (no layout attributes, or "nchw").
bool hasPlainLayouts(const LayerDesc& l);
//! An elementwise layer that computes in a stored layout (layout_planner's transparent layers): X and
//! Y in one non-plain layout, Y of rank 4, every input of Y's shape or layout-invariant
//! (layoutInvariantDims). Kernels that take such layers index physicalDims.
bool elementwiseInLayout(const LayerDesc& l);
//! Whether either side's layout is set.
bool hasLayouts(const Attributes& a);
//! The stored layout names ("nchw" when absent), for dumps.
std::string inLayoutName(const Attributes& a);
std::string outLayoutName(const Attributes& a);
//! Sets both sides (layoutName of each block; throws on a block no layout has).
void setLayouts(Attributes& a, int64_t inBlock, int64_t outBlock);

// Flags (absent means false).
bool hasSkipInput(const Attributes& a);  //!< LayerNormalization: Y = LN(X + R), R the 4th input
void setSkipInput(Attributes& a);
bool perActivationBatchNorm(const Attributes& a);  //!< statistics per activation, not per channel
void setPerActivationBatchNorm(Attributes& a);
bool perGroupAffine(const Attributes& a);  //!< GroupNormalization's scale/bias per group
void setPerGroupAffine(Attributes& a);
bool coercedTo2d(const Attributes& a);  //!< Softmax/LogSoftmax/Hardmax over [prod(<axis), prod(>=axis)]
void setCoercedTo2d(Attributes& a);

// Precision pins.
bool tf32Allowed(const Attributes& a);  //!< true unless pinned off
void disallowTf32(Attributes& a);

// RotaryEmbedding over columns [offset, offset + width) of each row of a 3-D X [B, S, W] (one part
// of a packed Q / K / V projection, read in place instead of through the Split that copied it):
// the op's X is then that [B, S, width] part, and so is its output.
struct RotaryColumns {
  int64_t offset = 0, width = -1;  //!< width -1: no column range (X whole)
  bool set() const { return width >= 0; }
};
//! Throws via opError unless it is two ints with offset >= 0, width > 0.
RotaryColumns rotaryColumns(const LayerDesc& l);
void setRotaryColumns(Attributes& a, const RotaryColumns& c);

// Attention views (ops/attention_views.h).
bool hasQkvViews(const Attributes& a);
//! Parses and checks the views: positive sizes, non-negative offsets and strides, and (for
//! inputs of known size) every element inside its buffer. Throws via opError. With
//! kiln_view_exprs the values come from the input dims; while some are unknown (-1, a dynamic
//! network at build time) those values are -1 and nothing is checked (viewsUnresolved).
QkvViews parseQkvViews(const LayerDesc& l);
//! Some value of `v` depends on dims not known yet.
bool viewsUnresolved(const QkvViews& v);
//! Writes `v` (the output view only when v.outView).
void setQkvViews(Attributes& a, const QkvViews& v);
//! Writes kiln_view_exprs (attention_views.h).
void setQkvViewExprs(Attributes& a, const std::vector<int64_t>& exprs);

// PointwiseChain's program as stored (validated by compilePointwise, ops/pointwise_chain.h).
struct PointwiseChainAttrs {
  std::vector<std::string> steps;
  std::vector<int64_t> operand, swapped;
  std::vector<float> alpha, beta;
};
PointwiseChainAttrs pointwiseChainAttrs(const Attributes& a);
//! The number of steps (a kernel's size limit), without reading the rest.
size_t pointwiseChainLength(const Attributes& a);
void setPointwiseChainAttrs(Attributes& a, const PointwiseChainAttrs& c);

}  // namespace kiln
