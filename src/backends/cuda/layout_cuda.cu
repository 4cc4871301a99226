// CUDA tactic "layout_convert_any_transpose" for LayoutConvert between nchw and nhwc (the GPU
// layout pass, builder/passes/gpu_layout.cpp): [N][A][B] -> [N][B][A] with (A, B) = (C, H*W) or
// (H*W, C). reshape plans it as a strided copy, so that it runs the shape family's tiled transpose
// (shape_copy.cu: both sides coalesced, whole 4-byte words for 1- and 2-byte elements) or one
// memcpy when C or H*W is 1. Any element size of 1, 2, 4 or 8 bytes.
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/shape_cuda.cuh"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"

namespace kiln {

namespace {

class LayoutConvertKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& d = l.inputs[0].dims;
    const int64_t n = d[0], c = d[1], hw = d[2] * d[3];
    // Output elements in memory order, read from the input's layout.
    cuda::CopyPlan& plan = cuda::makeState<cuda::CopyPlan>(state);
    if (outLayoutBlock(l) == kNhwcBlock)  // out [n][hw][c] from in [n][c][hw]
      plan = cuda::makeCopyPlan({n, hw, c}, {c * hw, 1, hw}, {hw * c, c, 1});
    else  // out [n][c][hw] from in [n][hw][c]
      plan = cuda::makeCopyPlan({n, c, hw}, {hw * c, 1, c}, {c * hw, hw, 1});
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    cuda::launchCopy(cuda::paramsOf<cuda::CopyPlan>(state), elementSize(io.in[0].type), io.in[0].data, io.out[0].data,
                     cuda::streamOf(io));
  }
};

bool supportsLayoutConvert(const LayerDesc& l) {
  if (l.inputs.size() != 1 || l.inputs[0].dims.size() != 4) return false;
  const size_t es = elementSize(l.inputs[0].type);
  if (es != 1 && es != 2 && es != 4 && es != 8) return false;
  const int64_t from = inLayoutBlock(l), to = outLayoutBlock(l);
  return (from == 1 && to == kNhwcBlock) || (from == kNhwcBlock && to == 1);
}

std::unique_ptr<Kernel> createLayoutConvert(const LayerDesc&) { return std::make_unique<LayoutConvertKernel>(); }

}  // namespace

namespace cuda {
KernelFactory layoutConvertCuda() { return {supportsLayoutConvert, createLayoutConvert}; }
}  // namespace cuda

}  // namespace kiln
