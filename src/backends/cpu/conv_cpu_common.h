// Shared pieces of the optimized CPU convolution tactics (im2col_gemm, depthwise_avx2, onednn):
// which layers they accept, the constant weights they keep, per-shape state, and the epilogue
// (bias, residual, fused activation) applied after the main loop.
#pragma once
#include <memory>
#include <vector>

#include "backends/cpu/cpu_tactics.h"
#include "ops/activation.h"
#include "ops/conv_geometry.h"

namespace kiln::cpu {

//! Float32 Conv with constant W (and B when present), 1..3 spatial axes, a known fused activation.
bool isFloatConv(const LayerDesc& l);
//! isFloatConv, exchanging X, R and Y in plain NCHW (no blocked layout attributes: conv_layout.h).
bool isPlainFloatConv(const LayerDesc& l);

//! The constant operands of a Conv layer, validated against each other at create time.
struct ConvConstants {
  HostTensor weights;  //!< [M, C/group, k...] float32
  HostTensor bias;     //!< [M] float32, or invalid
  Activation act;
  int64_t group = 1;
  const float* biasData() const { return bias.valid() ? bias.as<float>() : nullptr; }
};
ConvConstants convConstants(const LayerDesc& l);

//! Per-context state of the kiln-own conv tactics: the resolved problem for the concrete shapes.
struct ConvShapeState : KernelState {
  ConvProblem problem;
};

//! Base of the kiln-own conv kernels that need nothing per shape but the resolved problem (no
//! workspace): reshape() resolves it, problemOf() reads it back at execute().
class ResolvedConvKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& concrete, std::unique_ptr<KernelState>& state) const override;

 protected:
  static const ConvProblem& problemOf(KernelState* state) { return static_cast<ConvShapeState*>(state)->problem; }
};

//! The residual input (Conv's 4th input) or nullptr.
inline const float* residualOf(const KernelIO& io) {
  return io.in.size() > 3 ? static_cast<const float*>(io.in[3].data) : nullptr;
}

//! The channel block oneDNN's convolutions prefer on this CPU (8 with AVX2, 16 with AVX-512), or
//! 0 when kiln is built without oneDNN (no tactic then handles blocked layouts; conv_onednn.cpp).
int64_t preferredChannelBlock();

}  // namespace kiln::cpu
