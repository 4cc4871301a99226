// Residual Add + LayerNormalization, y = LN(a + b), becomes one LayerNormalization with a skip
// input (`kiln_skip` = 1, inputs X, scale, B, R; semantics in ops/normalization.cpp); the same for
// RMSNormalization (inputs X, scale, none, R: LLaMA / Qwen / T5 residual streams). Where the
// LayerNorm is the sum's only reader (BERT's post-LN blocks) the sum is never written out; where
// it is read again (pre-LN blocks, GPT-2 / ViT: the next residual) the fused layer writes it as
// its second output, in the same pass. Either way one kernel and one read of the activations
// less. GPU builds only (the CUDA row-norm kernel takes the skip input); `supported` keeps the
// pattern where the backend has no kernel for the result.
#include <algorithm>

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

//! A non-constant operand of the sum with the sum's dims: the fused kernel reads both operands row
//! by row, so no broadcasting. Compared symbolically (symbolic_dims.h): two dims that print as -1
//! may still differ at run time (an Add that broadcasts), the same symbolic dim may not.
bool activationLike(SymbolicDims& sym, const Tensor* t, const Tensor* x) {
  return t && !t->isConstant() && t->dimsKnown && t->type == x->type && sym.sameDims(t, x);
}

}  // namespace

bool fuseSkipLayerNorm(Network& net, const std::function<bool(const Layer&)>& supported, const InputSamples& samples) {
  bool changed = false;
  SymbolicDims sym(samples);  // memoized per tensor: rewrites keep the tensors' meanings
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* ln = net.layer(static_cast<int>(i));
    const bool rms = ln->op == "RMSNormalization";
    if (rms ? ln->inputs.size() != 2 : (ln->op != "LayerNormalization" || ln->inputs.size() != 3 || !ln->inputs[2])) continue;
    if (hasSkipInput(ln->attrs)) continue;
    Tensor* x = ln->inputs[0];
    Layer* add = x ? x->producer : nullptr;
    if (!add || add->op != "Add" || add->inputs.size() != 2 || statsUsed(net, ln)) continue;
    if (std::count(ln->inputs.begin(), ln->inputs.end(), x) != 1) continue;
    const bool shared = soleConsumer(net, x) != ln;  // the sum is read elsewhere too: a second output
    if (!x->dimsKnown || !activationLike(sym, add->inputs[0], x) || !activationLike(sym, add->inputs[1], x)) continue;
    Attributes a = ln->attrs;
    setSkipInput(a);
    // RMSNorm has no bias: input 2 stays empty, R is input 3 as for LayerNorm.
    Layer* fused = net.addLayer(ln->op, {add->inputs[0], ln->inputs[1], rms ? nullptr : ln->inputs[2], add->inputs[1]}, shared ? 2 : 1, a,
                                net.uniqueName(ln->name + "_skip"));
    recordStandIn(fused, {add, ln});
    Tensor* y = ln->outputs[0];
    fused->outputs[0]->type = y->type;
    fused->outputs[0]->dims = y->dims;
    fused->outputs[0]->dimsKnown = true;
    if (shared) {
      fused->outputs[1]->type = x->type;
      fused->outputs[1]->dims = x->dims;
      fused->outputs[1]->dimsKnown = true;
    }
    if (supported && !supported(*fused)) {
      net.removeLayer(fused);
      continue;
    }
    net.replaceUses(y, fused->outputs[0]);
    if (shared) net.replaceUses(x, fused->outputs[1]);  // the other readers (the old LayerNorm goes next)
    net.removeLayer(ln);
    net.removeLayer(add);
    net.topoSort();
    changed = true;
    i = 0;
  }
  return changed;
}

}  // namespace kiln
