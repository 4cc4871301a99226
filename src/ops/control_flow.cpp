// `If` as a layer: the importer inlines both branches as ordinary layers (onnx/importer.cpp) and
// the If layer reads [cond, then outputs..., else outputs...] and passes the taken branch's
// tensors on. When the condition is known at build time the builder replaces the layer by the
// taken branch (builder/passes/inline_constant_if.cpp); otherwise both branches run and the
// layer selects at run time; where the branches' dims differ, the output's dims are data-dependent
// (the execution context reads the condition back and resolves them, runtime/context.cpp).
#include "ops/control_flow.h"

#include <cstring>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

size_t branchOutputs(const LayerDesc& l) {
  if (l.inputs.empty() || (l.inputs.size() - 1) % 2 != 0 || (l.inputs.size() - 1) / 2 != l.outputs.size())
    opError(l, "expects a condition and two branches of " + std::to_string(l.outputs.size()) + " outputs each, got " +
                   std::to_string(l.inputs.size()) + " inputs");
  return l.outputs.size();
}

//! The taken branch (true = then) when the condition's value is known.
const bool* knownCondition(const LayerDesc& l, bool* storage) {
  const HostTensor& c = l.inputs[0].value;
  if (!c.valid()) return nullptr;
  *storage = c.getInt(0) != 0;
  return storage;
}

void inferIf(LayerDesc& l) {
  const size_t n = branchOutputs(l);
  for (size_t k = 0; k <= 2 * n; ++k)
    if (!l.present(k)) opError(l, "input " + std::to_string(k) + " is missing");
  const TensorDesc& cond = l.inputs[0];
  if (cond.type != DataType::kBOOL) opError(l, std::string("the condition must be bool, got ") + toString(cond.type));
  for (int64_t d : cond.dims)
    if (d > 1) opError(l, "the condition must hold one element, got dims " + toString(cond.dims));
  bool taken = false;
  const bool* known = knownCondition(l, &taken);
  for (size_t k = 0; k < n; ++k) {
    const TensorDesc& a = l.inputs[1 + k];
    const TensorDesc& b = l.inputs[1 + n + k];
    if (a.type != b.type)
      opError(l, "output " + std::to_string(k) + " is " + std::string(toString(a.type)) + " in the then-branch but " + toString(b.type) +
                     " in the else-branch");
    if (known) {
      const TensorDesc& c = *known ? a : b;
      setOutput(l, k, c.type, c.dims);
      if (c.value.valid()) l.outputs[k].value = c.value;
      continue;
    }
    if (a.dims.size() != b.dims.size())
      throw UnsupportedError("layer '" + l.name + "' (If): the branches give output " + std::to_string(k) + " ranks " +
                             std::to_string(a.dims.size()) + " and " + std::to_string(b.dims.size()) +
                             " and the condition is known only at run time (outputs of different ranks are not supported)");
    // A dim the branches may disagree on is data-dependent: the execution context reads the
    // condition back once it is computed and infers again (OpDef::dataDependentShape).
    Dims d(a.dims.size());
    for (size_t i = 0; i < d.size(); ++i) d[i] = a.dims[i] == b.dims[i] ? a.dims[i] : -1;
    setOutput(l, k, a.type, d);
  }
}

// Both branches have run (their tensors are the inputs): copy the taken one's.
void refIf(const LayerDesc& l, const KernelIO& io) {
  const size_t n = io.out.size();
  const bool taken = *static_cast<const uint8_t*>(io.in[0].data) != 0;
  for (size_t k = 0; k < n; ++k) {
    const TensorView& src = io.in[taken ? 1 + k : 1 + n + k];
    const TensorView& dst = io.out[k];
    if (src.count != dst.count) opError(l, "output " + std::to_string(k) + " has another size than the taken branch's");
    if (dst.count) std::memcpy(dst.data, src.data, static_cast<size_t>(dst.count) * elementSize(dst.type));
  }
}

}  // namespace

void registerControlFlowOps(OpRegistry& r) {
  OpDef d;
  d.name = "If";
  d.infer = inferIf;
  d.ref = refIf;
  d.anyType = true;
  // Branches of different dims: the condition decides the output's shape at run time.
  d.valueInputs = {0};
  d.dataDependentShape = true;
  r.add(d);
}

}  // namespace kiln
