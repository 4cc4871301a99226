// The op inventory: one OpDef per built-in op, with its shape/type inference and its naive
// reference kernel. Each op family registers its ops from one function (no static initializers).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ir/layer_desc.h"

namespace kiln {

//! Shape/type inference. `layer.inputs` carry types, dims (-1 allowed) and known values;
//! fill `layer.outputs` (resized to the layer's output count) with type and dims, and with the
//! value if it can be computed from dims alone (e.g. Shape). Throw kiln::Error when invalid.
using InferFn = void (*)(LayerDesc& layer);
//! Naive reference kernel: `layer` is concrete (all dims known), `io` holds the buffers.
using RefFn = void (*)(const LayerDesc& layer, const KernelIO& io);

struct OpDef {
  std::string name;
  InferFn infer = nullptr;
  RefFn ref = nullptr;
  //! Inputs whose *values* shape inference needs (Reshape's shape, Slice's starts, ...).
  std::vector<int> valueInputs;
  //! The output shape depends on the *data* behind `valueInputs` (NonZero, NonMaxSuppression,
  //! Unique, Compress's condition), not on shape values: when that data is computed at run time
  //! the execution context reads it to the host once it is computed and infers the layer there
  //! (runtime/context.cpp, data-dependent rounds); hostValueInputs does not follow these inputs
  //! back to the network's inputs (they are no shape tensors).
  bool dataDependentShape = false;
  //! With dataDependentShape: `infer` computes the outputs' values once the value inputs are
  //! known, so the layer never runs a kernel (every backend offers it the tactic "host").
  bool inferComputesValues = false;
  //! Whether the builder may evaluate the op on the host when all inputs are known (false
  //! for random or side-effecting ops).
  bool foldable = true;
  //! The op works on raw elements of any type (data movement); otherwise the CPU backend
  //! computes half/bf16 tensors in float32 (the builder inserts Cast layers around it).
  bool anyType = false;
  //! Importable from ONNX (false for kiln-internal fused ops).
  bool onnx = true;
  //! ONNX import: rewrites a layer imported at an older default-domain `opset` into the latest
  //! form (e.g. attribute `axes` -> constant input). May add constants to `net`. Optional.
  void (*normalize)(Network& net, Layer& layer, int opset) = nullptr;
  //! Oldest default-domain opset the importer accepts for this op.
  int minOpset = 1;
};

class OpRegistry {
 public:
  static OpRegistry& instance();
  void add(OpDef def);
  const OpDef* find(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  OpRegistry();
  std::map<std::string, OpDef> ops_;
};

// One function per op family (src/ops/<family>.cpp).
void registerElementwiseOps(OpRegistry& r);
void registerConvPoolOps(OpRegistry& r);
void registerMatMulOps(OpRegistry& r);
void registerNormalizationOps(OpRegistry& r);
void registerReductionOps(OpRegistry& r);
void registerShapeOps(OpRegistry& r);
void registerResizeOps(OpRegistry& r);
void registerSelectionOps(OpRegistry& r);
void registerRecurrentOps(OpRegistry& r);
void registerAttentionOps(OpRegistry& r);
//! kiln-internal fused ops (PointwiseChain).
void registerFusedOps(OpRegistry& r);
//! kiln-internal LayoutConvert (CPU blocked layouts, ops/layout.cpp).
void registerLayoutOps(OpRegistry& r);
//! The "Plugin" op: layers implemented by registered plugins (plugin/plugin_layer.cpp).
void registerPluginOps(OpRegistry& r);
//! QuantizeLinear / DequantizeLinear (ops/quantize.cpp).
void registerQuantizeOps(OpRegistry& r);
//! GridSample (ops/grid_sample.cpp).
void registerGridSampleOps(OpRegistry& r);
//! NonMaxSuppression, RoiAlign (ops/detection.cpp).
void registerDetectionOps(OpRegistry& r);
//! Unique (ops/unique.cpp).
void registerUniqueOps(OpRegistry& r);
//! NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss (ops/loss.cpp).
void registerLossOps(OpRegistry& r);
//! CausalConvWithState (ops/causal_conv.cpp).
void registerCausalConvOps(OpRegistry& r);
//! LinearAttention (ops/linear_attention.cpp).
void registerLinearAttentionOps(OpRegistry& r);
//! Col2Im (ops/col2im.cpp).
void registerCol2ImOps(OpRegistry& r);
//! CenterCropPad (ops/center_crop_pad.cpp).
void registerCenterCropPadOps(OpRegistry& r);
//! TensorScatter (ops/tensor_scatter.cpp).
void registerTensorScatterOps(OpRegistry& r);
//! AffineGrid (ops/affine_grid.cpp).
void registerAffineGridOps(OpRegistry& r);
//! HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix (ops/signal_windows.cpp).
void registerSignalWindowOps(OpRegistry& r);
//! DFT, STFT (ops/dft.cpp).
void registerDftOps(OpRegistry& r);
//! DeformConv (ops/deform_conv.cpp).
void registerDeformConvOps(OpRegistry& r);
//! ConvInteger (ops/conv_integer.cpp).
void registerConvIntegerOps(OpRegistry& r);
//! MaxUnpool (ops/max_unpool.cpp).
void registerMaxUnpoolOps(OpRegistry& r);
//! RandomUniform(Like), RandomNormal(Like), Bernoulli (ops/random.cpp).
void registerRandomOps(OpRegistry& r);

//! Runs the op's inference on `layer`; throws kiln::Error prefixed with the layer's name.
void inferLayer(LayerDesc& layer);
//! True when every input of `layer` that is present has a known value.
bool allInputsKnown(const LayerDesc& layer);
//! Computes the outputs of a layer on the host with its reference kernel (inputs must be known).
void evaluateOnHost(LayerDesc& layer);

}  // namespace kiln
