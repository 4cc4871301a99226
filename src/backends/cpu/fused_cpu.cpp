// Optimized CPU tactics for kiln's fused ops: the PointwiseChain program run over chunks on the
// thread pool with the AVX2 activations (its reference is a separate scalar loop).
#include "backends/cpu/cpu_tactics.h"
#include "backends/cpu/elementwise_simd.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"
#include "ops/pointwise_chain.h"

namespace kiln {

namespace {

class PointwiseChainKernel : public Kernel {
 public:
  explicit PointwiseChainKernel(const LayerDesc& l)
      : program_(compilePointwise(*l.attrs, l.inputs.size())), block_(outLayoutBlock(l)) {}
  void execute(const KernelIO& io, KernelState*) const override {
    if (block_ == 1) {
      runPointwise(program_, io, applyActivationAvx2);
      return;
    }
    KernelIO stored = io;  // inside a blocked region (cpu_layout): index the bytes as they are stored
    for (TensorView& t : stored.in) t.dims = physicalDims(t.dims, block_);
    for (TensorView& t : stored.out) t.dims = physicalDims(t.dims, block_);
    runPointwise(program_, stored, applyActivationAvx2);
  }

 private:
  PointwiseProgram program_;
  int64_t block_;
};

}  // namespace

namespace cpu {
KernelFactory pointwiseChainAvx2() {
  return {[](const LayerDesc& l) { return hasPlainLayouts(l) || (outLayoutBlock(l) > 1 && elementwiseInLayout(l)); },
          [](const LayerDesc& l) -> std::unique_ptr<Kernel> { return std::make_unique<PointwiseChainKernel>(l); }};
}
}  // namespace cpu

}  // namespace kiln
