// Layers that compute nothing: Identity, and Cast to the type its input already has (T5's
// RMSNorm casts float32 to float32). Their readers read the input instead, so neither a copy per
// inference nor a break in the fusion patterns is left. A network output keeps its layer (the
// output tensor must keep its name and its own buffer).
#include "builder/passes/passes.h"

namespace kiln {

bool elideNoOps(Network& net) {
  std::vector<Layer*> dead;
  for (auto& lp : net.layers()) {
    Layer* l = lp.get();
    if (!l->domain.empty() || l->inputs.size() != 1 || l->outputs.size() != 1 || !l->inputs[0]) continue;
    Tensor *in = l->inputs[0], *out = l->outputs[0];
    const bool identity = l->op == "Identity";
    const bool sameTypeCast = l->op == "Cast" && in->dimsKnown && out->dimsKnown && in->type == out->type;
    if (!(identity || sameTypeCast) || out->isOutput) continue;
    net.replaceUses(out, in);
    dead.push_back(l);
  }
  for (Layer* l : dead) net.removeLayer(l);
  return !dead.empty();
}

}  // namespace kiln
