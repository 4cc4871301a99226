// Chains of Reshape-like layers and Transposes (two or more that move data) -> Reshape, one
// Transpose, Reshape. MobileViT's unfold exports Reshape -> Transpose -> Reshape -> Transpose ->
// Reshape (and its fold the reverse), einops rearranges and hand-written patch embeddings the
// same: each Transpose is a full copy of the tensor, where the composition is one. compose_row_moves
// takes the chains that keep the last dim in place; this pass the rest. The chain's element order
// is tracked as a permutation of "atoms": x's dims, split where a later Reshape cuts one (a dim of
// 32 read as [16, 2] becomes two atoms). Each Transpose permutes the current dims' atom groups, each
// Reshape regroups the atom sequence; at the end the output is x's atoms in some order: x reshaped to
// its atoms, transposed once, reshaped to the output. Atoms adjacent in both orders merge, so the
// Transpose has the fewest dims. A Reshape that would cut an atom unevenly ends the chain there.
// Static dims only; a network output keeps its own layer.
#include <algorithm>
#include <numeric>
#include <vector>

#include "builder/passes/passes.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

constexpr size_t kMaxRank = 8;  // of the composed Transpose, after merging atoms

bool staticDims(const Tensor* t) { return t && t->dimsKnown && isStatic(t->dims); }

bool isReshapeLike(const Layer* l) {
  return l->op == "Reshape" || l->op == "Flatten" || l->op == "Squeeze" || l->op == "Unsqueeze" || l->op == "Identity";
}

//! x's elements as atoms: `size` per atom id, `base` the ids in x's row-major order, `dims` the
//! current tensor's dims, each a row-major group of atom ids (a dim of 1: an empty group).
struct Atoms {
  std::vector<int64_t> size;
  std::vector<int64_t> base;
  std::vector<std::vector<int64_t>> dims;

  explicit Atoms(const Dims& x) {
    for (int64_t d : x) {
      dims.emplace_back();
      if (d == 1) continue;
      dims.back().push_back(static_cast<int64_t>(size.size()));
      base.push_back(static_cast<int64_t>(size.size()));
      size.push_back(d);
    }
  }

  //! The atom ids in the current tensor's row-major order.
  std::vector<int64_t> sequence() const {
    std::vector<int64_t> seq;
    for (const auto& g : dims) seq.insert(seq.end(), g.begin(), g.end());
    return seq;
  }

  //! Splits atom a into (outer, size / outer), both in place of a; returns the inner id.
  int64_t split(int64_t a, int64_t outer) {
    const int64_t inner = static_cast<int64_t>(size.size());
    size.push_back(size[static_cast<size_t>(a)] / outer);
    size[static_cast<size_t>(a)] = outer;
    auto insertAfter = [&](std::vector<int64_t>& v) {
      auto it = std::find(v.begin(), v.end(), a);
      if (it != v.end()) v.insert(it + 1, inner);
    };
    insertAfter(base);
    for (auto& g : dims) insertAfter(g);
    return inner;
  }

  bool transpose(const std::vector<int64_t>& perm) {
    if (perm.size() != dims.size()) return false;
    std::vector<std::vector<int64_t>> out;
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(dims.size())) return false;
      out.push_back(dims[static_cast<size_t>(p)]);
    }
    dims = std::move(out);
    return true;
  }

  //! Regroups the atom sequence into `to`, splitting atoms where a dim ends inside one; false when
  //! a dim cannot be made of whole or evenly split atoms.
  bool reshape(const Dims& to) {
    std::vector<int64_t> seq = sequence();
    std::vector<std::vector<int64_t>> out;
    size_t j = 0;
    for (int64_t d : to) {
      out.emplace_back();
      int64_t prod = 1;
      while (prod < d) {
        if (j >= seq.size() || d % prod != 0) return false;
        const int64_t a = seq[j], want = d / prod, s = size[static_cast<size_t>(a)];
        if (s <= want) {
          if (want % s != 0) return false;
          out.back().push_back(a);
          prod *= s;
          ++j;
        } else {
          if (s % want != 0) return false;
          seq[j] = split(a, want);  // the outer part ends this dim, the inner one starts the next
          out.back().push_back(a);
          prod = d;
        }
      }
      if (prod != d) return false;
    }
    if (j != seq.size()) return false;
    dims = std::move(out);
    return true;
  }
};

//! The step a layer makes on `a`, and whether it copies (a Transpose that is not a view).
bool applyStep(const Layer* l, Atoms& a, bool* copies) {
  const Tensor* y = l->outputs[0];
  *copies = false;
  if (isReshapeLike(l)) return a.reshape(y->dims);
  std::vector<int64_t> perm = l->attrs.getInts("perm");
  if (perm.empty()) {  // the default: reverse the dims
    perm.resize(a.dims.size());
    std::iota(perm.rbegin(), perm.rend(), int64_t(0));
  }
  // Dims of 1 move nothing: the Transpose copies only if the non-empty groups change order.
  std::vector<int64_t> before, after;
  for (const auto& g : a.dims)
    if (!g.empty()) before.push_back(g.front());
  if (!a.transpose(perm)) return false;
  for (const auto& g : a.dims)
    if (!g.empty()) after.push_back(g.front());
  *copies = before != after;
  return true;
}

