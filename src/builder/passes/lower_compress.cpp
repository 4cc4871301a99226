// Compress with a constant condition -> Gather with the kept indices. The condition fixes the
// output shape at build time, so the op is an index gather: the backends' Gather kernels (CUDA
// included, which has no Compress kernel) run it. A computed condition gives a data-dependent
// output shape: Compress(x, c) is then Gather(x, Reshape(NonZero(c), [-1])), so that the only
// data-dependent layer is NonZero (computed on the host once c is read back, runtime/context.cpp)
// and the gather runs on any backend's Gather kernels.
#include "builder/passes/passes.h"
#include "ops/compress_plan.h"
#include "ops/shape_propagation.h"

namespace kiln {

bool lowerConstantCompress(Network& net) {
  bool changed = false;
  for (int i = 0; i < net.nbLayers(); ++i) {
    Layer* l = net.layer(i);
    if (l->op != "Compress" || !l->domain.empty() || l->inputs.size() != 2 || !l->inputs[0] || !l->inputs[1] ||
        !l->inputs[1]->isConstant() || !l->inputs[0]->dimsKnown)
      continue;
    const CompressPlan plan = compressPlan(describeLayer(*l));  // validated as shape inference does
    Tensor* data = l->inputs[0];
    HostTensor indices(DataType::kINT64, {static_cast<int64_t>(plan.kept.size())});
    for (size_t k = 0; k < plan.kept.size(); ++k) indices.as<int64_t>()[k] = plan.kept[k];
    Tensor* src = data;
    if (plan.flat) {  // Compress without an axis works on the flattened tensor
      HostTensor shape(DataType::kINT64, {1});
      shape.as<int64_t>()[0] = -1;
      Layer* r = net.addLayer("Reshape", {data, net.addConstant(net.uniqueName(l->name + "_flat_shape"), shape)}, 1, {},
                              net.uniqueName(l->name + "_flatten"));
      src = r->outputs[0];
    }
    Attributes a;
    a.set("axis", plan.axis);
    l->op = "Gather";
    l->attrs = a;
    l->inputs = {src, net.addConstant(net.uniqueName(l->name + "_kept"), indices)};
    changed = true;
  }
  return changed;
}

bool lowerComputedCompress(Network& net) {
  bool changed = false;
  for (int i = 0; i < net.nbLayers(); ++i) {
    Layer* l = net.layer(i);
    if (l->op != "Compress" || !l->domain.empty() || l->inputs.size() != 2 || !l->inputs[0] || !l->inputs[1] ||
        l->inputs[1]->isConstant() || !l->inputs[1]->dimsKnown || l->inputs[1]->dims.size() != 1)
      continue;
    Tensor* data = l->inputs[0];
    const bool flat = !l->attrs.has("axis");
    auto constant = [&](const std::string& what, int64_t v) {
      HostTensor t(DataType::kINT64, {1});
      t.as<int64_t>()[0] = v;
      return net.addConstant(net.uniqueName(l->name + what), t);
    };
    if (flat)  // Compress without an axis works on the flattened tensor
      data = net.addLayer("Reshape", {data, constant("_flat_shape", -1)}, 1, {}, net.uniqueName(l->name + "_flatten"))->outputs[0];
    Tensor* nz = net.addLayer("NonZero", {l->inputs[1]}, 1, {}, net.uniqueName(l->name + "_nonzero"))->outputs[0];
    Tensor* idx = net.addLayer("Reshape", {nz, constant("_index_shape", -1)}, 1, {}, net.uniqueName(l->name + "_indices"))->outputs[0];
    Attributes a;
    a.set("axis", flat ? int64_t(0) : l->attrs.getInt("axis", 0));
    l->op = "Gather";
    l->attrs = a;
    l->inputs = {data, idx};
    changed = true;
  }
  return changed;
}

}  // namespace kiln
