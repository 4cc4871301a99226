#include "ops/shape_propagation.h"

#include <algorithm>
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

//! Gather(Shape(x), constant indices) of dims of x that are static is a constant even where other
//! dims of x are dynamic: torch's `if x.shape[1] > 4:` under a dynamic batch. (Shape alone has no
//! value then, so the condition would stay a run-time one; the split sizes of torch's
//! tensor_split, computed from a static dim, would stay unknown at import.)
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
}  // namespace

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
  if (fold && foldStaticDimsOfShape(&l)) return;
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
