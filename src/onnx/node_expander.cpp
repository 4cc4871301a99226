#include "onnx/node_expander.h"

#include <algorithm>

#include "onnx/tensor_proto.h"

namespace kiln {

namespace {

bool isDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

const onnx::GraphProto* graphAttribute(const onnx::NodeProto& node, const std::string& attr, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == attr) {
      if (!a.has_g()) throw Error(node.op_type() + " node '" + name + "': attribute '" + attr + "' is not a graph");
      return &a.g();
    }
  throw Error(node.op_type() + " node '" + name + "' has no '" + attr + "' graph");
}

onnx::TensorProto scalarProto(int dataType, int64_t v) {
  onnx::TensorProto t;
  t.set_data_type(dataType);
  if (dataType == onnx::TensorProto::INT64) t.add_int64_data(v);
  else t.add_int32_data(static_cast<int32_t>(v));
  return t;
}

}  // namespace

std::string NameScope::resolve(const std::string& name) const {
  if (name.empty()) return name;
  auto it = rename.find(name);
  if (it != rename.end()) return it->second;
  if (closed) return prefix + name;
  return parent ? parent->resolve(name) : name;
}

std::string NodeExpander::nodeName(const onnx::NodeProto& node, size_t index) {
  return node.name().empty() ? node.op_type() + "_" + std::to_string(index) : node.name();
}

void NodeExpander::expand(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out, int depth) {
  if (depth >= 32) throw Error("node '" + node.name() + "': functions and subgraphs nest more than 32 deep (recursive?)");
  if (const onnx::FunctionProto* f = functionFor(node)) return expandFunction(node, *f, out, depth);
  if (isDefaultDomain(node.domain()) && node.op_type() == "If") return expandIf(node, scope, out, depth);
  if (isDefaultDomain(node.domain()) && node.op_type() == "Loop") return expandLoop(node, scope, out, depth);
  if (isDefaultDomain(node.domain()) && node.op_type() == "Constant" && node.output_size() == 1)
    constantNodes[node.output(0)] = &node;
  out.push_back(&node);
}

// ---- model-local functions (ModelProto.functions) ---------------------------------------------

const onnx::FunctionProto* NodeExpander::functionFor(const onnx::NodeProto& node) const {
  if (functions.empty()) return nullptr;
  auto it = functions.find(std::make_tuple(node.domain(), node.op_type(), node.overload()));
  if (it == functions.end() && isDefaultDomain(node.domain()))
    it = functions.find(std::make_tuple(std::string(node.domain().empty() ? "ai.onnx" : ""), node.op_type(), node.overload()));
  if (it == functions.end()) return nullptr;
  if (pluginReplaces && pluginReplaces(node)) return nullptr;  // a registered plugin replaces the body
  return it->second;
}

// The body with its tensors renamed into the caller's scope and attribute references resolved.
void NodeExpander::expandFunction(const onnx::NodeProto& node, const onnx::FunctionProto& f, std::vector<const onnx::NodeProto*>& out,
                                  int depth) {
  NameScope scope;
  scope.closed = true;
  scope.prefix = (node.name().empty() ? f.name() + "_" + std::to_string(out.size()) : node.name()) + "/";
  for (int i = 0; i < f.input_size(); ++i) scope.rename[f.input(i)] = i < node.input_size() ? node.input(i) : "";
  for (int i = 0; i < f.output_size(); ++i)
    scope.rename[f.output(i)] = i < node.output_size() ? node.output(i) : scope.prefix + f.output(i);
  std::map<std::string, const onnx::AttributeProto*> given, defaults;
  for (const auto& a : node.attribute()) given[a.name()] = &a;
  for (const auto& a : f.attribute_proto()) defaults[a.name()] = &a;
  for (const auto& body : f.node()) {
    onnx::NodeProto& n = inlined.emplace_back(body);
    n.set_name(scope.prefix + (body.name().empty() ? body.op_type() : body.name()));
    for (int i = 0; i < n.input_size(); ++i) n.set_input(i, scope.resolve(body.input(i)));
    for (int i = 0; i < n.output_size(); ++i) n.set_output(i, scope.resolve(body.output(i)));
    n.clear_attribute();
    for (const auto& a : body.attribute()) {
      if (a.ref_attr_name().empty()) {
        *n.add_attribute() = a;
        continue;
      }
      auto it = given.find(a.ref_attr_name());
      const onnx::AttributeProto* src = it != given.end() ? it->second : nullptr;
      if (!src) {
        auto d = defaults.find(a.ref_attr_name());
        src = d != defaults.end() ? d->second : nullptr;
      }
      if (!src) continue;  // an unset optional attribute of the function: the op's default
      onnx::AttributeProto* dst = n.add_attribute();
      *dst = *src;
      dst->set_name(a.name());
    }
    expand(n, &scope, out, depth + 1);
  }
}

