// What the optimized CPU conv tactics share (conv_depthwise.cpp, conv_onednn.cpp, conv_im2col.cpp):
// which layers they accept and their constant operands.
#include "backends/cpu/conv_cpu_common.h"
#include "ops/conv_layout.h"

#include <string>

#include "ops/fused_attrs.h"
#include "ops/op_util.h"

namespace kiln {

namespace cpu {

bool isPlainFloatConv(const LayerDesc& l) { return isFloatConv(l) && hasPlainLayouts(l); }

bool isFloatConv(const LayerDesc& l) {
  if (l.op != "Conv" || l.inputs.size() < 2 || l.inputs.size() > 4) return false;
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (l.present(i) && l.inputs[i].type != DataType::kFLOAT) return false;
  const Dims& x = l.inputs[0].dims;
  const Dims& w = l.inputs[1].dims;
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size() || !l.inputs[1].value.valid()) return false;
  if (l.present(2) && !l.inputs[2].value.valid()) return false;
  if (x[1] < 0) return false;  // channel count is needed to lay out weights
  try {
    fusedActivation(*l.attrs);
  } catch (const Error&) {
    return false;
  }
  return true;
}

ConvConstants convConstants(const LayerDesc& l) {
  ConvConstants c;
  c.weights = l.inputs[1].value;
  if (l.present(2)) c.bias = l.inputs[2].value;
  c.act = fusedActivation(*l.attrs);
  c.group = l.attrs->getInt("group", 1);
  const Dims& w = c.weights.dims();
  if (c.group < 1 || w[0] % c.group != 0 || w[1] * c.group != l.inputs[0].dims[1])
    opError(l, "weights " + toString(w) + " do not match the input channels and group");
  if (c.bias.valid() && c.bias.count() != w[0]) opError(l, "bias size does not match the output channels");
  return c;
}

size_t ResolvedConvKernel::reshape(const LayerDesc& concrete, std::unique_ptr<KernelState>& state) const {
  auto s = std::make_unique<ConvShapeState>();
  s->problem = resolveConv(concrete);
  state = std::move(s);
  return 0;
}

}  // namespace cpu

}  // namespace kiln
