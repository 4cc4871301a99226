// `Loop` at run time: a loop that the importer cannot unroll (a trip count or condition computed
// from data, or more iterations than its unroll limit) stays one layer. Its body is a Network
// carried as bytes in the attribute `body` (ir/network_bytes.h); inputs [M, cond, carried...,
// outer...], where `outer` are the tensors of enclosing scopes that the body reads (`num_outer`
// of them, body inputs after the carried ones); outputs [final carried..., scan outputs...].
//
// The loop runs on the host, during shape resolution: the op needs every input's value
// (OpDef::valueInputs, inferComputesValues), so at run time the execution context reads them back
// once they are computed and `infer` runs the iterations, each body layer inferred and evaluated
// by its reference kernel (evaluateOnHost), exactly as constant folding does. The same path works
// on every backend (the GPU copies the results back) and folds a loop of constants at build time.
// Without the values, `infer` gives what the body's shape inference tells: a carried value keeps
// the dims its body output has when they equal the input's, scan outputs have a leading -1.
#include <cstring>
#include <limits>
#include <memory>

#include "ir/network_bytes.h"
#include "ops/control_flow.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/shape_propagation.h"

namespace kiln {

namespace {

// The loop runs on the host, one body evaluation per iteration: more iterations than this are an
// error (a while loop whose condition stays true ends here rather than hanging).
constexpr int64_t kMaxLoopIterations = int64_t(1) << 20;

struct LoopShape {
  size_t carried = 0, outer = 0, scans = 0;
};

std::unique_ptr<Network> loadBody(const LayerDesc& l, LoopShape& s) {
  const HostTensor* b = l.attrs->has("body") ? l.attrs->getTensor("body") : nullptr;
  if (!b || b->type() != DataType::kUINT8 || b->dims().size() != 1) opError(l, "has no body (a uint8 attribute 'body')");
  auto net = std::make_unique<Network>();
  try {
    deserializeNetwork(b->as<uint8_t>(), b->bytes(), *net);
  } catch (const Error& e) {
    opError(l, e.what());
  }
  const int64_t outer = l.attrs->getInt("num_outer", 0);
  if (l.inputs.size() < 2 || outer < 0 || static_cast<size_t>(outer) > l.inputs.size() - 2)
    opError(l, "expects inputs [M, cond, carried..., outer...] with num_outer = " + std::to_string(outer) + ", got " +
                   std::to_string(l.inputs.size()) + " inputs");
  s.outer = static_cast<size_t>(outer);
  s.carried = l.inputs.size() - 2 - s.outer;
  if (l.outputs.size() < s.carried) opError(l, "has fewer outputs than loop-carried values");
  s.scans = l.outputs.size() - s.carried;
  if (net->inputs().size() != l.inputs.size() || net->outputs().size() != 1 + s.carried + s.scans)
    opError(l, "its body has " + std::to_string(net->inputs().size()) + " inputs and " + std::to_string(net->outputs().size()) +
                   " outputs; the layer needs " + std::to_string(l.inputs.size()) + " and " + std::to_string(1 + s.carried + s.scans));
  return net;
}

HostTensor scalar(DataType t, int64_t v) {
  HostTensor h(t, {});
  if (t == DataType::kBOOL) *h.as<uint8_t>() = v != 0;
  else *h.as<int64_t>() = v;
  return h;
}

//! Runs the body's layers in order over `in` (one per body input: a value, or for shapes only a
//! tensor with type and dims and no value). With values, every layer is evaluated on the host;
//! without, layers are only inferred and one that cannot be stops the walk (its dependents stay
//! unknown: dimsKnown false). Returns the body outputs' descriptions.
std::vector<TensorDesc> runBody(Network& body, const std::vector<TensorDesc>& in, bool evaluate, const std::string& where) {
  for (auto& t : body.tensors())
    if (t->producer) {  // every layer output: no value of an earlier iteration stays
      t->dimsKnown = false;
      t->value = HostTensor();
    }
  for (size_t i = 0; i < in.size(); ++i) {
    Tensor* t = body.inputs()[i];
    t->type = in[i].type;
    t->dims = in[i].dims;
    t->value = in[i].value;
    t->dimsKnown = true;
  }
  std::string firstError;  // of a layer that failed; it matters only if a body output needs it
  for (const auto& lp : body.layers()) {
    Layer& l = *lp;
    // An If with a known condition passes the taken branch on: the other branch may have failed
    // (exporters guard views that are invalid in the branch not taken).
    if (l.op == "If" && !l.inputs.empty() && l.inputs[0] && l.inputs[0]->value.valid() &&
        l.inputs.size() == 1 + 2 * l.outputs.size()) {
      const size_t first = l.inputs[0]->value.getInt(0) != 0 ? 1 : 1 + l.outputs.size();
      for (size_t k = 0; k < l.outputs.size(); ++k) {
        const Tensor* src = l.inputs[first + k];
        Tensor* t = l.outputs[k];
        t->dimsKnown = src && src->dimsKnown;
        if (!t->dimsKnown) continue;
        t->type = src->type;
        t->dims = src->dims;
        t->value = src->value;
      }
      continue;
    }
    bool ready = true;
    for (Tensor* t : l.inputs) ready = ready && (!t || t->dimsKnown);
    if (!ready) continue;
    LayerDesc d = describeLayer(l);
    for (auto& o : d.outputs) o = TensorDesc{};
    try {
      inferLayer(d);
      bool known = true;
      for (auto& o : d.outputs) known = known && o.value.valid();
      if (evaluate && !known) {
        for (auto& o : d.outputs)
          if (!isStatic(o.dims)) throw Error("output dims " + toString(o.dims) + " are unresolved with every input known");
        evaluateOnHost(d);
      }
    } catch (const Error& e) {
      // This layer's outputs and their dependents stay unknown.
      const std::string m = e.what();
      if (evaluate && firstError.empty()) firstError = m.rfind("layer '", 0) == 0 ? m : "body layer '" + l.name + "' (" + l.op + "): " + m;
      continue;
    }
    for (size_t k = 0; k < l.outputs.size(); ++k) {
      Tensor* t = l.outputs[k];
      t->type = d.outputs[k].type;
      t->dims = d.outputs[k].dims;
      t->value = d.outputs[k].value;
      t->dimsKnown = true;
    }
  }
  std::vector<TensorDesc> out;
  for (Tensor* t : body.outputs()) {
    TensorDesc d;
    d.type = t->type;
    if (t->dimsKnown) {
      d.dims = t->dims;
      d.value = t->value;
    } else {
      d.dims = Dims{-2};  // marks "unknown" for the caller
    }
    if (evaluate && !d.value.valid())
      throw Error(where + ": " + (firstError.empty() ? "body output '" + t->name + "' was not computed" : firstError));
    out.push_back(std::move(d));
  }
  return out;
}

bool unknownDesc(const TensorDesc& d) { return d.dims.size() == 1 && d.dims[0] == -2; }

//! Runs the loop over known input values.
void runLoop(LayerDesc& l, Network& body, const LoopShape& s) {
  int64_t trips = std::numeric_limits<int64_t>::max();
  bool bounded = false;
  if (l.present(0)) {
    const HostTensor& m = l.inputs[0].value;
    if (m.count() != 1) opError(l, "the trip count M must hold one value");
    trips = m.getInt(0);
    bounded = true;
  }
  bool cond = true;
  if (l.present(1)) {
    if (l.inputs[1].value.count() != 1) opError(l, "the condition must hold one value");
    cond = l.inputs[1].value.getInt(0) != 0;
  }
  std::vector<TensorDesc> in(l.inputs.size());
  for (size_t k = 0; k < s.carried + s.outer; ++k) in[2 + k] = l.inputs[2 + k];
  std::vector<std::vector<HostTensor>> scans(s.scans);
  int64_t i = 0;
  for (; i < trips && cond; ++i) {
    if (i >= kMaxLoopIterations)
      opError(l, "ran " + std::to_string(i) + (bounded ? " of its " + std::to_string(trips) + " iterations" : " iterations") +
                     " without its condition turning false (limit " + std::to_string(kMaxLoopIterations) + ")");
    in[0].type = DataType::kINT64;
    in[0].dims = {};
    in[0].value = scalar(DataType::kINT64, i);
    in[1].type = DataType::kBOOL;
    in[1].dims = {};
    in[1].value = scalar(DataType::kBOOL, cond);
    std::vector<TensorDesc> out = runBody(body, in, true, "layer '" + l.name + "' (Loop), iteration " + std::to_string(i));
    if (out[0].value.count() != 1) opError(l, "the body's condition output must hold one value");
    cond = out[0].value.getInt(0) != 0;
    for (size_t k = 0; k < s.carried; ++k) {
      if (out[1 + k].type != l.inputs[2 + k].type)
        opError(l, "loop-carried value " + std::to_string(k) + " changes type from " + toString(l.inputs[2 + k].type) + " to " +
                       toString(out[1 + k].type));
      in[2 + k] = out[1 + k];
    }
    for (size_t j = 0; j < s.scans; ++j) {
      const HostTensor& v = out[1 + s.carried + j].value;
      if (!scans[j].empty() && (v.dims() != scans[j][0].dims() || v.type() != scans[j][0].type()))
        opError(l, "scan output " + std::to_string(j) + " is " + toString(v.dims()) + " in iteration " + std::to_string(i) +
                       " but " + toString(scans[j][0].dims()) + " before (scan outputs must keep their shape)");
      scans[j].push_back(v);
    }
  }
  for (size_t k = 0; k < s.carried; ++k) {
    setOutput(l, k, in[2 + k].type, in[2 + k].dims);
    l.outputs[k].value = in[2 + k].value;
  }
  std::vector<TensorDesc> shapes;
  for (size_t j = 0; j < s.scans; ++j) {
    DataType type;
    Dims elem;
    if (!scans[j].empty()) {
      type = scans[j][0].type();
      elem = scans[j][0].dims();
    } else {  // no iteration ran: the element dims from the body's shape inference
      if (shapes.empty()) {
        std::vector<TensorDesc> sin(l.inputs.begin(), l.inputs.end());
        for (auto& d : sin) d.value = HostTensor();
        sin[0] = TensorDesc{DataType::kINT64, {}, {}};
        sin[1] = TensorDesc{DataType::kBOOL, {}, {}};
        shapes = runBody(body, sin, false, l.name);
      }
      const TensorDesc& d = shapes[1 + s.carried + j];
      if (unknownDesc(d) || !isStatic(d.dims))
        throw UnsupportedError("layer '" + l.name + "' (Loop) ran no iteration and the shape of scan output " + std::to_string(j) +
                               " is not known without one");
      type = d.type;
      elem = d.dims;
    }
    Dims dims{static_cast<int64_t>(scans[j].size())};
    dims.insert(dims.end(), elem.begin(), elem.end());
    HostTensor stacked(type, dims);
    auto* dst = static_cast<uint8_t*>(stacked.data());
    for (const HostTensor& v : scans[j]) {
      if (v.bytes()) std::memcpy(dst, v.data(), v.bytes());
      dst += v.bytes();
    }
    setOutput(l, s.carried + j, type, dims);
    l.outputs[s.carried + j].value = stacked;
  }
}

void inferLoop(LayerDesc& l) {
  // Bodies nest (a Loop in a Loop's body): bound the depth, so that a tampered plan cannot
  // exhaust the stack.
  static thread_local int depth = 0;
  if (depth >= 32) opError(l, "Loop bodies nest more than 32 deep");
  struct Nest {
    Nest() { ++depth; }
    ~Nest() { --depth; }
  } nest;
  LoopShape s;
  std::unique_ptr<Network> body = loadBody(l, s);
  if (l.present(0) && l.inputs[0].type != DataType::kINT64) opError(l, "the trip count M must be int64");
  if (l.present(1) && l.inputs[1].type != DataType::kBOOL) opError(l, "the condition must be bool");
  for (size_t k = 2; k < l.inputs.size(); ++k)
    if (!l.present(k)) opError(l, "input " + std::to_string(k) + " is missing (only M and cond may be omitted)");
  l.outputs.resize(s.carried + s.scans);
  bool known = true;
  for (size_t k = 0; k < l.inputs.size(); ++k) known = known && (!l.present(k) || l.inputs[k].value.valid());
  if (known) {
    runLoop(l, *body, s);
    return;
  }
  // Shapes only: what the body's inference says about its outputs, given the inputs' dims; the
  // body's declared outputs (the model's value info) where inference cannot tell.
  std::vector<Tensor> declared;
  for (Tensor* t : body->outputs()) declared.push_back(*t);
  std::vector<TensorDesc> in(l.inputs.begin(), l.inputs.end());
  in[0] = TensorDesc{DataType::kINT64, {}, {}};
  in[1] = TensorDesc{DataType::kBOOL, {}, {}};
  for (size_t k = 2; k < in.size(); ++k)
    if (!in[k].value.valid() || k < 2 + s.carried) in[k].value = HostTensor();  // carried values change per iteration
  const std::vector<TensorDesc> out = runBody(*body, in, false, l.name);
  for (size_t k = 0; k < s.carried; ++k) {
    const Dims& a = l.inputs[2 + k].dims;
    const TensorDesc& b = out[1 + k];
    Dims d(a.size(), -1);
    if (!unknownDesc(b) && b.dims.size() == a.size())
      for (size_t i = 0; i < a.size(); ++i) d[i] = a[i] == b.dims[i] ? a[i] : -1;
    setOutput(l, k, l.inputs[2 + k].type, d);
  }
  for (size_t j = 0; j < s.scans; ++j) {
    const TensorDesc& b = out[1 + s.carried + j];
    const Tensor& decl = declared[1 + s.carried + j];
    Dims d{-1};
    if (!unknownDesc(b)) {
      d.insert(d.end(), b.dims.begin(), b.dims.end());
      setOutput(l, s.carried + j, b.type, d);
      continue;
    }
    if (!decl.dimsKnown)
      throw UnsupportedError("layer '" + l.name + "' (Loop): the rank of scan output " + std::to_string(j) +
                             " is known neither from the body's shape inference nor from the model");
    for (size_t i = 0; i < decl.dims.size(); ++i) d.push_back(-1);
    setOutput(l, s.carried + j, decl.type, d);
  }
}

}  // namespace

void registerLoopOps(OpRegistry& r) {
  OpDef d;
  d.name = "Loop";
  d.infer = inferLoop;
  d.anyType = true;
  // Every input: the loop runs on the host once all of them are known.
  for (int k = 0; k < 1024; ++k) d.valueInputs.push_back(k);
  d.dataDependentShape = true;
  d.inferComputesValues = true;
  d.minOpset = 1;
  r.add(d);
}

}  // namespace kiln
