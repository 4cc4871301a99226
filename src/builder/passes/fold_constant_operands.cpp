// (x + c1) + c2 -> x + (c1 + c2) and (x * c1) * c2 -> x * (c1 * c2) for float32 constants c1, c2
// whose broadcast does not grow x's shape: one layer and one constant instead of two. Exports stack
// constant addends where the model adds several masks or biases in a row (transformers' Swin-V2
// adds two constant [1, P, 1, S, S] terms to its windowed scores between the same two Reshapes,
// which the attention fusion's window-mask form takes only as one Add).
#include "builder/passes/passes.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

bool floatConstant(const Tensor* t) { return t && t->isConstant() && t->type == DataType::kFLOAT && t->value.valid(); }

//! The constant operand of a two-input `op` layer and its other input, or false.
bool splitConstant(const Layer* l, const std::string& op, Tensor** x, Tensor** c) {
  if (!l || l->op != op || l->inputs.size() != 2 || l->outputs.size() != 1 || !l->inputs[0] || !l->inputs[1]) return false;
  for (int s = 0; s < 2; ++s)
    if (floatConstant(l->inputs[1 - s]) && !l->inputs[s]->isConstant()) {
      *x = l->inputs[s];
      *c = l->inputs[1 - s];
      return true;
    }
  return false;
}

//! a op b with numpy broadcasting (float32), or an invalid tensor when they do not broadcast.
HostTensor combine(const HostTensor& a, const HostTensor& b, bool add) {
  const size_t rank = std::max(a.dims().size(), b.dims().size());
  Dims out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + a.dims().size() >= rank ? a.dims()[i + a.dims().size() - rank] : 1;
    const int64_t db = i + b.dims().size() >= rank ? b.dims()[i + b.dims().size() - rank] : 1;
    if (da != db && da != 1 && db != 1) return HostTensor();
    out[i] = std::max(da, db);
  }
  HostTensor r(DataType::kFLOAT, out);
  const std::vector<int64_t> sa = broadcastStrides(a.dims(), out), sb = broadcastStrides(b.dims(), out), so = rowMajorStrides(out);
  const float *pa = a.as<float>(), *pb = b.as<float>();
  float* pr = r.as<float>();
  for (int64_t i = 0; i < r.count(); ++i) {
    int64_t rem = i, oa = 0, ob = 0;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t k = rem / so[d];
      rem %= so[d];
      oa += k * sa[d];
      ob += k * sb[d];
    }
    pr[i] = add ? pa[oa] + pb[ob] : pa[oa] * pb[ob];
  }
  return r;
}

}  // namespace

bool foldConstantOperands(Network& net) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* outer = net.layer(static_cast<int>(i));
    for (const char* op : {"Add", "Mul"}) {
      Tensor *y = nullptr, *c2 = nullptr, *x = nullptr, *c1 = nullptr;
      if (!splitConstant(outer, op, &y, &c2) || !splitConstant(y->producer, op, &x, &c1) || soleConsumer(net, y) != outer ||
          y->isOutput)
        continue;
      const HostTensor sum = combine(c1->value, c2->value, std::string(op) == "Add");
      if (!sum.valid() || sum.dims().size() > x->dims.size() || !x->dimsKnown) continue;
      // The combined constant must not broadcast x to a larger shape than the outer layer's output.
      bool fits = outer->outputs[0]->dimsKnown && outer->outputs[0]->dims.size() == x->dims.size();
      for (size_t d = 0; fits && d < sum.dims().size(); ++d) {
        const int64_t s = sum.dims()[d], o = outer->outputs[0]->dims[x->dims.size() - sum.dims().size() + d];
        fits = s == 1 || s == o;
      }
      if (!fits) continue;
      Tensor* folded = net.addConstant(net.uniqueName(outer->name + "_folded_operand"), sum);
      Layer* inner = y->producer;
      Layer* l = net.addLayer(op, {x, folded}, 1, {}, net.uniqueName(outer->name + "_folded"));
      replaceWithFused(net, l, {outer, inner}, outer->outputs[0]);
      changed = true;
      i = static_cast<size_t>(-1);  // re-sorted: start over
      break;
    }
  }
  return changed;
}

}  // namespace kiln
