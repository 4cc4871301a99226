// GPU: chains of Conv / pooling layers exchange their float16/bfloat16 4-D tensors channels-last
// ("nhwc") instead of NCHW. cuDNN's tensor-core convolutions and its runtime-fused
// conv + bias + residual + activation graphs are NHWC kernels: fed NCHW they either transpose
// internally around every convolution or find no fused engine at all (then our separate epilogue
// kernel makes one more pass over the output). Elementwise layers (residual adds, gates such as
// squeeze-excitation's x * s[N, C, 1, 1], activations, pointwise chains) run in the layout of
// their inputs, so a whole CNN stays NHWC as torch.compile's channels-last does. Network inputs
// and outputs stay NCHW; a LayoutConvert sits where an nhwc tensor meets any other op
// (layout_planner.h).
//
// Only for batches of 8 and more: at batch 1 the NCHW engines measured faster than torch.compile
// already (bench/results/gpu-h200.md), and the conversions cost relatively more. Channel counts
// must be multiples of 8 (tensor-core alignment).
#include <set>
#include <string>

#include "builder/passes/layout_planner.h"
#include "builder/passes/passes.h"
#include "ops/conv_layout.h"

namespace kiln {

namespace {

constexpr int64_t kMinBatch = 8;

bool nhwcTensor(const Tensor* t) {
  const Dims& d = t->dims;
  return (t->type == DataType::kHALF || t->type == DataType::kBF16) && d.size() == 4 && d[0] >= kMinBatch && d[1] > 0 &&
         d[1] % 8 == 0 && d[2] > 0 && d[3] > 0;
}

}  // namespace

bool assignGpuLayouts(Network& net, Backend& backend) {
  if (backend.device() != DeviceType::kGPU) return false;
  LayoutPolicy p;
  p.block = kNhwcBlock;
  p.eligible = nhwcTensor;
  p.reads = [](const Layer& l) { return isLayoutConv(l) || isLayoutWindowPool(l) || isLayoutGlobalPool(l); };
  p.writes = [](const Layer& l) { return isLayoutConv(l) || isLayoutWindowPool(l); };  // global pools write [N,C,1,1]
  p.transparent = [](const Layer& l) {
    static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div", "PRelu", "PointwiseChain", "Relu", "LeakyRelu",
                                              "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Elu", "Softplus", "Gelu",
                                              "Mish", "Clip"};
    return ops.count(l.op) > 0;
  };
  p.backend = &backend;
  p.verify = true;
  return assignLayouts(net, p);
}

}  // namespace kiln