struct Composed {
  std::vector<Layer*> layers;  // the prefix of the chain that composes
  Atoms atoms;
  int copies = 0;
};

//! The chain from `first` down, cut after its last Transpose (Reshapes after it stay as they are).
Composed follow(const Network& net, Layer* first) {
  Composed cur{{}, Atoms(first->inputs[0]->dims), 0}, best = cur;
  for (Layer* l = first; l && l->domain.empty() && (isReshapeLike(l) || l->op == "Transpose");) {
    if (l->outputs.size() != 1 || l->outputs[0]->isOutput || !staticDims(l->outputs[0]) || l->inputs.empty()) break;
    bool copies = false;
    if (!applyStep(l, cur.atoms, &copies)) break;
    cur.layers.push_back(l);
    cur.copies += copies;
    if (l->op == "Transpose") best = cur;
    l = soleConsumer(net, l->outputs[0]);
  }
  return best;
}

//! Atoms `c` (after the chain) as x reshaped to `inDims` then transposed by `perm`, with atoms that
//! are adjacent in both x's order and the output's merged.
void mergedTranspose(const Atoms& a, Dims* inDims, std::vector<int64_t>* perm) {
  const std::vector<int64_t> seq = a.sequence();
  std::vector<int64_t> pos(a.size.size());
  for (size_t i = 0; i < a.base.size(); ++i) pos[static_cast<size_t>(a.base[i])] = static_cast<int64_t>(i);
  // Runs of the output sequence that are consecutive in x's order become one dim.
  std::vector<std::pair<int64_t, int64_t>> runs;  // (first base position, size)
  for (size_t i = 0; i < seq.size(); ++i) {
    const int64_t p = pos[static_cast<size_t>(seq[i])], s = a.size[static_cast<size_t>(seq[i])];
    if (!runs.empty() && i > 0 && pos[static_cast<size_t>(seq[i - 1])] + 1 == p) runs.back().second *= s;
    else runs.push_back({p, s});
  }
  std::vector<size_t> byBase(runs.size());
  std::iota(byBase.begin(), byBase.end(), size_t(0));
  std::sort(byBase.begin(), byBase.end(), [&](size_t u, size_t v) { return runs[u].first < runs[v].first; });
  inDims->clear();
  std::vector<int64_t> rank(runs.size());
  for (size_t k = 0; k < byBase.size(); ++k) {
    inDims->push_back(runs[byBase[k]].second);
    rank[byBase[k]] = static_cast<int64_t>(k);
  }
  perm->assign(rank.begin(), rank.end());
}

}  // namespace

bool composeTransposes(Network& net) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size();) {
    Layer* first = net.layer(static_cast<int>(i++));
    // An empty tensor moves nothing (and its atom of size 0 would divide by zero).
    if (!first->domain.empty() || !(isReshapeLike(first) || first->op == "Transpose") || first->inputs.empty() ||
        !staticDims(first->inputs[0]) || volume(first->inputs[0]->dims) == 0)
      continue;
    const Layer* up = first->inputs[0]->producer;
    if (up && up->domain.empty() && (isReshapeLike(up) || up->op == "Transpose") && soleConsumer(net, first->inputs[0]) == first &&
        !first->inputs[0]->isOutput)
      continue;  // not the head of its chain
    Composed c = follow(net, first);
    if (c.copies < 2) continue;
    Dims inDims;
    std::vector<int64_t> perm;
    mergedTranspose(c.atoms, &inDims, &perm);
    if (perm.size() > kMaxRank) continue;
    --i;  // rewritten below: look at index i again
    Tensor *x = first->inputs[0], *y = c.layers.back()->outputs[0];
    const std::string base = c.layers.back()->name + "_composed";
    bool identity = true;
    for (size_t k = 0; k < perm.size(); ++k) identity = identity && perm[k] == static_cast<int64_t>(k);
    Tensor* z = nullptr;
    if (identity) {  // the moves cancel out: a view
      z = addReshape(net, x, y->dims, base);
      recordStandIn(z->producer, std::vector<const Layer*>(c.layers.begin(), c.layers.end()));
    } else {
      Tensor* in = addReshape(net, x, inDims, base + "_in");
      Dims moved;
      for (int64_t p : perm) moved.push_back(inDims[static_cast<size_t>(p)]);
      Attributes ta;
      ta.set("perm", perm);
      Tensor* t = addTypedLayer(net, "Transpose", {in}, ta, base, x->type, moved);
      z = addReshape(net, t, y->dims, base + "_out");
      recordStandIn(t->producer, std::vector<const Layer*>(c.layers.begin(), c.layers.end()));
    }
    net.replaceUses(y, z);
    for (auto it = c.layers.rbegin(); it != c.layers.rend(); ++it) net.removeLayer(*it);
    changed = true;
  }
  if (changed) net.removeDeadLayers();
  return changed;
}

}  // namespace kiln
