// MatMul(A, constant W[K,N]) -> Add(constant bias of N values): the bias joins the GEMM epilogue.
#include "builder/passes/passes.h"

namespace kiln {

bool fuseMatMulBias(Network& net) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* mm = net.layer(static_cast<int>(i));
    if (mm->op != "MatMul" || mm->inputs.size() != 2 || hasFusedActivation(mm->attrs)) continue;
    Tensor* w = mm->inputs[1];
    Tensor* y = mm->outputs[0];
    if (!w->isConstant() || w->dims.size() != 2 || w->type != DataType::kFLOAT || y->type != DataType::kFLOAT) continue;
    const int64_t n = w->dims[1];
    Layer* add = soleConsumer(net, y);
    if (!add || add->op != "Add" || add->inputs.size() != 2) continue;
    Tensor* b = add->inputs[0] == y ? add->inputs[1] : add->inputs[0];
    if (!b || !b->isConstant() || b->type != DataType::kFLOAT || b->value.count() != n) continue;
    bool lastDimOnly = !b->dims.empty() && b->dims.back() == n && b->dims.size() <= y->dims.size();
    if (!lastDimOnly) continue;
    mm->inputs.push_back(b->dims.size() == 1 ? b : net.addConstant(b->name + "_flat", b->value.reshaped({n})));
    recordFusion(mm, add);
    Tensor* out = add->outputs[0];
    net.removeLayer(add);
    net.replaceUses(out, y);
    changed = true;
  }
  return changed;
}

}  // namespace kiln
