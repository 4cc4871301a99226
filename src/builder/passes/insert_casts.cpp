// A layer that the backend cannot run with float16/bfloat16 tensors (the CPU: anything but raw
// data movement) gets Cast layers to float32 on those inputs and back on its outputs.
#include "core/type_dispatch.h"
#include "builder/passes/passes.h"
#include "ops/op_registry.h"

namespace kiln {

namespace {
int64_t onnxCode(DataType t) { return t == DataType::kHALF ? 10 : t == DataType::kBF16 ? 16 : 1; }
}  // namespace

bool insertFloatCasts(Network& net, const std::function<bool(const Layer&)>& runsAsIs) {
  bool changed = false;
  std::vector<Layer*> layers;
  for (auto& l : net.layers()) layers.push_back(l.get());
  for (Layer* l : layers) {
    if (l->op == "Cast" || l->op == "CastLike" || runsAsIs(*l)) continue;
    bool reduced = false;
    for (Tensor* in : l->inputs) reduced = reduced || (in && isHalfType(in->type));
    if (!reduced) continue;
    for (Tensor*& in : l->inputs) {
      if (!in || !isHalfType(in->type)) continue;
      Attributes a;
      a.set("to", int64_t(1));
      Layer* c = net.addLayer("Cast", {in}, 1, a, l->name + "_in_to_float");
      c->outputs[0]->type = DataType::kFLOAT;
      c->outputs[0]->dims = in->dims;
      c->outputs[0]->dimsKnown = true;
      in = c->outputs[0];
    }
    for (Tensor*& out : l->outputs) {
      if (!isHalfType(out->type)) continue;
      Tensor* original = out;
      Tensor* f = net.newTensor(original->name + "_float");
      f->type = DataType::kFLOAT;
      f->dims = original->dims;
      f->dimsKnown = true;
      f->producer = l;
      out = f;
      Attributes a;
      a.set("to", onnxCode(original->type));
      Layer* c = net.addLayer("Cast", {f}, 0, a, l->name + "_out_to_" + toString(original->type));
      c->outputs.push_back(original);
      original->producer = c;
    }
    changed = true;
  }
  if (changed) net.topoSort();
  return changed;
}

}  // namespace kiln
