// A permutation of a linear layer's rows after it moves onto its input: a Gemm / MatMul by a
// constant weight acts on each row alone, so
//   Y = X W (+ b) [R, N] -> Reshape [d0, .., dk, N] -> Transpose(perm, last axis kept)
// equals
//   X [R, K] -> Reshape [d0, .., dk, K] -> Transpose(perm) -> Reshape [R, K] -> X W (+ b) -> Reshape.
// Why: nn.MultiheadAttention with batch_first (torchvision's ViT, user models) runs sequence-first
// inside and transposes its out_proj's output back to [B, S, E], one copy per layer; moved onto the
// input, the permutation joins the head merge after the attention, which the fused attention
// writes through its output view (no copy). GPU builds, before the attention fusion; static shapes.
#include "builder/passes/passes.h"

namespace kiln {

namespace {

//! Whether `l` is a Gemm (no transA) or a MatMul of a 2-D activation by a constant 2-D weight:
//! each output row a function of the same input row.
bool rowWiseLinear(const Layer* l) {
  if (!l || !l->domain.empty() || l->inputs.size() < 2 || !l->inputs[0] || !l->inputs[1] || l->outputs.size() != 1) return false;
  const Tensor *x = l->inputs[0], *w = l->inputs[1];
  if (!x->dimsKnown || x->dims.size() != 2 || !w->isConstant() || w->dims.size() != 2) return false;
  if (l->op == "Gemm") {
    if (l->attrs.getInt("transA", 0) != 0) return false;
    if (l->inputs.size() > 2 && l->inputs[2]) {  // C: a bias row, not a matrix of its own
      const Dims& c = l->inputs[2]->dims;
      if (!l->inputs[2]->isConstant() || c.size() > 2 || (c.size() == 2 && c[0] != 1)) return false;
    }
    return true;
  }
  return l->op == "MatMul" && l->inputs.size() == 2;
}

bool moveOne(Network& net, Layer* t) {
  if (t->op != "Transpose" || !t->domain.empty() || t->inputs.size() != 1 || !t->inputs[0] || t->outputs.size() != 1) return false;
  Tensor* y3 = t->inputs[0];
  Tensor* z = t->outputs[0];
  const std::vector<int64_t> perm = t->attrs.getInts("perm", {});
  const size_t r = y3->dims.size();
  if (perm.size() != r || r < 3 || perm.back() != static_cast<int64_t>(r) - 1 || !z->dimsKnown || !isStatic(z->dims)) return false;
  Layer* rs = y3->producer;
  if (!rs || rs->op != "Reshape" || !rs->domain.empty() || rs->inputs.empty() || !rs->inputs[0] || soleConsumer(net, y3) != t || y3->isOutput)
    return false;
  Tensor* y2 = rs->inputs[0];
  Layer* lin = y2->producer;
  if (!rowWiseLinear(lin) || soleConsumer(net, y2) != rs || y2->isOutput || !y2->dimsKnown || !isStatic(y2->dims) ||
      !y3->dimsKnown || !isStatic(y3->dims) || y3->dims.back() != y2->dims[1])
    return false;
  // Only onto data movement (the head merge after an attention), where the permutation composes
  // with what is there; onto another layer it would only move the copy (a wider one when K > N).
  Tensor* x2 = lin->inputs[0];
  const Layer* src = x2->producer;
  if (!isStatic(x2->dims) || !src || (src->op != "Reshape" && src->op != "Transpose")) return false;
  const int64_t k = x2->dims[1];
  Dims x3 = y3->dims, xt = z->dims;
  x3.back() = k;
  xt.back() = k;
  const std::string& base = t->name;
  Tensor* v = addReshape(net, x2, x3, base + "_rows");
  v = addStandIn(net, t, "Transpose", {v}, t->attrs, base + "_before_linear", x2->type, xt);
  v = addReshape(net, v, x2->dims, base + "_matrix");
  std::vector<Tensor*> in = lin->inputs;
  in[0] = v;
  Tensor* p = addStandIn(net, lin, lin->op, in, lin->attrs, lin->name + "_permuted_rows", y2->type, y2->dims);
  p = addReshape(net, p, z->dims, base + "_out");
  net.replaceUses(z, p);
  net.removeLayer(t);
  net.removeLayer(rs);
  net.removeLayer(lin);
  net.topoSort();
  return true;
}

}  // namespace

bool permuteRowsBeforeLinear(Network& net) { return rewriteLayers(net, moveOne); }

}  // namespace kiln
