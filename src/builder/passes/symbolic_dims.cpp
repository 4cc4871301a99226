// Symbolic dims by evaluation at sample input shapes (symbolic_dims.h says why).
#include "builder/passes/symbolic_dims.h"

#include <cstring>

#include "ops/op_registry.h"
#include "ops/shape_propagation.h"

namespace kiln {

namespace {
// Values computed on the host at a sample: shape-sized only, as the context's shape resolution.
constexpr int64_t kMaxSampleValueElements = int64_t(1) << 16;

TensorDesc staticDesc(const Tensor* t, bool withValue) {
  TensorDesc d;
  d.type = t->type;
  d.dims = t->dims;
  if (withValue) d.value = t->value;
  return d;
}

// Infers (and, for shape-sized values, evaluates) layer desc `d`; false when inference fails at
// this sample (the outputs then stay as the static view has them).
bool inferAtSample(const Layer& l, LayerDesc& d, bool* failed) {
  if (!l.domain.empty() && l.domain != "ai.onnx") return false;  // plugins: no inference here, no failure
  try {
    inferLayer(d);
  } catch (const std::exception&) {
    *failed = true;  // the network cannot run at these input dims
    return false;
  }
  if (d.outputs.size() != l.outputs.size()) return *failed = true, false;
  const OpDef* def = OpRegistry::instance().find(l.op);
  bool known = true, small = true;
  for (const TensorDesc& o : d.outputs) {
    known = known && o.value.valid();
    small = small && isStatic(o.dims) && volume(o.dims) <= kMaxSampleValueElements;
  }
  if (known || !small || !def || !def->foldable || !allInputsKnown(d)) return true;
  LayerDesc evaluated = d;
  try {
    evaluateOnHost(evaluated);
    d = std::move(evaluated);
  } catch (const std::exception&) {  // a value the host cannot compute stays unknown
  }
  return true;
}
}  // namespace

SymbolicDims::SymbolicDims(const InputSamples& samples) : samples_(samples) {
  if (samples_.empty()) samples_.emplace_back();  // a static network: one sample, the network itself
  failed_.assign(samples_.size(), false);
}

InputSamples keepRunnableSamples(const Network& net, InputSamples samples) {
  if (samples.empty()) return samples;
  SymbolicDims sym(samples);
  for (auto& l : net.layers())
    for (Tensor* o : l->outputs) sym.at(o, 0);
  InputSamples kept;
  for (size_t s = 0; s < samples.size(); ++s)
    if (sym.inferredAt(s)) kept.push_back(std::move(samples[s]));
  // Not even opt: tactic selection will name the failing layer; the passes see the static dims.
  return kept.empty() ? InputSamples{} : kept;
}

void SymbolicDims::compute(const Tensor* root) {
  const size_t n = samples_.size();
  std::vector<const Tensor*> stack{root};
  while (!stack.empty()) {
    const Tensor* t = stack.back();
    if (memo_.count(t)) {
      stack.pop_back();
      continue;
    }
    const Layer* l = t->producer;
    if (t->isConstant() || t->isInput || !l) {
      std::vector<TensorDesc> v(n, staticDesc(t, true));
      for (size_t s = 0; s < n && t->isInput; ++s) {
        auto it = samples_[s].find(t->name);
        if (it != samples_[s].end()) v[s].dims = it->second;
      }
      memo_[t] = std::move(v);
      stack.pop_back();
      continue;
    }
    bool ready = true;
    for (const Tensor* in : l->inputs)
      if (in && !memo_.count(in)) {
        stack.push_back(in);
        ready = false;
      }
    if (!ready) continue;  // the network is a DAG (topoSort refuses cycles): this terminates
    stack.pop_back();
    std::vector<std::vector<TensorDesc>> outs(l->outputs.size(), std::vector<TensorDesc>(n));
    for (size_t s = 0; s < n; ++s) {
      LayerDesc d = describeLayer(*l);
      for (size_t k = 0; k < l->inputs.size(); ++k)
        if (l->inputs[k]) d.inputs[k] = memo_[l->inputs[k]][s];
      for (TensorDesc& o : d.outputs) o = TensorDesc{};
      bool failed = false;
      const bool ok = inferAtSample(*l, d, &failed);
      if (failed) failed_[s] = true;
      for (size_t k = 0; k < l->outputs.size(); ++k) outs[k][s] = ok ? d.outputs[k] : staticDesc(l->outputs[k], false);
    }
    for (size_t k = 0; k < l->outputs.size(); ++k) memo_[l->outputs[k]] = std::move(outs[k]);
  }
}

const TensorDesc& SymbolicDims::at(const Tensor* t, size_t s) {
  auto it = memo_.find(t);
  if (it == memo_.end()) {
    compute(t);
    it = memo_.find(t);
  }
  return it->second.at(s);
}

bool SymbolicDims::sameDim(const Tensor* a, size_t ka, const Tensor* b, size_t kb) {
  for (size_t s = 0; s < samples_.size(); ++s) {
    const Dims &da = at(a, s).dims, &db = at(b, s).dims;
    if (ka >= da.size() || kb >= db.size() || da[ka] < 0 || da[ka] != db[kb]) return false;
  }
  return true;
}

bool SymbolicDims::sameDims(const Tensor* a, const Tensor* b) {
  const size_t rank = at(a, 0).dims.size();
  if (at(b, 0).dims.size() != rank) return false;
  for (size_t k = 0; k < rank; ++k)
    if (!sameDim(a, k, b, k)) return false;
  return true;
}

int64_t SymbolicDims::constantDim(const Tensor* t, size_t k) {
  int64_t v = -1;
  for (size_t s = 0; s < samples_.size(); ++s) {
    const Dims& d = at(t, s).dims;
    if (k >= d.size() || d[k] < 0 || (s > 0 && d[k] != v)) return -1;
    v = d[k];
  }
  return v;
}

bool SymbolicDims::valueKnown(const Tensor* t) {
  for (size_t s = 0; s < samples_.size(); ++s)
    if (!at(t, s).value.valid()) return false;
  return true;
}

const HostTensor* SymbolicDims::constantValue(const Tensor* t) {
  if (!valueKnown(t)) return nullptr;
  const HostTensor& v0 = at(t, 0).value;
  for (size_t s = 1; s < samples_.size(); ++s) {
    const HostTensor& v = at(t, s).value;
    if (v.type() != v0.type() || v.dims() != v0.dims() || std::memcmp(v.data(), v0.data(), v0.bytes()) != 0) return nullptr;
  }
  return &v0;
}

}  // namespace kiln
