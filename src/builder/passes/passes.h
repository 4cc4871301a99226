// Graph optimization passes. Each is a small pattern -> replacement rule in its own file; each
// returns true when it changed the network. The network is kept topologically sorted and its
// shapes propagated between passes by the builder.
#pragma once
#include <functional>

#include "backends/backend.h"
#include "builder/passes/symbolic_dims.h"
#include "ops/fused_attrs.h"
#include "kiln/builder.h"
#include "kiln/network.h"

namespace kiln {

//! Dynamic networks: shape arithmetic (Shape -> Gather -> Concat -> Reshape/Expand targets) folded
//! into constant targets with 0 / -1 / 1, no-op views removed (fold_shape_arithmetic.cpp).
bool foldShapeArithmetic(Network& net, const InputSamples& samples);
//! Dynamic networks, after the fusions: a layer read only by Shape layers goes, each Shape reading
//! the same dims off the layer's input (fold_shape_arithmetic.cpp).
bool readShapesUpstream(Network& net, const InputSamples& samples);
//! Removes layers whose outputs were all folded to constants, then unreachable layers.
bool removeFoldedLayers(Network& net);
//! Layers with the same op, attributes and inputs (small constants by value) -> one; the others'
//! readers read its outputs (common subexpression elimination, merge_duplicate_layers.cpp).
bool mergeDuplicateLayers(Network& net);
//! (x + c1) + c2 -> x + (c1 + c2), (x * c1) * c2 -> x * (c1 * c2) for float32 constants whose
//! broadcast does not grow x (fold_constant_operands.cpp).
bool foldConstantOperands(Network& net);
//! Identity and same-type Cast layers (not network outputs) -> their readers read the input (elide_noops.cpp).
bool elideNoOps(Network& net);
//! Pow/ReduceMean/Add/Sqrt/Div(/Mul scale) (T5, LLaMA) -> RMSNormalization (fuse_rmsnorm.cpp).
bool fuseRmsNormPattern(Network& net);
//! x * cos + rotate_half(x) * sin (transformers' apply_rotary_pos_emb, constant caches) -> RotaryEmbedding (fuse_rotary.cpp).
//! `samples` (symbolic_dims.h): a dynamic network's sample shapes, at which run-time caches are checked.
bool fuseRotaryPattern(Network& net, const InputSamples& samples = {});
//! Reshape -> InstanceNormalization -> Reshape [-> Mul gamma] [-> Add beta] (GroupNorm as exported) -> GroupNormalization.
bool fuseGroupNormPattern(Network& net, const InputSamples& samples = {});
//! A two-operand Einsum that is a batched matrix product -> Transposes, Reshapes and one MatMul.
bool lowerEinsumToMatMul(Network& net);
//! Compress with a constant condition -> Gather with the kept indices (lower_compress.cpp).
bool lowerConstantCompress(Network& net);
//! Compress with a computed condition -> Gather(x, Reshape(NonZero(condition), [-1])).
bool lowerComputedCompress(Network& net);
//! Concat of constant step-1 Slices of one tensor along the Concat's axis (torch.roll as exported)
//! -> one Gather with the concatenated index ranges (lower_slice_concat.cpp).
bool lowerSliceConcat(Network& net);
//! Concat of strided Slices taking every phase of one tensor (Swin's patch merging, YOLOv5's Focus)
//! -> Reshape + Transpose + Reshape (lower_strided_slice_concat.cpp).
bool lowerStridedSliceConcat(Network& net);
//! Chains of data movement that only reorder rows (all dims but the last) -> one row Gather
//! (compose_row_moves.cpp).
bool composeRowMoves(Network& net);
//! Chains of Reshape-like layers and two or more Transposes that move data -> Reshape + one
//! Transpose + Reshape (compose_transposes.cpp).
bool composeTransposes(Network& net);
//! Batched MatMuls (and the transposes and scalar scales before them) over merged [B*H, ..] dims
//! -> the same over [B, H, ..], so torch.bmm attention is 4-D attention (lift_merged_heads.cpp).
bool liftMergedHeads(Network& net);
//! GPU: attention written as A P^T (EfficientViT) or over rank-3 scores (one head per row)
//! rewritten into the 4-D P V form the attention fusion matches (lift_attention_forms.cpp).
bool liftAttentionForms(Network& net);
//! GPU: a row permutation after a Gemm / MatMul by a constant weight, whose input is data movement,
//! moves onto that input (nn.MultiheadAttention's sequence-first out_proj; permute_rows_before_linear.cpp).
bool permuteRowsBeforeLinear(Network& net);
//! CPU: channel shuffles (Reshape -> Transpose of the two split axes -> Reshape) -> Gather with a
//! constant permutation; Slice / Split of a constant-index Gather -> Gathers of the selected
//! indices (fold_channel_shuffle.cpp).
bool foldChannelShuffle(Network& net);
//! Conv -> BatchNormalization (constant parameters): folds the BN into the conv's weights/bias.
bool foldBatchNormIntoConv(Network& net);
//! Other inference BatchNormalization (constant parameters) -> Mul(a[c]) -> Add(b[c]), for the
//! pointwise fusion and the layout passes (fold_batchnorm.cpp).
bool lowerBatchNormToScaleShift(Network& net);
//! Conv / MatMul (constant weights) -> Mul / Div / Add / Sub by a constant per output channel
//! (layer scale): folded into the weights and bias (fold_channel_scale.cpp).
bool foldChannelScale(Network& net);
//! The Erf form of GELU (x * 0.5 * (1 + erf(x / sqrt 2))) -> one Gelu layer.
bool fuseGeluPattern(Network& net);
//! GELU spelled any other way (fuse_gelu_by_value.cpp): an elementwise region that is a function
//! of one tensor and evaluates to the exact or the tanh GELU becomes one Gelu layer.
bool fuseGeluByValue(Network& net);
//! ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add -> LayerNormalization.
bool fuseLayerNormPattern(Network& net);
//! RotaryEmbedding of a head split (Reshape [B, S, H*D] -> [B, S, H, D], Transpose 0,2,1,3) -> the
//! RotaryEmbedding of the 3-D tensor (num_heads), split after it, so that the attention fusion's
//! 3-D form sees Q and K as head splits (rotary_before_head_split.cpp). `samples`: a dynamic
//! network's sample shapes, at which B and S must agree.
bool rotaryBeforeHeadSplit(Network& net, const InputSamples& samples = {});
//! Split over the head axis of Reshape [B, S, G*D] -> [B, S, G, D] -> Split of the 3-D tensor over
//! its last axis, then a head Reshape per part (split_before_head_reshape.cpp; fused-QKV exports).
bool splitBeforeHeadReshape(Network& net, const InputSamples& samples = {});
//! GPU: a fused Q / K / V projection viewed [B, S, H, G*D] and sliced per part (GPT-NeoX) gets its
//! weight columns regrouped part-major and becomes a Split of the 3-D projection + head Reshapes.
bool regroupQkvHeads(Network& net, const InputSamples& samples = {});
//! RotaryEmbeddings of a packed projection's parts (Split / Slice along the last axis) read their
//! column range of the packed rows instead (kiln_rotary_columns), where `supported` says a kernel
//! takes that form; the Split goes when nothing else reads it (rotary_packed_columns.cpp).
bool rotaryPackedColumns(Network& net, const std::function<bool(const Layer&)>& supported = {});
//! GPU: scaled-dot-product attention (MatMul, scale, mask, Softmax, MatMul) -> one Attention layer.
//! `supported` (optional) vetoes a fused Attention layer no kernel of the target backend runs.
//! `samples` (symbolic_dims.h): a dynamic network's sample shapes, at which the strided-view form
//! is traced and turned into expressions of the run's dims (view_exprs.h).
bool fuseAttention(Network& net, const std::function<bool(const Layer&)>& supported = {}, const InputSamples& samples = {});
//! Residual Add + LayerNormalization -> LayerNormalization with a skip input (kiln_skip; GPU).
//! `samples` (symbolic_dims.h): the sample input shapes of a dynamic network, so that dims equal
//! symbolically count as equal (also for fuseConvResidual and fusePointwiseChains).
bool fuseSkipLayerNorm(Network& net, const std::function<bool(const Layer&)>& supported = {}, const InputSamples& samples = {});
//! MatMul(A, constant W) -> Add(constant bias over the last dim) -> MatMul with a bias input.
bool fuseMatMulBias(Network& net);
//! An Attention's Q, K, V (or K, V) projections reading one input become one MatMul whose packed
//! output the Attention reads through strided views (pack_qkv_projections.cpp); `supported`: the
//! packed Attention still has a fused kernel.
bool packQkvProjections(Network& net, const std::function<bool(const Layer&)>& supported = {}, const InputSamples& samples = {});
//! Conv / GroupNormalization / InstanceNormalization -> Add(other tensor of the same shape) -> the
//! producer with a residual input (input 3), added before its fused activation.
bool fuseConvResidual(Network& net, const InputSamples& samples = {});
//! Conv/ConvTranspose/Gemm/MatMul -> activation -> one layer with kiln_activation.
//! `epilogueActsOnly` (GPU): a MatMul / Gemm takes only the activations its GEMM epilogue computes
//! when the activation's output goes on to an elementwise layer (the pointwise chain takes both),
//! except a Mul by a tensor of the MatMul's shape: a gated linear unit, which joins the MatMul
//! with its activation as input 3 (Y = act(A @ B + bias) * U).
bool fuseActivation(Network& net, bool epilogueActsOnly = false, const InputSamples& samples = {});
//! FP8 (after precision assignment): Fp8MatMul layers reading one float tensor share one
//! Fp8Quantize, and a quantization of an Fp8MatMul's output moves into it (y_scale), where the
//! backend has kernels for the result (fuse_fp8_quantize.cpp).
bool fuseFp8Quantize(Network& net, const std::function<bool(const LayerDesc&)>& supported);
//! Chains of float32 elementwise layers -> one PointwiseChain layer.
bool fusePointwiseChains(Network& net, const InputSamples& samples = {});
//! CPU: conv/pool chains exchange tensors in oneDNN's blocked layout, with LayoutConvert layers at the edges.
bool assignCpuLayouts(Network& net);
//! GPU: channels-last (nhwc) float16/bfloat16 tensors between conv / pooling layers (gpu_layout.cpp).
//! Runs after precision assignment (it needs the final types); BuilderConfig::setChannelsLast(false) skips it.
//! Dynamic dims are judged at samples[0] (the first profile's opt shape).
//! minBatch: the smallest batch (at opt) that goes channels-last (BuilderConfig::setChannelsLastMinBatch).
bool assignGpuLayouts(Network& net, Backend& backend, const InputSamples& samples = {}, int64_t minBatch = 1);
//! --fp16/--bf16: float layers compute in `target` (precision constraints obeyed when asked);
//! casts at the network's float inputs and outputs keep its interface types.
bool assignPrecision(Network& net, DataType target, bool obeyConstraints);
//! CPU: computes float16/bfloat16 layers in float32 by inserting Cast layers around them.
bool insertFloatCasts(Network& net, const std::function<bool(const Layer&)>& runsAsIs);

//! Helpers for passes.
//! The only consumer of t, or nullptr when t has several consumers or is a network output.
Layer* soleConsumer(const Network& net, const Tensor* t);
//! Records that `into` now also performs `from` (for --dumpLayerInfo).
void recordFusion(Layer* into, const Layer* from);
//! Records a layer a pass just created (no record yet) as standing for `originals`, in order: their
//! precision constraints (the widest wins) and --dumpLayerInfo records, without one of its own
//! (the new layer is not an op of the model).
void recordStandIn(Layer* into, const std::vector<const Layer*>& originals);
//! A constant float scalar: its value in *v.
bool scalarValue(const Tensor* t, double* v);
//! The values of a constant int32 / int64 tensor (indices, shapes, Slice bounds); false otherwise.
bool constantInts(const Tensor* t, std::vector<int64_t>* out);
//! A Slice's constant starts, ends, axes and steps (ONNX defaults: axes 0..k-1, steps 1), axes as
//! written (maybe negative); false when any is not constant or their lengths differ.
bool constantSliceArgs(const Layer* slice, std::vector<int64_t>* starts, std::vector<int64_t>* ends, std::vector<int64_t>* axes,
                       std::vector<int64_t>* steps);
//! A new one-output layer (named from `name`, made unique) whose output has the given type and dims.
Tensor* addTypedLayer(Network& net, const std::string& op, const std::vector<Tensor*>& in, Attributes a, const std::string& name,
                      DataType type, const Dims& dims);
//! addTypedLayer for a new layer that stands for `original` (a rewrite that keeps its meaning):
//! recordFusion carries over its precision constraint and --dumpLayerInfo record.
Tensor* addStandIn(Network& net, const Layer* original, const std::string& op, const std::vector<Tensor*>& in, Attributes a,
                   const std::string& name, DataType type, const Dims& dims);
//! A new int64 constant holding `dims` (a Reshape's shape input).
Tensor* addShapeConstant(Network& net, const std::string& name, const Dims& dims);
//! A new Reshape of `x` to `shape` (a new constant `name`_shape; 0 / -1 entries as ONNX's) whose
//! output has x's type and the dims `dims` (the shape resolved, -1 where not known at build).
Tensor* addReshape(Network& net, Tensor* x, const Dims& shape, const std::string& name, const Dims& dims);
//! addReshape to a fully known shape.
inline Tensor* addReshape(Network& net, Tensor* x, const Dims& dims, const std::string& name) {
  return addReshape(net, x, dims, name, dims);
}
//! For a two-input layer reading `t`, the other input (nullptr otherwise).
Tensor* otherInput(const Layer* l, const Tensor* t);
//! Whether t is a constant float that broadcasts against a tensor of rank `rank` along `axis` only:
//! its right-aligned dims are 1 except the one at `axis`, which is k (or, with `broadcastOk`, 1 or
//! absent).
bool constantAlongAxis(const Tensor* t, size_t rank, size_t axis, int64_t k, bool broadcastOk);
//! A ReduceMean over only the last axis, with keepdims.
bool meanOverLastAxis(const Layer* l);
//! Whether dims 0 and 1 of a and b agree (batch and sequence carried through a head view): equal
//! static values, or, dynamic, the same at every sample shape of the profiles (`sym` null or
//! without samples: unproven).
bool batchAndSequenceAgree(const Tensor* a, const Tensor* b, SymbolicDims* sym);
//! Applies `rewrite` to each layer in order; after a rewrite (which may add, remove and re-sort
//! layers) the walk starts again at the first layer, until a whole walk rewrites nothing. True when
//! anything was rewritten.
bool rewriteLayers(Network& net, const std::function<bool(Network&, Layer*)>& rewrite);
//! rewriteLayers for rewrites that query the profiles' sample dims: one SymbolicDims per walk (a
//! rewrite adds tensors the previous one was not built over).
bool rewriteLayers(Network& net, const InputSamples& samples, const std::function<bool(Network&, Layer*, SymbolicDims&)>& rewrite);
//! A Split of `x` over its last axis into parts of `sizes` (a new layer named from `name`), its
//! outputs typed as x with the last dim each part's size.
std::vector<Tensor*> addLastAxisSplit(Network& net, Tensor* x, const std::vector<int64_t>& sizes, const std::string& name);
//! Completes a pattern fusion: `fused` (a new synthetic layer) records the `dead` layers it
//! replaces, takes over `result` (its readers and its type/dims), and the dead layers go.
void replaceWithFused(Network& net, Layer* fused, const std::vector<Layer*>& dead, Tensor* result);

//! Whether `t` creates a kernel for `build` that reshapes to the concrete `at` (a library may still
//! have no kernel for these shapes and layouts, e.g. no cuDNN engine config builds): kiln::Error
//! from either step counts as no (the layout planner, the builder's integer lowering).
bool tacticBuilds(const Tactic& t, const LayerDesc& build, const LayerDesc& at);

}  // namespace kiln
