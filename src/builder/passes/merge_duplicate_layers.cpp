// Common subexpression elimination: two layers with the same op, attributes and inputs compute the
// same outputs, so the later one's readers read the earlier one's outputs and it is removed.
// Exporters repeat work per block: a dynamic T5 sums its run-time position bias and mask once per
// attention layer (18 [B, H, S, S] Adds where one per stack is needed), models cast or unsqueeze
// one mask per layer, and shape arithmetic is traced again for every block. Inputs compare by
// tensor; small constants compare by value (the exporters emit one Constant node per use, so equal
// values come as distinct tensors). Layers are visited in topological order and merged at once,
// so the readers of a merged layer can merge in the same sweep.
// Not merged: random ops (two draws differ), plugins (a plugin may keep state or side effects),
// loops (their bodies are attributes this pass does not compare), layers that write a network
// output (the output keeps its name and its own buffer), and layers whose precision constraints
// differ (the key includes them).
#include <unordered_map>

#include "builder/passes/passes.h"
#include "plugin/plugin_layer.h"

namespace kiln {

namespace {

constexpr size_t kMaxValueBytes = 4096;  // larger constants compare by tensor (weights are not duplicated by value)

bool mergeable(const Layer* l) {
  static const char* const kNever[] = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                                       "Multinomial",  "Bernoulli",     "Loop",             "Scan",
                                       kPluginOp};
  if (!l->domain.empty() || l->outputs.empty()) return false;
  for (const char* op : kNever)
    if (l->op == op) return false;
  for (const Tensor* t : l->outputs)
    if (!t || t->isOutput) return false;
  return true;
}

void appendBytes(std::string& key, const void* p, size_t n) { key.append(static_cast<const char*>(p), n); }

template <typename T>
void appendScalar(std::string& key, T v) {
  appendBytes(key, &v, sizeof(v));
}

//! A tensor value's identity: type, dims and bytes. False when it is too large to key by value.
bool appendValue(std::string& key, const HostTensor& v) {
  if (v.bytes() > kMaxValueBytes) return false;
  appendScalar(key, static_cast<int32_t>(v.type()));
  appendScalar(key, v.dims().size());
  for (int64_t d : v.dims()) appendScalar(key, d);
  appendBytes(key, v.data(), v.bytes());
  return true;
}

//! One attribute's value, with its alternative's index (an int 1 and a float 1 differ).
bool appendAttr(std::string& key, const AttrValue& v) {
  appendScalar(key, v.index());
  if (auto* i = std::get_if<int64_t>(&v)) appendScalar(key, *i);
  else if (auto* f = std::get_if<float>(&v)) appendScalar(key, *f);
  else if (auto* s = std::get_if<std::string>(&v)) appendScalar(key, s->size()), key += *s;
  else if (auto* is = std::get_if<std::vector<int64_t>>(&v)) appendScalar(key, is->size()), appendBytes(key, is->data(), is->size() * sizeof(int64_t));
  else if (auto* fs = std::get_if<std::vector<float>>(&v)) appendScalar(key, fs->size()), appendBytes(key, fs->data(), fs->size() * sizeof(float));
  else if (auto* ss = std::get_if<std::vector<std::string>>(&v)) {
    appendScalar(key, ss->size());
    for (const std::string& s : *ss) appendScalar(key, s.size()), key += s;
  } else if (auto* t = std::get_if<HostTensor>(&v)) {
    return appendValue(key, *t);
  }
  return true;
}

//! What determines the layer's outputs, as bytes; false when it cannot be keyed.
bool layerKey(const Layer* l, std::string& key) {
  key = l->op;
  key += '\0';
  appendScalar(key, l->outputs.size());
  appendScalar(key, l->precision ? static_cast<int32_t>(*l->precision) : -1);
  appendScalar(key, l->outputType ? static_cast<int32_t>(*l->outputType) : -1);
  appendScalar(key, l->attrs.all().size());
  for (const auto& [name, v] : l->attrs.all()) {
    appendScalar(key, name.size());
    key += name;
    if (!appendAttr(key, v)) return false;
  }
  appendScalar(key, l->inputs.size());
  for (const Tensor* t : l->inputs) {
    if (!t) {
      key += 'n';
    } else if (t->isConstant() && t->value.bytes() <= kMaxValueBytes) {
      key += 'c';
      appendValue(key, t->value);
    } else {
      key += 't';
      appendScalar(key, reinterpret_cast<uintptr_t>(t));
    }
  }
  return true;
}

}  // namespace

bool mergeDuplicateLayers(Network& net) {
  std::unordered_map<std::string, Layer*> first;
  std::vector<Layer*> dead;
  std::string key;
  for (const auto& lp : net.layers()) {
    Layer* l = lp.get();
    if (!mergeable(l) || !layerKey(l, key)) continue;
    auto [it, fresh] = first.emplace(key, l);
    if (fresh) continue;
    Layer* keep = it->second;
    for (size_t k = 0; k < l->outputs.size(); ++k) net.replaceUses(l->outputs[k], keep->outputs[k]);
    dead.push_back(l);
  }
  for (Layer* l : dead) net.removeLayer(l);
  return !dead.empty();
}

}  // namespace kiln