// ---- subgraphs ----------------------------------------------------------------------------------

void NodeExpander::inlineGraph(const onnx::GraphProto& g, NameScope& scope, std::vector<const onnx::NodeProto*>& out, int depth) {
  if (g.sparse_initializer_size()) throw UnsupportedError("subgraph '" + g.name() + "': sparse initializers are not supported");
  for (const auto& init : g.initializer()) {
    if (scope.rename.count(init.name())) continue;  // already placed (a Loop body's, once for all iterations)
    scope.rename[init.name()] = scope.prefix + init.name();
    emitConstant(scope.prefix + init.name(), init, out);
  }
  for (const auto& node : g.node())
    for (const auto& o : node.output())
      if (!o.empty()) scope.rename[o] = scope.prefix + o;
  int index = 0;
  for (const auto& body : g.node()) {
    onnx::NodeProto& n = inlined.emplace_back(body);
    n.set_name(scope.prefix + (body.name().empty() ? body.op_type() + "_" + std::to_string(index) : body.name()));
    ++index;
    for (int i = 0; i < n.input_size(); ++i) n.set_input(i, scope.resolve(body.input(i)));
    for (int i = 0; i < n.output_size(); ++i) n.set_output(i, scope.resolve(body.output(i)));
    expand(n, &scope, out, depth + 1);
  }
}

// Both branches become ordinary layers; an If layer (ops/control_flow.cpp) reads [cond, then
// outputs..., else outputs...]. The builder keeps only the taken branch when the condition is
// known at build time (builder/passes/inline_constant_if.cpp).
void NodeExpander::expandIf(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out, int depth) {
  const std::string name = nodeName(node, out.size());
  const onnx::GraphProto* branches[2] = {graphAttribute(node, "then_branch", name), graphAttribute(node, "else_branch", name)};
  if (node.input_size() != 1 || node.input(0).empty()) throw Error("If node '" + name + "' must have one input (the condition)");
  const int n = node.output_size();
  if (branches[0]->output_size() != n || branches[1]->output_size() != n)
    throw Error("If node '" + name + "' has " + std::to_string(n) + " outputs but its then-branch has " +
                std::to_string(branches[0]->output_size()) + " and its else-branch " + std::to_string(branches[1]->output_size()));
  onnx::NodeProto select;
  select.set_op_type("If");
  select.set_name(name);
  select.add_input(node.input(0));
  for (int b = 0; b < 2; ++b) {
    NameScope s;
    s.prefix = name + (b == 0 ? "/then/" : "/else/");
    s.parent = scope;
    inlineGraph(*branches[b], s, out, depth);
    for (const auto& o : branches[b]->output()) select.add_input(s.resolve(o.name()));
  }
  for (const auto& o : node.output()) select.add_output(o);
  out.push_back(&inlined.emplace_back(std::move(select)));
}

