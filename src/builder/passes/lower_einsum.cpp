// A two-operand Einsum that is a batched matrix product (every label either shared by both
// operands and the output: batch; in one operand and the output: rows / columns; or shared by the
// operands and summed: the contraction) becomes
//   Transpose(A) -> Reshape [batch.., M, K],  Transpose(B) -> Reshape [batch.., K, N],
//   MatMul -> Reshape [batch.., m.., n..] -> Transpose to the output's label order
// (identity Transposes and Reshapes left out). Einsum's own kernels are loops (the CUDA one has no
// tensor cores); MatMul takes the GEMM tactics, and the attention fusion sees MatMuls: torchvision's
// MaxViT writes its attention as einsum('B G H I D, B G H J D -> B G H I J') and its product with V.
// Equations with an ellipsis, a repeated label in one operand (a diagonal), a label summed out of
// one operand alone, or no explicit output stay; float only, with static dims except the batch
// labels' (a dynamic batch).
#include <algorithm>
#include <map>
#include <numeric>

#include "builder/passes/passes.h"

namespace kiln {

namespace {

//! "ab,bc->ac" (spaces ignored) split into the two input terms and the output; false for anything
//! else (an ellipsis, one or three operands, no "->", a label that is not a letter).
bool parseTwoOperands(const std::string& equation, std::string* a, std::string* b, std::string* out) {
  std::string e;
  for (char c : equation)
    if (c != ' ') e.push_back(c);
  const size_t arrow = e.find("->"), comma = e.find(',');
  if (arrow == std::string::npos || comma == std::string::npos || comma > arrow || e.find(',', comma + 1) != std::string::npos)
    return false;
  *a = e.substr(0, comma);
  *b = e.substr(comma + 1, arrow - comma - 1);
  *out = e.substr(arrow + 2);
  for (const std::string* t : {a, b, out}) {
    for (char c : *t)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return false;
    std::string sorted = *t;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) return false;  // a diagonal
  }
  return true;
}

int64_t product(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t(1), std::multiplies<int64_t>()); }

//! t permuted to the labels `want` (t's labels `have`), no layer when already in that order.
Tensor* permuted(Network& net, Tensor* t, const std::string& have, const std::string& want, const std::string& name) {
  std::vector<int64_t> perm;
  Dims d;
  for (char c : want) {
    perm.push_back(static_cast<int64_t>(have.find(c)));
    d.push_back(t->dims[static_cast<size_t>(perm.back())]);
  }
  if (have == want) return t;
  Attributes a;
  a.set("perm", perm);
  return addTypedLayer(net, "Transpose", {t}, a, name, t->type, d);
}

//! t reshaped to d, whose first `copied` dims are t's own (batch dims, maybe dynamic: shape entry 0
//! copies them); no layer when the dims are already d.
Tensor* reshaped(Network& net, Tensor* t, const Dims& d, size_t copied, const std::string& name) {
  if (t->dims == d) return t;
  Dims shape = d;
  for (size_t i = 0; i < copied; ++i) shape[i] = 0;
  return addReshape(net, t, shape, name, d);
}

bool lowerOne(Network& net, Layer* l) {
  if (l->op != "Einsum" || !l->domain.empty() || l->inputs.size() != 2 || l->outputs.size() != 1 || !l->inputs[0] || !l->inputs[1])
    return false;
  Tensor *x = l->inputs[0], *y = l->inputs[1], *z = l->outputs[0];
  if (!isFloat(x->type) || x->type != y->type || !x->dimsKnown || !y->dimsKnown || !z->dimsKnown) return false;
  std::string ta, tb, to;
  if (!parseTwoOperands(l->attrs.getString("equation", ""), &ta, &tb, &to) || ta.size() != x->dims.size() || tb.size() != y->dims.size())
    return false;
  std::map<char, int64_t> dim;
  for (size_t i = 0; i < ta.size(); ++i) dim[ta[i]] = x->dims[i];
  for (size_t i = 0; i < tb.size(); ++i) {
    auto [it, fresh] = dim.emplace(tb[i], y->dims[i]);
    if (!fresh && it->second != y->dims[i]) return false;  // no broadcasting without an ellipsis
  }
  std::string batch, rows, cols, sum;
  for (char c : to) {
    const bool inA = ta.find(c) != std::string::npos, inB = tb.find(c) != std::string::npos;
    if (inA && inB) batch += c;
    else if (inA) rows += c;
    else if (inB) cols += c;
    else return false;
  }
  for (char c : ta)
    if (to.find(c) == std::string::npos) {
      if (tb.find(c) == std::string::npos) return false;  // summed out of A alone
      sum += c;
    }
  for (char c : tb)
    if (to.find(c) == std::string::npos && ta.find(c) == std::string::npos) return false;
  auto dimsOf = [&](const std::string& labels) {
    std::vector<int64_t> v;
    for (char c : labels) v.push_back(dim[c]);
    return v;
  };
  // Batch dims may be dynamic (the Reshapes copy them: shape entry 0), the others must be static.
  for (const std::string* g : {&rows, &sum, &cols})
    for (char c : *g)
      if (dim[c] < 0) return false;
  const std::vector<int64_t> bd = dimsOf(batch);
  auto with = [&](std::vector<int64_t> tail) {
    Dims d(bd.begin(), bd.end());
    d.insert(d.end(), tail.begin(), tail.end());
    return d;
  };
  const int64_t m = product(dimsOf(rows)), k = product(dimsOf(sum)), n = product(dimsOf(cols));
  const std::string& name = l->name;
  Tensor* a = reshaped(net, permuted(net, x, ta, batch + rows + sum, name + "_lhs"), with({m, k}), bd.size(), name + "_lhs_matrix");
  Tensor* b = reshaped(net, permuted(net, y, tb, batch + sum + cols, name + "_rhs"), with({k, n}), bd.size(), name + "_rhs_matrix");
  Tensor* p = addStandIn(net, l, "MatMul", {a, b}, {}, name + "_matmul", z->type, with({m, n}));
  std::vector<int64_t> split = dimsOf(rows), colDims = dimsOf(cols);
  split.insert(split.end(), colDims.begin(), colDims.end());
  p = reshaped(net, p, with(split), bd.size(), name + "_product");
  p = permuted(net, p, batch + rows + cols, to, name + "_output");
  net.replaceUses(z, p);
  net.removeLayer(l);
  return true;
}

}  // namespace

bool lowerEinsumToMatMul(Network& net) {
  std::vector<Layer*> einsums;
  for (auto& l : net.layers())
    if (l->op == "Einsum") einsums.push_back(l.get());
  bool changed = false;
  for (Layer* l : einsums) changed = lowerOne(net, l) || changed;
  if (changed) net.topoSort();
  return changed;
}

}  // namespace kiln
