// Optimized CPU tactics for kiln's fused ops: the PointwiseChain program run over chunks on the
// thread pool with the AVX2 activations (its reference is a separate scalar loop).
#include "backends/cpu/cpu_tactics.h"
#include "backends/cpu/elementwise_simd.h"
#include "ops/pointwise_chain.h"

namespace kiln {

namespace {

class PointwiseChainKernel : public Kernel {
 public:
  explicit PointwiseChainKernel(const LayerDesc& l) : program_(compilePointwise(*l.attrs, l.inputs.size())) {}
  void execute(const KernelIO& io, KernelState*) const override { runPointwise(program_, io, applyActivationAvx2); }

 private:
  PointwiseProgram program_;
};

}  // namespace

namespace cpu {
KernelFactory pointwiseChainAvx2() {
  return {[](const LayerDesc&) { return true; },
          [](const LayerDesc& l) -> std::unique_ptr<Kernel> { return std::make_unique<PointwiseChainKernel>(l); }};
}
}  // namespace cpu

}  // namespace kiln
