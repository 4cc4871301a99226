// Conv -> Add(conv output, r) with r of the output's shape: the addition becomes the conv's
// residual input (oneDNN "sum" post-op), as in every ResNet block. The same for a GroupNorm /
// InstanceNorm's output (ResNet-GN's last norm of each block, before the residual Add and ReLU):
// the norm's apply pass reads r beside X, so the Add's pass over the tensor (two reads, one write)
// and its output buffer are gone. In a dynamic network r and the output must be the same symbolic
// dims (symbolic_dims.h): the kernels do not broadcast r. fuse_activation then takes the ReLU
// after the Add into the producer: Y = act(producer + r).
#include "builder/passes/passes.h"

namespace kiln {

namespace {

//! A producer that takes a residual as input 3 and has no residual or activation yet.
bool takesResidual(const Layer& l) {
  if (hasFusedActivation(l.attrs) || l.outputs.size() != 1) return false;
  if (l.op == "Conv") return l.inputs.size() <= 3;
  return (l.op == "GroupNormalization" || l.op == "InstanceNormalization") && l.inputs.size() == 3;
}

}  // namespace

bool fuseConvResidual(Network& net, const InputSamples& samples) {
  bool changed = false;
  SymbolicDims sym(samples);
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* producer = net.layer(static_cast<int>(i));
    if (!takesResidual(*producer)) continue;
    Tensor* y = producer->outputs[0];
    if (y->type != DataType::kFLOAT) continue;
    Layer* add = soleConsumer(net, y);
    if (!add || add->op != "Add" || add->inputs.size() != 2) continue;
    Tensor* r = add->inputs[0] == y ? add->inputs[1] : add->inputs[0];
    if (!r || r == y || r->type != y->type || r->isConstant() || !sym.sameDims(r, y)) continue;
    if (producer->inputs.size() == 2) producer->inputs.push_back(nullptr);
    producer->inputs.push_back(r);
    recordFusion(producer, add);
    Tensor* out = add->outputs[0];
    net.removeLayer(add);
    net.replaceUses(out, y);
    changed = true;
  }
  return changed;
}

}  // namespace kiln
