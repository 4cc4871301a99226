#include "builder/passes/view_trace.h"

#include "builder/passes/passes.h"

#include <algorithm>
#include <string>

namespace kiln {

namespace {

//! The view while it is traced: each dim is a group of "atoms" (size, stride), outermost first,
//! so that a Reshape can split and merge dims freely (a merged dim need not be one stride: ViT's
//! [S, B*H, D] between the packed projection and [B, H, S, D]); only the final dims must each
//! collapse to one stride.
struct Atom {
  int64_t size, stride;
};
using Group = std::vector<Atom>;

struct Trace {
  int64_t offset = 0;
  std::vector<Group> dims;
  bool copies = false;
};

int64_t groupSize(const Group& g) {
  int64_t n = 1;
  for (const Atom& a : g) n *= a.size;
  return n;
}

Dims sizesOf(const Trace& t) {
  Dims d;
  for (const Group& g : t.dims) d.push_back(groupSize(g));
  return d;
}

//! Drops size-1 atoms and merges neighbours that are laid out contiguously.
Group simplify(const Group& g) {
  Group out;
  for (const Atom& a : g) {
    if (a.size == 1) continue;
    if (!out.empty() && out.back().stride == a.size * a.stride) {
      out.back() = Atom{out.back().size * a.size, a.stride};
      continue;
    }
    out.push_back(a);
  }
  return out;
}

//! Regroups every atom, in order, into dims of `shape` (splitting atoms where a dim boundary
//! falls inside one).
bool reshapeTrace(Trace& t, const Dims& shape) {
  std::vector<Atom> atoms;
  for (const Group& g : t.dims)
    for (const Atom& a : simplify(g)) atoms.push_back(a);
  if (volume(shape) != volume(sizesOf(t))) return false;
  std::vector<Group> dims;
  size_t next = 0;
  for (int64_t want : shape) {
    Group g;
    int64_t have = 1;
    while (have < want) {
      if (next == atoms.size()) return false;
      Atom& a = atoms[next];
      const int64_t need = want / have;
      if (want % have != 0) return false;
      if (a.size <= need) {
        if (need % a.size != 0) return false;
        g.push_back(a);
        have *= a.size;
        ++next;
      } else {  // split the atom: its outer part completes this dim
        if (a.size % need != 0) return false;
        const int64_t inner = a.size / need;
        g.push_back(Atom{need, a.stride * inner});
        a = Atom{inner, a.stride};
        have *= need;
      }
    }
    dims.push_back(g);
  }
  if (next != atoms.size()) return false;
  t.dims = dims;
  return true;
}

//! Moves `t` to dim `axis` range [start, start + len): only along the outermost atom of the dim
//! (after simplification) unless the range covers whole inner blocks.
bool sliceDim(Trace& t, size_t axis, int64_t start, int64_t len) {
  Group g = simplify(t.dims[axis]);
  if (g.empty()) return start == 0 && len == 1;
  int64_t inner = 1;
  for (size_t i = 1; i < g.size(); ++i) inner *= g[i].size;
  if (start % inner != 0 || len % inner != 0) return false;
  t.offset += (start / inner) * g[0].stride;
  g[0].size = len / inner;
  t.dims[axis] = g;
  return true;
}

//! A contiguous (row-major) tensor of dims `d`.
Trace contiguousTrace(const Dims& d) {
  Trace t;
  int64_t stride = 1;
  t.dims.resize(d.size());
  for (size_t i = d.size(); i-- > 0;) {
    t.dims[i] = {Atom{d[i], stride}};
    stride *= d[i];
  }
  return t;
}

//! One stride per dim of `t`, or false when a dim does not collapse to one.
bool finalStrides(const Trace& t, std::vector<int64_t>& strides) {
  strides.clear();
  for (const Group& g : t.dims) {
    const Group s = simplify(g);
    if (s.size() > 1) return false;
    strides.push_back(s.empty() ? 0 : s[0].stride);
  }
  return true;
}

int64_t normAxis(int64_t a, size_t rank) { return a < 0 ? a + static_cast<int64_t>(rank) : a; }

//! Layers that keep the element order and only change the dims.
bool reshapeLike(const Layer* l) {
  const std::string& op = l->op;
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity" ||
         (op == "Concat" && l->inputs.size() == 1);
}

//! Applies Transpose layer `l` to the trace (or, with `inverse`, undoes it).
bool permuteTrace(const Layer& l, Trace& t, bool inverse) {
  const size_t rank = t.dims.size();
  std::vector<int64_t> perm = l.attrs.getInts("perm", {});
  if (perm.empty())
    for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  if (perm.size() != rank) return false;
  std::vector<Group> d(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t p = normAxis(perm[i], rank);
    if (p < 0 || p >= static_cast<int64_t>(rank)) return false;
    if (inverse) d[static_cast<size_t>(p)] = t.dims[i];
    else d[i] = t.dims[static_cast<size_t>(p)];
  }
  t.dims = d;
  return true;
}

bool constInts(const Layer& l, size_t i, std::vector<int64_t>& out) {
  if (i >= l.inputs.size() || !l.inputs[i]) return false;
  const Tensor* t = l.inputs[i];
  if (!t->isConstant() || !isInteger(t->type)) return false;
  out = t->value.toInts();
  return true;
}

bool known(const Dims* d) { return d && isStatic(*d); }

bool isViewLayer(const Layer* l, const DimsOf& dims) {
  if (!l || l->inputs.empty() || !l->inputs[0] || l->outputs.empty()) return false;
  for (const Tensor* o : l->outputs)
    if (!o || !known(dims(o))) return false;
  return reshapeLike(l) || l->op == "Transpose" || l->op == "Gather" || l->op == "Split" || l->op == "Slice";
}

//! Applies output `j` of layer `l` to the trace of its first input.
bool applyStep(const Layer& l, size_t j, Trace& t, const DimsOf& dims) {
  const Dims& od = *dims(l.outputs[j]);
  const std::string& op = l.op;
  if (reshapeLike(&l)) return reshapeTrace(t, od);
  const size_t rank = t.dims.size();
  if (op == "Transpose") {
    if (!permuteTrace(l, t, false)) return false;
  } else if (op == "Gather") {
    std::vector<int64_t> idx;
    if (!constInts(l, 1, idx) || idx.size() != 1) return false;
    const int64_t axis = normAxis(l.attrs.getInt("axis", 0), rank);
    if (axis < 0 || axis >= static_cast<int64_t>(rank)) return false;
    const int64_t size = groupSize(t.dims[axis]);
    const int64_t i = idx[0] < 0 ? idx[0] + size : idx[0];
    if (i < 0 || i >= size || !sliceDim(t, static_cast<size_t>(axis), i, 1)) return false;
    if (l.inputs[1]->value.dims().empty()) t.dims.erase(t.dims.begin() + axis);  // a scalar index drops the axis
  } else if (op == "Split") {
    const int64_t axis = normAxis(l.attrs.getInt("axis", 0), rank);
    if (axis < 0 || axis >= static_cast<int64_t>(rank)) return false;
    int64_t start = 0;
    for (size_t k = 0; k < j; ++k) start += (*dims(l.outputs[k]))[axis];
    if (!sliceDim(t, static_cast<size_t>(axis), start, od[axis])) return false;
  } else if (op == "Slice") {
    std::vector<int64_t> starts, ends, axes, steps;
    if (!constInts(l, 1, starts) || !constInts(l, 2, ends)) return false;
    if (l.inputs.size() > 3 && l.inputs[3] && !constInts(l, 3, axes)) return false;
    if (l.inputs.size() > 4 && l.inputs[4] && !constInts(l, 4, steps)) return false;
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (axes.size() != starts.size()) return false;
    for (size_t i = 0; i < axes.size(); ++i) {
      if (!steps.empty() && steps[i] != 1) return false;
      const int64_t a = normAxis(axes[i], rank);
      if (a < 0 || a >= static_cast<int64_t>(rank)) return false;
      const int64_t size = groupSize(t.dims[a]);
      const int64_t s = std::clamp<int64_t>(starts[i] < 0 ? starts[i] + size : starts[i], 0, size);
      if (!sliceDim(t, static_cast<size_t>(a), s, od[a])) return false;
    }
  } else {
    return false;
  }
  t.copies = true;
  return sizesOf(t) == od;
}

}  // namespace

const Dims* staticDimsOf(const Tensor* t) { return t && t->dimsKnown ? &t->dims : nullptr; }

bool traceView(Tensor* t, StridedView& v, const DimsOf& dims) {
  std::vector<std::pair<const Layer*, size_t>> chain;
  Tensor* cur = t;
  while (cur && isViewLayer(cur->producer, dims) && chain.size() < 64) {
    const Layer* l = cur->producer;
    const size_t j = static_cast<size_t>(std::find(l->outputs.begin(), l->outputs.end(), cur) - l->outputs.begin());
    chain.push_back({l, j});
    cur = l->inputs[0];
  }
  if (!cur || cur->isConstant() || !known(dims(cur)) || !known(dims(t))) return false;
  Trace tr = contiguousTrace(*dims(cur));
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    if (!applyStep(*it->first, it->second, tr, dims)) return false;
  if (sizesOf(tr) != *dims(t)) return false;
  v = StridedView{};
  v.base = cur;
  v.offset = tr.offset;
  v.copies = tr.copies;
  v.sizes = *dims(t);
  return finalStrides(tr, v.strides);
}

namespace {

//! y's strides in the output of layers[0..n) (applied from y on), or false.
bool stridesThrough(const Tensor* y, const std::vector<Layer*>& layers, size_t n, std::vector<int64_t>& strides,
                    const DimsOf& dims) {
  Trace t = contiguousTrace(*dims(layers[n - 1]->outputs[0]));
  for (size_t k = n; k-- > 0;) {  // back from z to y through each layer's inverse
    const Layer* l = layers[k];
    if (l->op == "Transpose") {
      if (!permuteTrace(*l, t, true)) return false;
    } else if (!reshapeTrace(t, *dims(l->inputs[0]))) {
      return false;
    }
  }
  return sizesOf(t) == *dims(y) && finalStrides(t, strides);
}

}  // namespace

bool traceOutputView(const Network& net, Tensor* y, std::vector<Layer*>& layers, Tensor*& z, std::vector<int64_t>& strides,
                     const DimsOf& dims) {
  layers.clear();
  if (!known(dims(y))) return false;
  for (Tensor* cur = y; layers.size() < 64;) {
    Layer* l = soleConsumer(net, cur);
    if (!l || l->inputs.empty() || l->inputs[0] != cur || l->outputs.size() != 1 || !(reshapeLike(l) || l->op == "Transpose")) break;
    const Tensor* o = l->outputs[0];
    if (!known(dims(o)) || o->type != y->type) break;
    layers.push_back(l);
    cur = l->outputs[0];
  }
  for (; !layers.empty(); layers.pop_back())
    if (stridesThrough(y, layers, layers.size(), strides, dims)) {
      z = layers.back()->outputs[0];
      return true;
    }
  return false;
}

}  // namespace kiln
