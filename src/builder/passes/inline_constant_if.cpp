#include "builder/passes/inline_constant_if.h"

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>

#include "ops/shape_propagation.h"

namespace kiln {

namespace {

//! Infers the layers `t` depends on (in network order), folding what the host can compute
//! (static dims of a partly dynamic shape included: inferLayerInPlace folds them).
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

bool inlineConstantIfs(Network& net, const std::function<InputSamples()>& samples) {
  net.topoSort();
  std::vector<Layer*> ifs;
  for (auto& l : net.layers())
    if (l->op == "If" && l->domain.empty() && !l->inputs.empty() && l->inputs[0] && !l->outputs.empty() &&
        l->inputs.size() == 1 + 2 * l->outputs.size())
      ifs.push_back(l.get());
  if (ifs.empty()) return false;
  std::set<const Layer*> done;
  bool changed = false;
  std::optional<InputSamples> drawn;
  for (Layer* l : ifs) {  // network order: an outer If's condition is settled before its branches' Ifs
    Tensor* cond = l->inputs[0];
    inferAncestors(net, cond, done);
    if (cond->isConstant() && cond->value.count() == 1) {
      replaceByTakenBranch(net, l, cond->value.getInt(0) != 0);
      changed = true;
      continue;
    }
    if (!samples) continue;
    if (!drawn) drawn = samples();
    if (drawn->empty()) continue;  // a static network: no sample moves anything
    // A fresh SymbolicDims per If: the ones replaced before changed what their readers compute.
    SymbolicDims sym(*drawn);
    const HostTensor* v = sym.constantValue(cond);
    if (!v || v->count() != 1) continue;
    replaceByTakenBranch(net, l, v->getInt(0) != 0);
    changed = true;
  }
  if (changed) {
    net.topoSort();  // this runs outside the builder's pass loop: shape propagation follows and needs the order
    net.removeDeadLayers();
  }
  return changed;
}

}  // namespace kiln
