// cloneNetwork (network_clone.h).
#include "ir/network_clone.h"

#include <map>

namespace kiln {

namespace {

void copyTensorFields(const Tensor& from, Tensor& to) {
  to.type = from.type;
  to.dims = from.dims;
  to.dimsKnown = from.dimsKnown;
  to.value = from.value;
}

}  // namespace

std::unique_ptr<Network> cloneNetwork(const Network& src) {
  auto dst = std::make_unique<Network>();
  std::map<const Tensor*, Tensor*> map;
  for (Tensor* in : src.inputs()) {
    Tensor* t = dst->addInput(in->name, in->type, in->dims);
    copyTensorFields(*in, *t);
    t->isInput = true;
    map[in] = t;
  }
  auto get = [&](Tensor* t) -> Tensor* {
    if (!t) return nullptr;
    if (auto it = map.find(t); it != map.end()) return it->second;
    if (!t->isConstant() || t->producer) throw Error("cloneNetwork: tensor '" + t->name + "' is read before it is produced");
    Tensor* c = dst->addConstant(t->name, t->value);
    copyTensorFields(*t, *c);
    return map[t] = c;
  };
  for (const auto& l : src.layers()) {
    std::vector<Tensor*> in;
    for (Tensor* t : l->inputs) in.push_back(get(t));
    Layer* c = dst->addLayer(l->op, in, static_cast<int>(l->outputs.size()), l->attrs, l->name);
    c->domain = l->domain;
    c->fusedOps = l->fusedOps;
    c->precision = l->precision;
    c->outputType = l->outputType;
    for (size_t k = 0; k < l->outputs.size(); ++k) {
      Tensor* o = c->outputs[k];
      if (o->name != l->outputs[k]->name) dst->renameTensor(o, l->outputs[k]->name);
      copyTensorFields(*l->outputs[k], *o);
      map[l->outputs[k]] = o;
    }
  }
  for (Tensor* out : src.outputs()) dst->markOutput(get(out));
  return dst;
}

}  // namespace kiln
