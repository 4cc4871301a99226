#include "ops/shape_propagation.h"

#include <string>

#include "ops/op_registry.h"

namespace kiln {

namespace {
// Values up to this many elements are computed on the host while propagating shapes.
constexpr int64_t kMaxFoldElements = int64_t(1) << 22;

// Ops whose output is the input's buffer with other dims: folded at any size by sharing the
// buffer. Left unfolded, a large constant behind one (ALBERT's shared [4096, 16384] weights
// behind Identity nodes) would be copied at every inference; shared, the plan file stores the
// buffer once (plan_file.cpp).
bool viewOfInput(const std::string& op) {
  return op == "Identity" || op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze";
}
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
    if (viewOfInput(l.op) && d.outputs.size() == 1 && isStatic(d.outputs[0].dims) && d.inputs[0].value.valid() &&
        d.outputs[0].type == d.inputs[0].type && volume(d.outputs[0].dims) == d.inputs[0].value.count()) {
      d.outputs[0].value = d.inputs[0].value.reshaped(d.outputs[0].dims);  // shares the buffer (plan files store it once)
    } else if (small || ((l.op == "Transpose" || l.op == "Cast") && isStatic(d.outputs[0].dims))) {
      // Transpose and Cast of a large constant too: weights transposed (the dynamo exporter's
      // Linear: MatMul(x, Transpose(W))) or converted once here rather than at every inference.
      evaluateOnHost(d);
    }
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

// Network's public shape inference is op semantics, so it is defined on this floor, not in ir/.
void Network::inferShapes() { propagateShapes(*this, nullptr); }

}  // namespace kiln
