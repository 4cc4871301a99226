// Precision constraints check (precision_constraints.h).
#include "builder/precision_constraints.h"

#include "core/type_dispatch.h"

namespace kiln {

namespace {

constexpr const char* kOutputTypeSuffix = "_output_type";

//! What a layer computes in: INT8 for the integer layers, else the type of its first float output
//! (none for layers without float outputs: shape and index arithmetic).
std::optional<DataType> computePrecision(const Layer& l) {
  if (l.op == "QLinearConv" || l.op == "QLinearMatMul") return DataType::kINT8;
  for (const Tensor* t : l.outputs)
    if (isFloatType(t->type)) return t->type;
  return std::nullopt;
}

const char* typeName(DataType t) {
  switch (t) {
    case DataType::kFLOAT: return "fp32";
    case DataType::kHALF: return "fp16";
    case DataType::kBF16: return "bf16";
    case DataType::kINT8: return "int8";
    default: return toString(t);
  }
}

//! The layer of `net` that computes original layer `name`: the layer itself, or the fused layer
//! whose fusedOps ("<op>:<name>") lists it.
const Layer* findFinal(const Network& net, const std::string& name) {
  for (const auto& l : net.layers()) {
    if (l->name == name) return l.get();
    for (const std::string& f : l->fusedOps) {
      const size_t colon = f.find(':');
      if (colon != std::string::npos && f.compare(colon + 1, std::string::npos, name) == 0) return l.get();
    }
  }
  return nullptr;
}

}  // namespace

bool applyOutputTypes(Network& net) {
  bool changed = false;
  std::vector<Layer*> layers;
  for (auto& l : net.layers()) layers.push_back(l.get());
  for (Layer* l : layers) {
    if (!l->outputType || !isFloatType(*l->outputType) || l->outputs.empty()) continue;
    Tensor* y = l->outputs[0];
    const DataType to = *l->outputType;
    const std::vector<Layer*> readers = net.consumers(y);
    if (!isFloatType(y->type) || y->type == to || readers.empty()) continue;
    // y -> Cast(to) -> Cast(y's type) -> readers: the values are rounded to `to` as asked, and the
    // readers keep the type they compute in (the CPU has no float16 kernels; on the GPU the
    // precision pass assigns types after this).
    auto cast = [&](Tensor* in, DataType t, const std::string& name) {
      Attributes a;
      a.set("to", int64_t(t == DataType::kHALF ? 10 : t == DataType::kBF16 ? 16 : 1));  // ONNX TensorProto codes
      Layer* c = net.addLayer("Cast", {in}, 1, a, net.uniqueName(name));
      c->outputs[0]->type = t;
      c->outputs[0]->dims = in->dims;
      c->outputs[0]->dimsKnown = in->dimsKnown;
      return c->outputs[0];
    };
    Tensor* back = cast(cast(y, to, l->name + kOutputTypeSuffix), y->type, l->name + kOutputTypeSuffix + "_back");
    for (Layer* r : readers)
      for (Tensor*& in : r->inputs)
        if (in == y) in = back;
    changed = true;
  }
  if (changed) net.topoSort();
  return changed;
}

std::map<std::string, LayerConstraint> collectConstraints(const Network& net) {
  std::map<std::string, LayerConstraint> out;
  for (const auto& l : net.layers())
    if (l->precision || l->outputType) out[l->name] = {l->op, l->precision, l->outputType};
  return out;
}

void checkConstraints(const std::map<std::string, LayerConstraint>& wanted, const Network& net, DeviceType device, bool obey,
                      const std::map<std::string, std::string>& why, ILogger& log) {
  for (const auto& [name, c] : wanted) {
    const Layer* l = findFinal(net, name);
    if (!l) continue;  // folded into constants or removed as a no-op: nothing computes it
    std::string problem;
    const std::optional<DataType> got = computePrecision(*l);
    if (c.precision && got && *got != *c.precision) {
      std::string reason;
      if (auto w = why.find(name); w != why.end()) reason = w->second;
      else if (*c.precision == DataType::kINT8)
        reason = "kiln quantizes only Conv and MatMul / Gemm with constant weights (implicit INT8 needs --int8 and calibration data)";
      else if (device == DeviceType::kCPU)
        reason = "the CPU backend computes float layers in float32";
      else
        reason = "no kernel of that precision runs it (or --fp16 / --bf16 is not set)";
      problem = std::string("asks for ") + typeName(*c.precision) + " compute but it runs in " + typeName(*got) + ": " + reason;
    }
    if (problem.empty() && c.outputType && !l->outputs.empty()) {
      DataType out = l->outputs[0]->type;
      for (const Layer* r : net.consumers(l->outputs[0]))  // applyOutputTypes' conversion
        if (r->op == "Cast" && r->name.size() > name.size() && r->name.compare(0, name.size(), name) == 0 &&
            r->name.find(kOutputTypeSuffix, name.size()) == name.size())
          out = r->outputs[0]->type;
      const bool intOk = *c.outputType == DataType::kINT8 && (out == DataType::kINT8 || out == DataType::kUINT8);
      if (out != *c.outputType && !intOk)
        problem = std::string("asks for output type ") + typeName(*c.outputType) + " but its output is " + typeName(out) +
                  (*c.outputType == DataType::kINT8 ? " (an INT8 output needs the layer quantized and read only by a quantized layer)" : "");
    }
    if (problem.empty()) continue;
    const std::string where = "layer '" + name + "' (" + c.op + (l->name != name ? ", in '" + l->name + "'" : "") + ") ";
    if (obey) throw UnsupportedError(where + problem + " (--precisionConstraints=obey; prefer falls back with a warning)");
    log.log(ILogger::Severity::kWARNING, where + problem + "; falling back (--precisionConstraints=prefer)");
  }
}

}  // namespace kiln