// A Loop with a trip count known at import and a condition that stays true is unrolled: each
// iteration's body is inlined with iter_num and cond as constants and the loop-carried values
// threaded through; scan outputs are the iterations' values stacked along a new axis 0.
void NodeExpander::expandLoop(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out,
                              int depth) {
  const std::string name = nodeName(node, out.size());
  const onnx::GraphProto& body = *graphAttribute(node, "body", name);
  const std::string what = "Loop node '" + name + "'";
  if (node.input_size() < 2) throw Error(what + " must have the inputs M and cond (either may be empty)");
  const int nCarried = node.input_size() - 2;
  const int nScan = body.output_size() - 1 - nCarried;
  if (body.input_size() != 2 + nCarried)
    throw Error(what + ": its body has " + std::to_string(body.input_size()) + " inputs, expected 2 + " + std::to_string(nCarried) +
                " loop-carried values");
  if (nScan < 0 || node.output_size() != nCarried + nScan)
    throw Error(what + ": its body has " + std::to_string(body.output_size()) + " outputs and the node " +
                std::to_string(node.output_size()) + " for " + std::to_string(nCarried) +
                " loop-carried values (expected 1 + carried + scan outputs in the body, carried + scan outputs on the node)");
  if (node.input(0).empty())
    throw UnsupportedError(what + " has no trip count (a while loop): kiln unrolls only loops with a constant trip count");
  const HostTensor trip = importTimeValue(node.input(0));
  if (!trip.valid())
    throw UnsupportedError(what + ": its trip count '" + node.input(0) +
                           "' is computed at run time; kiln unrolls only loops whose trip count is an initializer or Constant");
  if (trip.count() != 1) throw Error(what + ": the trip count must hold one value");
  int64_t trips = std::max<int64_t>(trip.getInt(0), 0);
  if (!node.input(1).empty()) {
    const HostTensor c = importTimeValue(node.input(1));
    if (!c.valid() || c.count() != 1)
      throw UnsupportedError(what + ": its condition '" + node.input(1) + "' is computed at run time (only constant conditions are supported)");
    if (c.getInt(0) == 0) trips = 0;
  }
  // The body's condition output must stay true: the incoming cond passed on (through Identity
  // nodes) or a constant true. Anything else ends the loop at a data-dependent iteration.
  {
    std::map<std::string, const onnx::NodeProto*> producer;
    for (const auto& bn : body.node())
      for (const auto& o : bn.output()) producer[o] = &bn;
    std::string c = body.output(0).name();
    bool alwaysTrue = false;
    for (int hops = 0; hops <= body.node_size(); ++hops) {
      if (c == body.input(1).name()) { alwaysTrue = true; break; }
      HostTensor v;
      for (const auto& init : body.initializer())
        if (init.name() == c) v = fromTensorProto(init, baseDir);
      auto it = producer.find(c);
      if (!v.valid() && it != producer.end() && it->second->op_type() == "Identity" && it->second->input_size() == 1) {
        c = it->second->input(0);
        continue;
      }
      if (!v.valid() && it != producer.end() && it->second->op_type() == "Constant") v = constantNodeValue(*it->second, name, baseDir);
      alwaysTrue = v.valid() && v.count() == 1 && v.getInt(0) != 0;
      break;
    }
    if (!alwaysTrue)
      throw UnsupportedError(what + ": its body computes the loop condition (the loop may stop at a data-dependent iteration); kiln "
                             "unrolls only loops with a constant trip count whose condition stays true");
  }
  if (trips > kMaxLoopIterations)
    throw UnsupportedError(what + ": " + std::to_string(trips) + " iterations exceed kiln's unroll limit of " +
                           std::to_string(kMaxLoopIterations) + " (loops are unrolled at build time)");
  if (trips * body.node_size() > kMaxUnrolledNodes)
    throw UnsupportedError(what + ": unrolled it would have " + std::to_string(trips * body.node_size()) + " nodes (limit " +
                           std::to_string(kMaxUnrolledNodes) + ")");
  if (trips == 0 && nScan > 0)
    throw UnsupportedError(what + " runs no iteration and has scan outputs (empty tensors of unknown shape are not supported)");

  std::vector<std::string> carried(node.input().begin() + 2, node.input().end());
  std::vector<std::vector<std::string>> scans(static_cast<size_t>(nScan));
  NameScope shared;  // the body's initializers, placed once for all iterations
  shared.prefix = name + "/";
  for (const auto& init : body.initializer()) {
    shared.rename[init.name()] = shared.prefix + init.name();
    emitConstant(shared.prefix + init.name(), init, out);
  }
  for (int64_t i = 0; i < trips; ++i) {
    NameScope s;
    s.prefix = name + "/" + std::to_string(i) + "/";
    s.parent = scope;
    s.rename = shared.rename;
    const std::string iterName = s.prefix + body.input(0).name(), condName = s.prefix + body.input(1).name();
    emitConstant(iterName, scalarProto(onnx::TensorProto::INT64, i), out);
    emitConstant(condName, scalarProto(onnx::TensorProto::BOOL, 1), out);
    s.rename[body.input(0).name()] = iterName;
    s.rename[body.input(1).name()] = condName;
    for (int k = 0; k < nCarried; ++k) s.rename[body.input(2 + k).name()] = carried[static_cast<size_t>(k)];
    inlineGraph(body, s, out, depth);
    for (int k = 0; k < nCarried; ++k) carried[static_cast<size_t>(k)] = s.resolve(body.output(1 + k).name());
    for (int j = 0; j < nScan; ++j) scans[static_cast<size_t>(j)].push_back(s.resolve(body.output(1 + nCarried + j).name()));
  }
  for (int k = 0; k < nCarried; ++k)
    if (!node.output(k).empty())
      emit("Identity", {carried[static_cast<size_t>(k)]}, node.output(k), name + "/final_" + std::to_string(k), out);
  std::string axes;
  if (nScan > 0 && opset >= 13) {
    axes = name + "/scan_axes";
    onnx::TensorProto zero = scalarProto(onnx::TensorProto::INT64, 0);
    zero.add_dims(1);
    emitConstant(axes, zero, out);
  }
  for (int j = 0; j < nScan; ++j) {
    const std::string& target = node.output(nCarried + j);
    if (target.empty()) continue;
    std::vector<std::string> items;
    for (size_t i = 0; i < scans[static_cast<size_t>(j)].size(); ++i) {
      const std::string item = name + "/scan_" + std::to_string(j) + "_" + std::to_string(i);
      std::vector<std::string> ins{scans[static_cast<size_t>(j)][i]};
      if (!axes.empty()) ins.push_back(axes);
      onnx::NodeProto& u = emit("Unsqueeze", ins, item, item, out);
      if (axes.empty()) {
        onnx::AttributeProto* a = u.add_attribute();
        a->set_name("axes");
        a->set_type(onnx::AttributeProto::INTS);
        a->add_ints(0);
      }
      items.push_back(item);
    }
    onnx::NodeProto& cat = emit("Concat", items, target, name + "/scan_" + std::to_string(j), out);
    onnx::AttributeProto* a = cat.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(0);
  }
}

// ---- helpers ------------------------------------------------------------------------------------

onnx::NodeProto& NodeExpander::emit(const std::string& op, const std::vector<std::string>& inputs, const std::string& output,
                                    const std::string& name, std::vector<const onnx::NodeProto*>& out) {
  onnx::NodeProto& n = inlined.emplace_back();
  n.set_op_type(op);
  n.set_name(name);
  for (const auto& i : inputs) n.add_input(i);
  n.add_output(output);
  out.push_back(&n);
  return n;
}

onnx::NodeProto& NodeExpander::emitConstant(const std::string& output, const onnx::TensorProto& value,
                                            std::vector<const onnx::NodeProto*>& out) {
  onnx::NodeProto& n = emit("Constant", {}, output, output, out);
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  *a->mutable_t() = value;
  a->mutable_t()->set_name(output);
  constantNodes[output] = &n;
  return n;
}

HostTensor NodeExpander::importTimeValue(const std::string& name) const {
  if (initializerValue) {
    HostTensor v = initializerValue(name);
    if (v.valid()) return v;
  }
  auto it = constantNodes.find(name);
  return it == constantNodes.end() ? HostTensor() : constantNodeValue(*it->second, name, baseDir);
}

}  // namespace kiln
