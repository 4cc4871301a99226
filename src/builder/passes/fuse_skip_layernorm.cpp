// Residual Add + LayerNormalization, y = LN(a + b), where the sum is read by the LayerNorm only
// (BERT's post-LN blocks), becomes one LayerNormalization with a skip input (`kiln_skip` = 1,
// inputs X, scale, B, R; semantics in ops/normalization.cpp): the sum is never written out, one
// read and one write of the activations less per block. Where the sum is read elsewhere too
// (pre-LN blocks: GPT-2, ViT) the Add stays. GPU builds only (the CUDA row-norm kernel takes the
// skip input); `supported` keeps the pattern where the backend has no kernel for the result.
#include "builder/passes/passes.h"

namespace kiln {

namespace {

//! Whether any output of `l` past the first (LayerNorm's Mean / InvStdDev) is used.
bool statsUsed(const Network& net, const Layer* l) {
  for (size_t o = 1; o < l->outputs.size(); ++o) {
    const Tensor* t = l->outputs[o];
    if (t && (t->isOutput || !net.consumers(t).empty())) return true;
  }
  return false;
}

//! Static dims only: two symbolic dims that print the same may still differ at run time (an Add
//! that broadcasts), and the fused kernel reads both operands row by row.
bool activationLike(const Tensor* t, const Tensor* x) {
  return t && !t->isConstant() && t->dimsKnown && isStatic(t->dims) && t->dims == x->dims && t->type == x->type;
}

}  // namespace

bool fuseSkipLayerNorm(Network& net, const std::function<bool(const Layer&)>& supported) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* ln = net.layer(static_cast<int>(i));
    if (ln->op != "LayerNormalization" || ln->inputs.size() != 3 || !ln->inputs[2] || ln->attrs.getInt("kiln_skip", 0) != 0)
      continue;
    Tensor* x = ln->inputs[0];
    Layer* add = x ? x->producer : nullptr;
    if (!add || add->op != "Add" || add->inputs.size() != 2 || soleConsumer(net, x) != ln || statsUsed(net, ln)) continue;
    if (!x->dimsKnown || !activationLike(add->inputs[0], x) || !activationLike(add->inputs[1], x)) continue;
    Attributes a = ln->attrs;
    a.set("kiln_skip", int64_t(1));
    Layer* fused = net.addLayer("LayerNormalization", {add->inputs[0], ln->inputs[1], ln->inputs[2], add->inputs[1]}, 1, a,
                                net.uniqueName(ln->name + "_skip"));
    recordFusion(fused, add);
    recordFusion(fused, ln);
    fused->fusedOps.erase(fused->fusedOps.begin());  // the new layer itself is not an original op
    Tensor* y = ln->outputs[0];
    fused->outputs[0]->type = y->type;
    fused->outputs[0]->dims = y->dims;
    fused->outputs[0]->dimsKnown = true;
    if (supported && !supported(*fused)) {
      net.removeLayer(fused);
      continue;
    }
    net.replaceUses(y, fused->outputs[0]);
    net.removeLayer(ln);
    net.removeLayer(add);
    net.topoSort();
    changed = true;
    i = 0;
  }
  return changed;
}

}  // namespace kiln
