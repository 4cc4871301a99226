#include "onnx/node_expander.h"

#include <algorithm>

#include "onnx/node_expander_util.h"

#include "onnx/tensor_proto.h"

namespace kiln {

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

const onnx::AttributeProto* findAttribute(const onnx::NodeProto& node, const std::string& attr) {
  for (const auto& a : node.attribute())
    if (a.name() == attr) return &a;
  return nullptr;
}

int64_t intAttribute(const onnx::NodeProto& node, const std::string& attr, int64_t fallback) {
  const onnx::AttributeProto* a = findAttribute(node, attr);
  return a ? a->i() : fallback;
}

float floatAttribute(const onnx::NodeProto& node, const std::string& attr, float fallback) {
  const onnx::AttributeProto* a = findAttribute(node, attr);
  return a ? a->f() : fallback;
}

void setAttribute(onnx::NodeProto& node, const std::string& attr, int64_t v) {
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void setAttribute(onnx::NodeProto& node, const std::string& attr, float v) {
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

void setAttribute(onnx::NodeProto& node, const std::string& attr, const std::vector<int64_t>& v) {
  onnx::AttributeProto* a = node.add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

int onnxFloatCode(DataType t) {
  switch (t) {
    case DataType::kFLOAT: return onnx::TensorProto::FLOAT;
    case DataType::kHALF: return onnx::TensorProto::FLOAT16;
    case DataType::kBF16: return onnx::TensorProto::BFLOAT16;
    case DataType::kDOUBLE: return onnx::TensorProto::DOUBLE;
    default: return 0;
  }
}

std::vector<int64_t> intsAttribute(const onnx::NodeProto& node, const std::string& attr) {
  const onnx::AttributeProto* a = findAttribute(node, attr);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : std::vector<int64_t>{};
}

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
  if (isDefaultDomain(node.domain()) && node.op_type() == "Scan") return expandScan(node, scope, out, depth);
  if (node.domain() == "ai.onnx.preview" && node.op_type() == "FlexAttention") return expandFlexAttention(node, scope, out, depth);
  if (expandQLinearContribOp(node, out)) return;
  if (expandOrtTransformerOp(node, out)) return;
  if (node.domain() == "com.microsoft" && node.op_type() == "MatMulNBits" && !(pluginReplaces && pluginReplaces(node)))
    return expandMatMulNBits(node, out);
  if (isDefaultDomain(node.domain()) && expandExperimentalOp(node, out)) return;
  if (isDefaultDomain(node.domain()) && expandOptionalOp(node, out)) return;
  if (isDefaultDomain(node.domain()) && expandSequenceOp(node, scope, out, depth)) return;
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
  bool sequenceOutputs = false;
  for (int b = 0; b < 2; ++b) {
    NameScope s;
    s.prefix = name + (b == 0 ? "/then/" : "/else/");
    s.parent = scope;
    inlineGraph(*branches[b], s, out, depth);
    for (const auto& o : branches[b]->output()) {
      select.add_input(s.resolve(o.name()));
      sequenceOutputs = sequenceOutputs || sequences.count(s.resolve(o.name()));
    }
  }
  if (sequenceOutputs) {
    // Sequences exist only at import: the condition must be known here to pick a branch.
    const HostTensor c = inferredValue(node.input(0), out);
    if (!c.valid() || c.count() != 1)
      throw UnsupportedError("If node '" + name + "' gives sequences and its condition is known only at run time");
    const int taken = c.getInt(0) != 0 ? 0 : 1;
    for (int k = 0; k < n; ++k)
      if (!node.output(k).empty()) emitAlias(select.input(1 + taken * n + k), node.output(k), name + "/out_" + std::to_string(k), out);
    return;
  }
  for (const auto& o : node.output()) select.add_output(o);
  out.push_back(&inlined.emplace_back(std::move(select)));
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

int64_t NodeExpander::inferredRank(const std::string& name, const std::vector<const onnx::NodeProto*>& out) const {
  Dims dims;
  HostTensor value;
  return inferTensor && inferTensor(name, out, dims, value) ? static_cast<int64_t>(dims.size()) : -1;
}

onnx::NodeProto& NodeExpander::emitReduceMean(const std::string& x, const std::vector<int64_t>& axes, const std::string& output,
                                              std::vector<const onnx::NodeProto*>& out) {
  onnx::NodeProto& n = emit("ReduceMean", {x}, output, output, out);
  setAttribute(n, "keepdims", int64_t(1));
  if (opset < 18) {
    setAttribute(n, "axes", axes);
    return n;
  }
  onnx::TensorProto t;  // axes became an input in opset 18
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims(static_cast<int64_t>(axes.size()));
  for (int64_t a : axes) t.add_int64_data(a);
  emitConstant(output + "/axes", t, out);
  n.add_input(output + "/axes");
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

NameScope NodeExpander::sharedInitializers(const onnx::GraphProto& body, const std::string& prefix,
                                           std::vector<const onnx::NodeProto*>& out) {
  if (body.sparse_initializer_size()) throw UnsupportedError("subgraph '" + body.name() + "': sparse initializers are not supported");
  NameScope shared;
  shared.prefix = prefix;
  for (const auto& init : body.initializer()) {
    shared.rename[init.name()] = prefix + init.name();
    emitConstant(prefix + init.name(), init, out);
  }
  return shared;
}

NameScope NodeExpander::iterationScope(const std::string& prefix, const NameScope* parent, const NameScope& shared) const {
  NameScope s;
  s.prefix = prefix;
  s.parent = parent;
  s.rename = shared.rename;
  return s;
}

void NodeExpander::emitGather(const std::string& x, int64_t index, int64_t axis, const std::string& output,
                              std::vector<const onnx::NodeProto*>& out) {
  const std::string idx = output + "/index";
  emitConstant(idx, scalarProto(onnx::TensorProto::INT64, index), out);
  onnx::NodeProto& g = emit("Gather", {x, idx}, output, output, out);
  onnx::AttributeProto* a = g.add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(axis);
}

void NodeExpander::emitUnsqueeze(const std::string& x, int64_t axis, const std::string& output, std::vector<const onnx::NodeProto*>& out) {
  if (opset >= 13) {
    onnx::TensorProto axes = scalarProto(onnx::TensorProto::INT64, axis);
    axes.add_dims(1);
    emitConstant(output + "/axes", axes, out);
    emit("Unsqueeze", {x, output + "/axes"}, output, output, out);
    return;
  }
  onnx::NodeProto& u = emit("Unsqueeze", {x}, output, output, out);
  onnx::AttributeProto* a = u.add_attribute();
  a->set_name("axes");
  a->set_type(onnx::AttributeProto::INTS);
  a->add_ints(axis);
}

void NodeExpander::emitConcat(const std::vector<std::string>& items, int64_t axis, const std::string& output,
                              std::vector<const onnx::NodeProto*>& out) {
  onnx::NodeProto& cat = emit("Concat", items, output, output, out);
  onnx::AttributeProto* a = cat.add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(axis);
}

void NodeExpander::emitStack(const std::vector<std::string>& items, int64_t axis, const std::string& output,
                             std::vector<const onnx::NodeProto*>& out) {
  std::vector<std::string> unsqueezed;
  for (size_t i = 0; i < items.size(); ++i) {
    unsqueezed.push_back(output + "/item_" + std::to_string(i));
    emitUnsqueeze(items[i], axis, unsqueezed.back(), out);
  }
  emitConcat(unsqueezed, axis, output, out);
}

void NodeExpander::emitAlias(const std::string& input, const std::string& output, const std::string& name,
                             std::vector<const onnx::NodeProto*>& out) {
  auto seq = sequences.find(input);
  if (seq != sequences.end()) {
    sequences[output] = std::vector<std::string>(seq->second);
    return;
  }
  emit("Identity", {input}, output, name, out);
}

HostTensor NodeExpander::inferredValue(const std::string& name, const std::vector<const onnx::NodeProto*>& out) const {
  HostTensor v = importTimeValue(name);
  if (v.valid() || !inferTensor || name.empty()) return v;
  Dims dims;
  HostTensor value;
  return inferTensor(name, out, dims, value) ? value : HostTensor();
}

bool NodeExpander::inferredDims(const std::string& name, const std::vector<const onnx::NodeProto*>& out, Dims& dims) const {
  HostTensor v = importTimeValue(name);
  if (v.valid()) {
    dims = v.dims();
    return true;
  }
  HostTensor value;
  if (!inferTensor || !inferTensor(name, out, dims, value)) return false;
  for (int64_t d : dims)
    if (d < 0) return false;
  return true;
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
