// Residual Add + LayerNormalization, y = LN(a + b), becomes one LayerNormalization with a skip
// input (`kiln_skip` = 1, inputs X, scale, B, R; semantics in ops/normalization.cpp); the same for
// RMSNormalization (inputs X, scale, none, R: LLaMA / Qwen / T5 residual streams). Where the
// LayerNorm is the sum's only reader (BERT's post-LN blocks) the sum is never written out; where
// it is read again (pre-LN blocks, GPT-2 / ViT: the next residual) the fused layer writes it as
// its second output, in the same pass. Either way one kernel and one read of the activations
// less. GPU builds only (the CUDA row-norm kernel takes the skip input); `supported` keeps the
// pattern where the backend has no kernel for the result. A Reshape between the Add and the norm
// that keeps the normalized last dim (OPT: the sum viewed [B*S, E] for the MLP) is moved onto the
// Add's operands (views, no copies), so the pattern fuses there too.
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
    Layer* view = nullptr;  // Reshape(sum) that keeps the last dim, the sum's only reader
    if (add && add->op == "Reshape" && add->inputs.size() == 2 && add->inputs[0] && add->inputs[0]->producer &&
        x->dimsKnown && isStatic(x->dims) && !x->dims.empty() && add->inputs[0]->dimsKnown && !add->inputs[0]->dims.empty() &&
        add->inputs[0]->dims.back() == x->dims.back() && soleConsumer(net, add->inputs[0]) == add && !add->inputs[0]->isOutput) {
      const int64_t axis = ln->attrs.getInt("axis", -1);
      if (axis == -1 || axis == static_cast<int64_t>(x->dims.size()) - 1) {
        view = add;
        add = view->inputs[0]->producer;
      }
    }
    if (!add || add->op != "Add" || add->inputs.size() != 2 || statsUsed(net, ln)) continue;
    if (std::count(ln->inputs.begin(), ln->inputs.end(), x) != 1) continue;
    const bool shared = soleConsumer(net, x) != ln;  // the sum is read elsewhere too: a second output
    const Tensor* sum = view ? view->inputs[0] : x;
    if (!x->dimsKnown || !activationLike(sym, add->inputs[0], sum) || !activationLike(sym, add->inputs[1], sum)) continue;
    Tensor *a0 = add->inputs[0], *a1 = add->inputs[1];
    if (view) {  // the operands viewed as the norm reads the sum
      Tensor* shape = addShapeConstant(net, view->name + "_skip_shape", x->dims);
      a0 = addTypedLayer(net, "Reshape", {a0, shape}, {}, view->name + "_skip_x", a0->type, x->dims);
      a1 = addTypedLayer(net, "Reshape", {a1, shape}, {}, view->name + "_skip_r", a1->type, x->dims);
    }
    Attributes a = ln->attrs;
    setSkipInput(a);
    // RMSNorm has no bias: input 2 stays empty, R is input 3 as for LayerNorm.
    Layer* fused = net.addLayer(ln->op, {a0, ln->inputs[1], rms ? nullptr : ln->inputs[2], a1}, shared ? 2 : 1, a,
                                net.uniqueName(ln->name + "_skip"));
    if (view) recordStandIn(fused, {add, view, ln});
    else recordStandIn(fused, {add, ln});
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
      if (view) net.removeLayer(a0->producer), net.removeLayer(a1->producer);
      continue;
    }
    net.replaceUses(y, fused->outputs[0]);
    if (shared) net.replaceUses(x, fused->outputs[1]);  // the other readers (the old LayerNorm goes next)
    net.removeLayer(ln);
    if (view) net.removeLayer(view);
    net.removeLayer(add);
    net.topoSort();
    changed = true;
    i = 0;
  }
  return changed;
}

}  // namespace kiln
