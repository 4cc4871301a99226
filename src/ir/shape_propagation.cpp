#include "ir/shape_propagation.h"

#include "ops/op_registry.h"

namespace kiln {

namespace {
// Values up to this many elements are computed on the host while propagating shapes.
constexpr int64_t kMaxFoldElements = int64_t(1) << 22;
}

LayerDesc describeLayer(const Layer& l) {
  LayerDesc d;
  d.name = l.name;
  d.op = l.op;
  d.domain = l.domain;
  d.attrs = &l.attrs;
  for (Tensor* t : l.inputs) {
    d.inputPresent.push_back(t != nullptr);
    TensorDesc td;
    if (t) {
      td.type = t->type;
      td.dims = t->dims;
      td.value = t->value;
    }
    d.inputs.push_back(td);
  }
  for (Tensor* t : l.outputs) {
    TensorDesc td;
    td.type = t->type;
    td.dims = t->dims;
    d.outputs.push_back(td);
  }
  return d;
}

void inferLayerInPlace(Layer& l, bool fold) {
  for (Tensor* in : l.inputs)
    if (in && !in->dimsKnown) throw Error("layer '" + l.name + "' reads tensor '" + in->name + "' which has no producer");
  if (!l.domain.empty() && l.domain != "ai.onnx")
    throw Error("layer '" + l.name + "': no shape inference for op '" + l.op + "' in domain '" + l.domain + "'");
  LayerDesc d = describeLayer(l);
  for (auto& o : d.outputs) o = TensorDesc{};
  inferLayer(d);
  if (d.outputs.size() != l.outputs.size())
    throw Error("layer '" + l.name + "': inference produced " + std::to_string(d.outputs.size()) + " outputs, expected " +
                std::to_string(l.outputs.size()));
  const OpDef* def = OpRegistry::instance().find(l.op);
  bool known = true;
  for (auto& o : d.outputs) known = known && o.value.valid();
  if (fold && !known && def->foldable && allInputsKnown(d)) {
    bool small = true;
    for (auto& o : d.outputs) small = small && isStatic(o.dims) && volume(o.dims) <= kMaxFoldElements;
    if (small) evaluateOnHost(d);
  }
  for (size_t i = 0; i < l.outputs.size(); ++i) {
    Tensor* t = l.outputs[i];
    t->type = d.outputs[i].type;
    t->dims = d.outputs[i].dims;
    t->dimsKnown = true;
    if (fold && d.outputs[i].value.valid()) t->value = d.outputs[i].value;
  }
}

void propagateShapes(Network& net, const std::map<std::string, Dims>* inputDims, bool fold) {
  if (inputDims)
    for (auto& [name, dims] : *inputDims) {
      Tensor* t = net.findTensor(name);
      if (!t || !t->isInput) throw Error("unknown network input '" + name + "'");
      t->dims = dims;
    }
  for (auto& lp : net.layers()) inferLayerInPlace(*lp, fold);
}

}  // namespace kiln
