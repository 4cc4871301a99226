// Conv -> Add(conv output, r) with r of the output's shape: the addition becomes the conv's
// residual input (oneDNN "sum" post-op), as in every ResNet block. In a dynamic network r and the
// output must be the same symbolic dims (symbolic_dims.h): the kernel does not broadcast r.
#include "builder/passes/passes.h"

namespace kiln {

bool fuseConvResidual(Network& net, const InputSamples& samples) {
  bool changed = false;
  SymbolicDims sym(samples);
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* conv = net.layer(static_cast<int>(i));
    if (conv->op != "Conv" || conv->inputs.size() > 3 || hasFusedActivation(conv->attrs)) continue;
    Tensor* y = conv->outputs[0];
    if (y->type != DataType::kFLOAT) continue;
    Layer* add = soleConsumer(net, y);
    if (!add || add->op != "Add" || add->inputs.size() != 2) continue;
    Tensor* r = add->inputs[0] == y ? add->inputs[1] : add->inputs[0];
    if (!r || r == y || r->type != y->type || r->isConstant() || !sym.sameDims(r, y)) continue;
    if (conv->inputs.size() == 2) conv->inputs.push_back(nullptr);
    conv->inputs.push_back(r);
    recordFusion(conv, add);
    Tensor* out = add->outputs[0];
    net.removeLayer(add);
    net.replaceUses(out, y);
    changed = true;
  }
  return changed;
}

}  // namespace kiln
