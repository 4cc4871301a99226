#include "kiln/network.h"

#include <algorithm>
#include <functional>
#include <set>

namespace kiln {

// ---- Attributes ----
namespace {
template <typename T>
const T* getAs(const std::map<std::string, AttrValue>& m, const std::string& n) {
  auto it = m.find(n);
  if (it == m.end()) return nullptr;
  if (auto* p = std::get_if<T>(&it->second)) return p;
  throw Error("attribute '" + n + "' has the wrong type");
}
}  // namespace

int64_t Attributes::getInt(const std::string& n, int64_t d) const {
  auto it = map_.find(n);
  if (it == map_.end()) return d;
  if (auto* p = std::get_if<int64_t>(&it->second)) return *p;
  if (auto* f = std::get_if<float>(&it->second)) return static_cast<int64_t>(*f);
  throw Error("attribute '" + n + "' is not an int");
}
float Attributes::getFloat(const std::string& n, float d) const {
  auto it = map_.find(n);
  if (it == map_.end()) return d;
  if (auto* p = std::get_if<float>(&it->second)) return *p;
  if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<float>(*i);
  throw Error("attribute '" + n + "' is not a float");
}
std::string Attributes::getString(const std::string& n, const std::string& d) const {
  auto* p = getAs<std::string>(map_, n);
  return p ? *p : d;
}
std::vector<int64_t> Attributes::getInts(const std::string& n, const std::vector<int64_t>& d) const {
  auto* p = getAs<std::vector<int64_t>>(map_, n);
  return p ? *p : d;
}
std::vector<float> Attributes::getFloats(const std::string& n, const std::vector<float>& d) const {
  auto* p = getAs<std::vector<float>>(map_, n);
  return p ? *p : d;
}
std::vector<std::string> Attributes::getStrings(const std::string& n) const {
  auto* p = getAs<std::vector<std::string>>(map_, n);
  return p ? *p : std::vector<std::string>{};
}
const HostTensor* Attributes::getTensor(const std::string& n) const { return getAs<HostTensor>(map_, n); }

// ---- Network ----
Network::Network() = default;
Network::~Network() = default;

std::string Network::uniqueName(const std::string& base) {
  std::string n = base.empty() ? "t" : base;
  if (!byName_.count(n)) return n;
  for (;;) {
    std::string c = n + "_" + std::to_string(++counter_);
    if (!byName_.count(c)) return c;
  }
}

void Network::renameTensor(Tensor* t, const std::string& name) {
  if (t->name == name) return;
  if (byName_.count(name)) throw Error("duplicate tensor name '" + name + "'");
  byName_.erase(t->name);
  t->name = name;
  byName_[name] = t;
}

Tensor* Network::newTensor(const std::string& name) {
  auto t = std::make_unique<Tensor>();
  t->name = uniqueName(name);
  Tensor* p = t.get();
  byName_[p->name] = p;
  tensors_.push_back(std::move(t));
  return p;
}

Tensor* Network::addInput(const std::string& name, DataType type, const Dims& dims) {
  if (byName_.count(name)) throw Error("duplicate tensor name '" + name + "'");
  for (int64_t d : dims)
    if (d < -1) throw Error("input '" + name + "' has an invalid dimension " + std::to_string(d));
  Tensor* t = newTensor(name);
  t->type = type;
  t->dims = dims;
  t->dimsKnown = true;
  t->isInput = true;
  inputs_.push_back(t);
  return t;
}

void Network::markOutput(Tensor* t) {
  if (!t) throw Error("markOutput: null tensor");
  if (!t->isOutput) {
    t->isOutput = true;
    outputs_.push_back(t);
  }
}

void Network::unmarkOutput(Tensor* t) {
  t->isOutput = false;
  outputs_.erase(std::remove(outputs_.begin(), outputs_.end(), t), outputs_.end());
}

Tensor* Network::addConstant(const std::string& name, const HostTensor& value) {
  Tensor* t = newTensor(name.empty() ? "const" : name);
  t->type = value.type();
  t->dims = value.dims();
  t->dimsKnown = true;
  t->value = value;
  return t;
}

Layer* Network::addLayer(const std::string& op, const std::vector<Tensor*>& inputs, int nbOutputs,
                         Attributes attrs, const std::string& name) {
  auto l = std::make_unique<Layer>();
  l->op = op;
  l->name = name.empty() ? op + "_" + std::to_string(layers_.size()) : name;
  l->attrs = std::move(attrs);
  l->inputs = inputs;
  for (int i = 0; i < nbOutputs; ++i) {
    Tensor* t = newTensor(l->name + (nbOutputs > 1 ? ":" + std::to_string(i) : ":0"));
    t->producer = l.get();
    l->outputs.push_back(t);
  }
  layers_.push_back(std::move(l));
  return layers_.back().get();
}

Layer* Network::addActivation(Tensor* in, const std::string& op, float alpha, float beta) {
  Attributes a;
  if (op == "LeakyRelu" || op == "Elu" || op == "HardSigmoid" || op == "Selu") a.set("alpha", alpha);
  if (op == "HardSigmoid" || op == "Selu") a.set("beta", beta);
  if (op == "Clip") {
    Tensor* lo = addConstant("", [&] { HostTensor t(DataType::kFLOAT, {}); *t.as<float>() = alpha; return t; }());
    Tensor* hi = addConstant("", [&] { HostTensor t(DataType::kFLOAT, {}); *t.as<float>() = beta; return t; }());
    return addLayer(op, {in, lo, hi}, 1);
  }
  return addLayer(op, {in}, 1, a);
}

Layer* Network::addElementWise(Tensor* a, Tensor* b, const std::string& op) { return addLayer(op, {a, b}, 1); }
Layer* Network::addMatMul(Tensor* a, Tensor* b) { return addLayer("MatMul", {a, b}, 1); }

Layer* Network::addConvolution(Tensor* in, const HostTensor& weights, const HostTensor& bias,
                               const std::vector<int64_t>& strides, const std::vector<int64_t>& pads,
                               int64_t group) {
  Attributes a;
  a.set("strides", strides);
  a.set("pads", pads);
  a.set("group", group);
  std::vector<Tensor*> ins{in, addConstant("", weights)};
  if (bias.valid()) ins.push_back(addConstant("", bias));
  return addLayer("Conv", ins, 1, a);
}

Layer* Network::addSoftmax(Tensor* in, int64_t axis) {
  Attributes a;
  a.set("axis", axis);
  return addLayer("Softmax", {in}, 1, a);
}

Tensor* Network::findTensor(const std::string& name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : it->second;
}

std::vector<Layer*> Network::consumers(const Tensor* t) const {
  std::vector<Layer*> v;
  for (auto& l : layers_)
    for (Tensor* i : l->inputs)
      if (i == t) {
        v.push_back(l.get());
        break;
      }
  return v;
}

void Network::replaceUses(Tensor* from, Tensor* to) {
  for (auto& l : layers_)
    for (Tensor*& i : l->inputs)
      if (i == from) i = to;
  if (from->isOutput) {
    // Keep the output's name stable: the replacement takes over the name.
    for (Tensor*& o : outputs_)
      if (o == from) o = to;
    from->isOutput = false;
    to->isOutput = true;
    if (!to->isInput && !to->isConstant()) {
      std::string n = from->name;
      byName_.erase(from->name);
      from->name = uniqueName(n + "_replaced");
      byName_[from->name] = from;
      byName_.erase(to->name);
      to->name = n;
      byName_[n] = to;
    }
  }
}

void Network::removeLayer(Layer* l) {
  for (Tensor* o : l->outputs)
    if (o && o->producer == l) o->producer = nullptr;
  layers_.erase(std::remove_if(layers_.begin(), layers_.end(), [&](auto& p) { return p.get() == l; }),
                layers_.end());
}

void Network::topoSort() {
  std::map<const Layer*, int> state;  // 0 new, 1 visiting, 2 done
  std::vector<std::unique_ptr<Layer>> sorted;
  std::map<const Layer*, std::unique_ptr<Layer>*> owner;
  for (auto& l : layers_) owner[l.get()] = &l;
  std::function<void(Layer*)> visit = [&](Layer* l) {
    int& s = state[l];
    if (s == 2) return;
    if (s == 1) throw Error("the graph has a cycle through layer '" + l->name + "'");
    s = 1;
    for (Tensor* in : l->inputs)
      if (in && in->producer) {
        if (!owner.count(in->producer))
          throw Error("layer '" + l->name + "' reads tensor '" + in->name + "' of a removed layer");
        visit(in->producer);
      }
    state[l] = 2;
    sorted.push_back(std::move(*owner[l]));
  };
  // Iterative over roots; recursion depth bounded by graph depth.
  std::vector<Layer*> order;
  for (auto& l : layers_) order.push_back(l.get());
  for (Layer* l : order) visit(l);
  layers_ = std::move(sorted);
}

void Network::removeDeadLayers() {
  std::set<const Tensor*> live(outputs_.begin(), outputs_.end());
  std::vector<bool> keep(layers_.size(), false);
  // Backwards over the layers until nothing changes: one sweep when they are in topological
  // order; a pass that appended producers after their readers needs another (a single sweep
  // dropped such a producer and left its reader reading nothing).
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = layers_.size(); i-- > 0;) {
      if (keep[i]) continue;
      Layer* l = layers_[i].get();
      bool needed = false;
      for (Tensor* o : l->outputs)
        if (live.count(o)) needed = true;
      if (!needed) continue;
      keep[i] = grew = true;
      for (Tensor* in : l->inputs)
        if (in) live.insert(in);
    }
  }
  std::vector<std::unique_ptr<Layer>> kept;
  for (size_t i = 0; i < layers_.size(); ++i)
    if (keep[i]) {
      for (Tensor* o : layers_[i]->outputs) live.insert(o);  // unused outputs of kept layers stay
      kept.push_back(std::move(layers_[i]));
    } else {
      for (Tensor* o : layers_[i]->outputs) o->producer = nullptr;
    }
  layers_ = std::move(kept);
  // Drop tensors nobody references (keep inputs: they are part of the interface).
  std::vector<std::unique_ptr<Tensor>> tk;
  for (auto& t : tensors_) {
    if (t->isInput || live.count(t.get())) tk.push_back(std::move(t));
    else byName_.erase(t->name);
  }
  tensors_ = std::move(tk);
}

}  // namespace kiln
