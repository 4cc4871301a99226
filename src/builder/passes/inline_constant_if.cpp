#include "builder/passes/inline_constant_if.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "ops/shape_propagation.h"

namespace kiln {

namespace {

//! Gather(Shape(x), constant indices) of dims of x that are static is a constant even where other
//! dims of x are dynamic: torch's `if x.shape[1] > 4:` under a dynamic batch. (Shape alone has no
//! value then, so the condition would stay a run-time one.)
bool foldStaticDimsOfShape(Layer* l) {
  if (l->op != "Gather" || l->inputs.size() != 2 || !l->inputs[0] || !l->inputs[1] || l->outputs.size() != 1 ||
      l->attrs.getInt("axis", 0) != 0)
    return false;
  const Layer* shape = l->inputs[0]->producer;
  const Tensor* idx = l->inputs[1];
  if (!shape || shape->op != "Shape" || shape->inputs.empty() || !shape->inputs[0] || !shape->inputs[0]->dimsKnown ||
      !idx->isConstant())
    return false;
  const Dims& d = shape->inputs[0]->dims;
  const int64_t rank = static_cast<int64_t>(d.size());
  auto clampAxis = [&](int64_t a) { return std::clamp(a < 0 ? a + rank : a, int64_t(0), rank); };
  const int64_t start = clampAxis(shape->attrs.getInt("start", 0)), end = clampAxis(shape->attrs.getInt("end", rank));
  const int64_t n = std::max(int64_t(0), end - start);
  HostTensor v(DataType::kINT64, idx->value.dims());
  for (int64_t i = 0; i < idx->value.count(); ++i) {
    int64_t k = idx->value.getInt(i);
    if (k < 0) k += n;
    if (k < 0 || k >= n || d[start + k] < 0) return false;
    v.as<int64_t>()[i] = d[start + k];
  }
  Tensor* out = l->outputs[0];
  out->type = DataType::kINT64;
  out->dims = v.dims();
  out->dimsKnown = true;
  out->value = v;
  return true;
}

//! Infers the layers `t` depends on (in network order), folding what the host can compute.
//! A layer that cannot be inferred (a branch invalid for these shapes) leaves `t` unknown.
void inferAncestors(Network& net, Tensor* t, std::set<const Layer*>& done) {
  std::unordered_map<const Layer*, size_t> order;
  for (size_t i = 0; i < net.layers().size(); ++i) order[net.layers()[i].get()] = i;
  std::set<const Layer*> needed;
  std::vector<Tensor*> stack{t};
  while (!stack.empty()) {
    Tensor* x = stack.back();
    stack.pop_back();
    if (!x || !x->producer || done.count(x->producer) || !needed.insert(x->producer).second) continue;
    for (Tensor* in : x->producer->inputs) stack.push_back(in);
  }
  std::vector<Layer*> layers;
  for (const Layer* l : needed) layers.push_back(const_cast<Layer*>(l));
  std::sort(layers.begin(), layers.end(), [&](const Layer* a, const Layer* b) { return order[a] < order[b]; });
  for (Layer* l : layers) {
    done.insert(l);
    if (foldStaticDimsOfShape(l)) continue;
    try {
      inferLayerInPlace(*l, /*fold=*/true);
    } catch (const Error&) {
      return;  // the full propagation reports it if the layer stays
    }
  }
}

void replaceByTakenBranch(Network& net, Layer* l, bool taken) {
  const size_t n = l->outputs.size();
  std::vector<Tensor*> chosen(n);
  for (size_t k = 0; k < n; ++k) chosen[k] = l->inputs[taken ? 1 + k : 1 + n + k];
  const std::vector<Tensor*> outs = l->outputs;
  l->op = "Identity";
  l->inputs = {chosen[0]};
  l->outputs = {outs[0]};
  for (size_t k = 1; k < n; ++k) {
    Layer* id = net.addLayer("Identity", {chosen[k]}, 0, {}, l->name + ":" + std::to_string(k));
    id->outputs.push_back(outs[k]);
    outs[k]->producer = id;
  }
}

}  // namespace

bool inlineConstantIfs(Network& net) {
  net.topoSort();
  std::vector<Layer*> ifs;
  for (auto& l : net.layers())
    if (l->op == "If" && l->domain.empty() && !l->inputs.empty() && l->inputs[0] && !l->outputs.empty() &&
        l->inputs.size() == 1 + 2 * l->outputs.size())
      ifs.push_back(l.get());
  if (ifs.empty()) return false;
  std::set<const Layer*> done;
  bool changed = false;
  for (Layer* l : ifs) {  // network order: an outer If's condition is settled before its branches' Ifs
    Tensor* cond = l->inputs[0];
    inferAncestors(net, cond, done);
    if (!cond->isConstant() || cond->value.count() != 1) continue;
    replaceByTakenBranch(net, l, cond->value.getInt(0) != 0);
    changed = true;
  }
  if (changed) {
    net.topoSort();  // first: removeDeadLayers walks the layers backwards in order, and the Identity
    net.removeDeadLayers();  // layers of a multi-output If's other outputs were appended last
  }
  return changed;
}

}  // namespace kiln
