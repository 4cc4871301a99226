// CPU: chains of Conv / pooling layers exchange their 4-D tensors in oneDNN's blocked layout
// (nChw8c on AVX2, nChw16c on AVX-512) instead of plain NCHW, so that oneDNN does not reorder
// NCHW <-> blocked around every convolution (the early MobileNetV2 layers are memory-bound and
// lost about half their time to those reorders). Dims stay logical NCHW; each layer that takes
// part carries kiln_layout_in / kiln_layout_out (ops/conv_layout.h), and a
// LayoutConvert layer (ops/layout.cpp) sits wherever a blocked tensor meets a layer that reads
// plain NCHW (every other op, network outputs), or a plain tensor meets a blocked residual slot.
// Network inputs and outputs stay plain. A tensor is blocked only when its channel count is a
// multiple of the block, so its buffer holds exactly N*C*H*W floats (no padding): the memory plan
// and every buffer size are unchanged.
#include <set>
#include <string>

#include "builder/passes/layout_planner.h"
#include "builder/passes/passes.h"
#include "ops/conv_layout.h"

namespace kiln {

namespace {

//! An intermediate 4-D float32 tensor whose channel count is a multiple of `block`.
bool blockableTensor(const Tensor* t, int64_t block) {
  return t->type == DataType::kFLOAT && t->dims.size() == 4 && t->dims[1] > 0 && t->dims[1] % block == 0;
}

}  // namespace

bool assignCpuLayouts(Network& net) {
  std::shared_ptr<Backend> cpu = getBackend(DeviceType::kCPU, 1);
  const int64_t block = cpu->preferredChannelBlock();
  if (block == 0) return false;  // no tactic handles blocked layouts in this build
  LayoutPolicy p;
  p.block = block;
  p.eligible = [block](const Tensor* t) { return blockableTensor(t, block); };
  p.reads = [](const Layer& l) { return isLayoutConv(l) || isLayoutWindowPool(l) || isLayoutGlobalPool(l); };
  p.writes = [](const Layer& l) { return isLayoutConv(l) || isLayoutWindowPool(l); };  // global pools write plain [N,C,1,1]
  // Residual adds and squeeze-excitation gates (x * s[N, C, 1, 1]) run on the blocked bytes, and
  // activations are elementwise over any layout: EfficientNet/MobileNetV3-style blocks stay blocked
  // instead of converting around every gate.
  p.transparent = [](const Layer& l) {
    static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div", "Relu", "LeakyRelu", "Sigmoid", "Tanh",
                                              "HardSigmoid", "HardSwish", "Elu", "Softplus", "Gelu", "Mish", "PointwiseChain"};
    return ops.count(l.op) > 0;
  };
  // Inception / DenseNet blocks: a Concat along the channels of blocked inputs is the same copy in
  // the blocked layout (concat_any_memcpy), so the convs around it need no reorder.
  p.channelConcat = isLayoutChannelConcat;
  p.backend = cpu.get();
  return assignLayouts(net, p);
}

}  // namespace kiln
