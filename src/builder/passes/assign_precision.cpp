// Reduced precision (--fp16 / --bf16 on the GPU): every float layer computes in the target type
// unless a precision constraint says otherwise. Walking the layers in order, float inputs of a
// layer are cast to the type it runs in (casts of constants fold away at build time), and the
// network's outputs are cast back to the types the network declares. Value inputs (scales, ROI:
// shape-determining data) keep their types, as do the scales of the integer layers (QLinearConv /
// QLinearMatMul), whose float output without y_scale is written in the target type directly.
#include <map>

#include "core/type_dispatch.h"
#include "builder/passes/passes.h"
#include "ops/fused_attrs.h"
#include "ops/op_registry.h"
#include "ops/qlinear.h"
#include "ops/shape_propagation.h"

namespace kiln {

namespace {


int64_t onnxTypeCode(DataType t) {
  switch (t) {
    case DataType::kHALF: return 10;
    case DataType::kBF16: return 16;
    default: return 1;
  }
}

}  // namespace

Tensor* castTensor(Network& net, Tensor* t, DataType to, std::map<std::pair<Tensor*, DataType>, Tensor*>& cache) {
  auto key = std::make_pair(t, to);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Attributes a;
  a.set("to", onnxTypeCode(to));
  Layer* c = net.addLayer("Cast", {t}, 1, a, t->name + "_to_" + toString(to));
  Tensor* out = c->outputs[0];
  out->type = to;
  out->dims = t->dims;
  out->dimsKnown = true;
  if (t->isConstant()) {  // fold now: weights are stored in the target type
    // Constants sharing one buffer (folded views of shared weights) share the converted one too,
    // so that the plan stores it once.
    for (const auto& [k, done] : cache)
      if (k.second == to && k.first->isConstant() && k.first->value.data() == t->value.data() &&
          k.first->value.bytes() == t->value.bytes() && k.first->type == t->type) {
        out->value = done->value.reshaped(t->dims);
        break;
      }
    if (!out->isConstant()) {
      LayerDesc d = describeLayer(*c);
      inferLayer(d);
      evaluateOnHost(d);
      out->value = d.outputs[0].value;
    }
  }
  cache[key] = out;
  return out;
}

bool assignPrecision(Network& net, DataType target, bool obeyConstraints) {
  if (!isFloatType(target) || target == DataType::kFLOAT) return false;
  std::map<std::pair<Tensor*, DataType>, Tensor*> cache;
  std::map<Tensor*, DataType> declared;
  for (Tensor* out : net.outputs())
    if (isFloatType(out->type)) declared[out] = out->type;
  std::vector<Layer*> order;
  for (auto& l : net.layers()) order.push_back(l.get());
  bool changed = false;
  for (Layer* l : order) {
    const OpDef* def = OpRegistry::instance().find(l->op);
    if (!def || l->op == "Cast" || l->op == "Shape" || l->op == "Size") continue;
    DataType want = target;
    if (obeyConstraints && l->precision && isFloatType(*l->precision)) want = *l->precision;
    // An integer conv's float inputs are its scales (kept exact); without y_scale its float output
    // takes the engine's type, written by the int8 kernel's epilogue instead of a Cast after it.
    const bool integerConv = l->op == "QLinearConv" || l->op == "QLinearMatMul";
    if (l->op == "QLinearConv" && (l->inputs.size() <= kQYScale || !l->inputs[kQYScale]))
      l->attrs.set(attr::kFloatOutType, onnxTypeCode(want));
    for (size_t i = 0; i < l->inputs.size() && !integerConv; ++i) {
      Tensor*& in = l->inputs[i];
      if (!in || !isFloatType(in->type) || in->type == want) continue;
      bool valueInput = false;
      for (int k : def->valueInputs) valueInput = valueInput || k == static_cast<int>(i);
      if (valueInput) continue;
      in = castTensor(net, in, want, cache);
      changed = true;
    }
    // Output types follow from the (possibly cast) inputs.
    LayerDesc d = describeLayer(*l);
    for (auto& o : d.outputs) o = TensorDesc{};
    inferLayer(d);
    for (size_t k = 0; k < l->outputs.size(); ++k) l->outputs[k]->type = d.outputs[k].type;
  }
  // Network outputs keep their declared types: cast back at the end (same binding order/name).
  for (Tensor* out : std::vector<Tensor*>(net.outputs())) {
    auto it = declared.find(out);
    if (it == declared.end() || out->type == it->second) continue;
    Attributes a;
    a.set("to", onnxTypeCode(it->second));
    Layer* c = net.addLayer("Cast", {out}, 1, a, out->name + "_output_cast");
    c->outputs[0]->type = it->second;
    c->outputs[0]->dims = out->dims;
    c->outputs[0]->dimsKnown = true;
    // The cast's output takes the output's name and slot; layers inside the network that read the
    // output (BERT's pooler reads last_hidden_state) keep reading the reduced-precision tensor.
    std::vector<Layer*> readers = net.consumers(out);
    net.replaceUses(out, c->outputs[0]);
    c->inputs[0] = out;
    for (Layer* r : readers)
      for (Tensor*& in : r->inputs)
        if (r != c && in == c->outputs[0]) in = out;
    changed = true;
  }
  if (changed) net.topoSort();
  return changed;
}

}  // namespace kiln
