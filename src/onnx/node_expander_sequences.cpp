// Sequence ops, expanded at import (node_expander.h): a sequence value is a list of tensor names
// whose length is known at import, so each op on it becomes ops on its elements (or none at all:
// SequenceConstruct, SequenceInsert and SequenceErase only edit the list). Positions must be
// known at import, except SequenceAt's, which may be a run-time index into elements of one shape
// (stacked, then gathered). SequenceMap unrolls its body once per element.
#include <algorithm>
#include <limits>
#include <iterator>

#include "kiln/onnx_parser.h"
#include "onnx/node_expander.h"
#include "onnx/node_expander_util.h"

namespace kiln {

namespace {

int64_t checkedPosition(int64_t pos, int64_t size, bool allowEnd, const std::string& what) {
  const int64_t hi = allowEnd ? size : size - 1;
  if (pos < -size || pos > hi)
    throw Error(what + ": position " + std::to_string(pos) + " is out of range for a sequence of " + std::to_string(size) + " tensors");
  return pos < 0 ? pos + size : pos;
}

}  // namespace

bool NodeExpander::expandSequenceOp(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out,
                                    int depth) {
  if (expandStackedSequenceOp(node, out)) return true;
  const std::string& op = node.op_type();
  static const char* kSequenceOps[] = {"SequenceEmpty", "SequenceConstruct", "SequenceLength", "SequenceInsert", "SequenceErase",
                                       "SequenceAt", "ConcatFromSequence", "SplitToSequence", "SequenceMap"};
  bool sequenceOp = std::find(std::begin(kSequenceOps), std::end(kSequenceOps), op) != std::end(kSequenceOps);
  for (int i = 0; !sequenceOp && i < node.input_size(); ++i) sequenceOp = sequences.count(node.input(i)) != 0;
  if (!sequenceOp) return false;  // the common case: a tensor op on tensors
  const std::string name = nodeName(node, out.size());
  const std::string what = op + " node '" + name + "'";
  auto sequenceInput = [&](int i) -> const std::vector<std::string>& {
    auto it = i < node.input_size() ? sequences.find(node.input(i)) : sequences.end();
    if (it == sequences.end())
      throw Error(what + ": input " + std::to_string(i) + " ('" + (i < node.input_size() ? node.input(i) : std::string()) +
                  "') is not a sequence");
    return it->second;
  };
  auto position = [&](int i, int64_t size, bool allowEnd, int64_t fallback) {
    if (i >= node.input_size() || node.input(i).empty()) return fallback;
    const HostTensor p = inferredValue(node.input(i), out);
    if (!p.valid()) throw UnsupportedError(what + ": the position '" + node.input(i) + "' is known only at run time (it must be known at import)");
    if (p.count() != 1) throw Error(what + ": the position must be a scalar");
    return checkedPosition(p.getInt(0), size, allowEnd, what);
  };
  auto output = [&]() -> const std::string& {
    if (node.output_size() != 1 || node.output(0).empty()) throw Error(what + " must have one output");
    return node.output(0);
  };

  if (op == "SequenceEmpty") {
    sequences[output()] = {};
  } else if (op == "SequenceConstruct") {
    if (node.input_size() == 0) throw Error(what + " needs at least one tensor");
    sequences[output()] = std::vector<std::string>(node.input().begin(), node.input().end());
  } else if (op == "SequenceLength") {
    const auto& s = sequenceInput(0);
    emitConstant(output(), scalarProto(onnx::TensorProto::INT64, static_cast<int64_t>(s.size())), out);
  } else if (op == "SequenceInsert") {
    std::vector<std::string> s = sequenceInput(0);
    if (node.input_size() < 2 || node.input(1).empty()) throw Error(what + " needs a tensor to insert");
    const int64_t at = position(2, static_cast<int64_t>(s.size()), true, static_cast<int64_t>(s.size()));
    s.insert(s.begin() + at, node.input(1));
    sequences[output()] = std::move(s);
  } else if (op == "SequenceErase") {
    std::vector<std::string> s = sequenceInput(0);
    if (s.empty()) throw Error(what + ": the sequence is empty");
    const int64_t at = position(1, static_cast<int64_t>(s.size()), false, static_cast<int64_t>(s.size()) - 1);
    s.erase(s.begin() + at);
    sequences[output()] = std::move(s);
  } else if (op == "SequenceAt") {
    const auto& s = sequenceInput(0);
    if (node.input_size() < 2 || node.input(1).empty()) throw Error(what + " needs a position");
    if (s.empty()) throw Error(what + ": the sequence is empty");
    const HostTensor p = inferredValue(node.input(1), out);
    if (p.valid()) {
      if (p.count() != 1) throw Error(what + ": the position must be a scalar");
      const int64_t at = checkedPosition(p.getInt(0), static_cast<int64_t>(s.size()), false, what);
      emit("Identity", {s[static_cast<size_t>(at)]}, output(), name, out);
    } else {
      // A run-time position: the elements stacked (they must share one shape) and gathered.
      const std::string stacked = name + "/stacked";
      const std::vector<std::string> items(s);
      emitStack(items, 0, stacked, out);
      onnx::NodeProto& g = emit("Gather", {stacked, node.input(1)}, output(), name, out);
      onnx::AttributeProto* a = g.add_attribute();
      a->set_name("axis");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(0);
    }
  } else if (op == "ConcatFromSequence") {
    const std::vector<std::string> s = sequenceInput(0);
    if (s.empty()) throw UnsupportedError(what + ": the sequence is empty (the output's shape is unknown)");
    if (!findAttribute(node, "axis")) throw Error(what + " has no 'axis' attribute");
    const int64_t axis = intAttribute(node, "axis", 0);
    if (intAttribute(node, "new_axis", 0)) emitStack(s, axis, output(), out);
    else emitConcat(s, axis, output(), out);
  } else if (op == "SplitToSequence") {
    expandSplitToSequence(node, name, out);
  } else if (op == "SequenceMap") {
    expandSequenceMap(node, scope, out, depth);
  } else if (op == "Identity" && node.input_size() == 1 && sequences.count(node.input(0))) {
    emitAlias(node.input(0), output(), name, out);
  } else {
    for (const auto& in : node.input())
      if (sequences.count(in))
        throw UnsupportedError(what + " reads the sequence '" + in + "'; kiln supports sequences only in the sequence ops");
    return false;
  }
  return true;
}

// A stacked sequence (a run-time Loop's appended list: elements of one shape along axis 0):
// ConcatFromSequence along axis 0 (new_axis: the stacked tensor itself; else the first two dims
// merged by a Reshape to [-1, the rest of the element's dims]), SequenceAt (a Gather along axis
// 0), SequenceLength (dim 0), Identity (another name). Other axes and other ops are refused.
bool NodeExpander::expandStackedSequenceOp(const onnx::NodeProto& node, std::vector<const onnx::NodeProto*>& out) {
  auto it = node.input_size() > 0 ? stackedSequences.find(node.input(0)) : stackedSequences.end();
  if (it == stackedSequences.end()) {
    for (const auto& in : node.input())
      if (stackedSequences.count(in))
        throw UnsupportedError(node.op_type() + " node '" + nodeName(node, out.size()) + "' reads the sequence '" + in +
                               "', whose length is known only at run time (supported: ConcatFromSequence, SequenceAt, SequenceLength)");
    return false;
  }
  const std::string stacked = it->second;
  const std::string name = nodeName(node, out.size());
  const std::string& op = node.op_type();
  const std::string what = op + " node '" + name + "'";
  if (node.output_size() != 1 || node.output(0).empty()) throw Error(what + " must have one output");
  const std::string& y = node.output(0);
  auto gatherAxis0 = [&](onnx::NodeProto& g) {
    onnx::AttributeProto* a = g.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(0);
  };
  if (op == "Identity") {
    stackedSequences[y] = stacked;
  } else if (op == "SequenceAt") {
    if (node.input_size() < 2 || node.input(1).empty()) throw Error(what + " needs a position");
    gatherAxis0(emit("Gather", {stacked, node.input(1)}, y, name, out));
  } else if (op == "SequenceLength") {
    emit("Shape", {stacked}, name + "/shape", name + "/shape", out);
    emitConstant(name + "/zero", scalarProto(onnx::TensorProto::INT64, 0), out);
    gatherAxis0(emit("Gather", {name + "/shape", name + "/zero"}, y, name, out));
  } else if (op == "ConcatFromSequence") {
    if (intAttribute(node, "axis", 0) != 0)
      throw UnsupportedError(what + ": axis " + std::to_string(intAttribute(node, "axis", 0)) +
                             " of a sequence whose length is known only at run time (supported: axis 0)");
    if (intAttribute(node, "new_axis", 0)) {
      emit("Identity", {stacked}, y, name, out);
    } else {
      if (opset < 10) throw UnsupportedError(what + ": needs opset 10 or newer for a sequence of run-time length");
      emit("Shape", {stacked}, name + "/shape", name + "/shape", out);
      emitConstant(name + "/two", scalarProto(onnx::TensorProto::INT64, 2), out);
      emitConstant(name + "/end", scalarProto(onnx::TensorProto::INT64, std::numeric_limits<int64_t>::max()), out);
      emitConstant(name + "/minus_one", scalarProto(onnx::TensorProto::INT64, -1), out);
      emitUnsqueeze(name + "/two", 0, name + "/starts", out);
      emitUnsqueeze(name + "/end", 0, name + "/ends", out);
      emitUnsqueeze(name + "/minus_one", 0, name + "/lead", out);
      emit("Slice", {name + "/shape", name + "/starts", name + "/ends"}, name + "/rest", name + "/rest", out);
      emitConcat({name + "/lead", name + "/rest"}, 0, name + "/dims", out);
      emit("Reshape", {stacked, name + "/dims"}, y, name, out);
    }
  } else {
    throw UnsupportedError(what + " reads the sequence '" + node.input(0) +
                           "', whose length is known only at run time (supported: ConcatFromSequence, SequenceAt, SequenceLength)");
  }
  return true;
}

// SplitToSequence(input, split?; axis, keepdims): split sizes given (1-D) or one size for all
// (scalar; the last piece may be shorter) become a Split; without sizes every index along the
// axis is its own element (Gather, which drops the axis; Unsqueezed back for keepdims=1).
void NodeExpander::expandSplitToSequence(const onnx::NodeProto& node, const std::string& name, std::vector<const onnx::NodeProto*>& out) {
  const std::string what = "SplitToSequence node '" + name + "'";
  if (node.input_size() < 1 || node.input(0).empty() || node.output_size() != 1) throw Error(what + " needs an input and one output");
  const std::string& x = node.input(0);
  const int64_t axisAttr = intAttribute(node, "axis", 0);
  auto axisDim = [&](int64_t& axis) {
    Dims d;
    if (!inferredDims(x, out, d))
      throw UnsupportedError(what + ": the dims of '" + x + "' are not known at import (needed for the number of elements)");
    const int64_t rank = static_cast<int64_t>(d.size());
    axis = axisAttr < 0 ? axisAttr + rank : axisAttr;
    if (axis < 0 || axis >= rank) throw Error(what + ": axis " + std::to_string(axisAttr) + " is out of range for rank " + std::to_string(rank));
    return d[static_cast<size_t>(axis)];
  };
  std::vector<std::string> elements;
  const bool hasSplit = node.input_size() > 1 && !node.input(1).empty();
  if (!hasSplit) {
    int64_t axis = 0;
    const int64_t n = axisDim(axis);
    if (n > kMaxUnrolledNodes) throw UnsupportedError(what + ": " + std::to_string(n) + " elements are too many");
    const bool keep = intAttribute(node, "keepdims", 1) != 0;
    for (int64_t i = 0; i < n; ++i) {
      const std::string e = name + "/" + std::to_string(i);
      if (!keep) {
        emitGather(x, i, axis, e, out);
      } else {
        emitGather(x, i, axis, e + "/gathered", out);
        emitUnsqueeze(e + "/gathered", axis, e, out);
      }
      elements.push_back(e);
    }
  } else {
    const HostTensor split = inferredValue(node.input(1), out);
    if (!split.valid()) throw UnsupportedError(what + ": the split sizes '" + node.input(1) + "' are known only at run time");
    std::vector<int64_t> sizes = split.toInts();
    if (split.dims().empty()) {
      int64_t axis = 0;
      const int64_t n = axisDim(axis), size = sizes.at(0);
      if (size <= 0) throw Error(what + ": the split size must be positive");
      sizes.clear();
      for (int64_t at = 0; at < n; at += size) sizes.push_back(std::min(size, n - at));
    }
    if (sizes.empty()) throw UnsupportedError(what + ": no elements (an empty sequence of unknown element shape)");
    if (static_cast<int64_t>(sizes.size()) > kMaxUnrolledNodes) throw UnsupportedError(what + ": too many elements");
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::INT64);
    t.add_dims(static_cast<int64_t>(sizes.size()));
    for (int64_t v : sizes) t.add_int64_data(v);
    if (opset >= 13) emitConstant(name + "/split", t, out);
    onnx::NodeProto& s = emit("Split", {x}, name + "/0", name, out);
    for (size_t i = 1; i < sizes.size(); ++i) s.add_output(name + "/" + std::to_string(i));
    onnx::AttributeProto* a = s.add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(axisAttr);
    if (opset >= 13) {
      s.add_input(name + "/split");
    } else {
      onnx::AttributeProto* sp = s.add_attribute();
      sp->set_name("split");
      sp->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : sizes) sp->add_ints(v);
    }
    elements.assign(s.output().begin(), s.output().end());
  }
  sequences[node.output(0)] = std::move(elements);
}

// SequenceMap(input_sequence, additional inputs...; body): the body runs once per element of the
// first sequence; an additional input that is a sequence gives its element at the same index, a
// tensor the same tensor every time. Each body output becomes a sequence output.
void NodeExpander::expandSequenceMap(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out,
                                     int depth) {
  const std::string name = nodeName(node, out.size());
  const std::string what = "SequenceMap node '" + name + "'";
  const onnx::GraphProto& body = *graphAttribute(node, "body", name);
  if (node.input_size() < 1 || !sequences.count(node.input(0))) throw Error(what + ": its first input must be a sequence");
  if (body.input_size() != node.input_size() || body.output_size() != node.output_size())
    throw Error(what + ": its body must have as many inputs and outputs as the node");
  const size_t n = sequences[node.input(0)].size();
  for (const auto& in : node.input())
    if (sequences.count(in) && sequences[in].size() != n) throw Error(what + ": its input sequences have different lengths");
  if (static_cast<int64_t>(n) * body.node_size() > kMaxUnrolledNodes) throw UnsupportedError(what + ": unrolled it has too many nodes");
  const NameScope shared = sharedInitializers(body, name + "/init/", out);
  std::vector<std::vector<std::string>> results(static_cast<size_t>(node.output_size()));
  for (size_t i = 0; i < n; ++i) {
    NameScope s = iterationScope(name + "/" + std::to_string(i) + "/", scope, shared);
    for (int k = 0; k < node.input_size(); ++k) {
      auto seq = sequences.find(node.input(k));
      s.rename[body.input(k).name()] = seq != sequences.end() ? seq->second[i] : node.input(k);
    }
    inlineGraph(body, s, out, depth);
    for (int k = 0; k < node.output_size(); ++k) results[static_cast<size_t>(k)].push_back(s.resolve(body.output(k).name()));
  }
  for (int k = 0; k < node.output_size(); ++k)
    if (!node.output(k).empty()) sequences[node.output(k)] = std::move(results[static_cast<size_t>(k)]);
}

std::vector<std::string> NodeExpander::expandSequenceOutput(const std::string& name, std::vector<const onnx::NodeProto*>& out) {
  std::vector<std::string> names;
  const std::vector<std::string> elements = sequences.at(name);
  for (size_t i = 0; i < elements.size(); ++i) {
    names.push_back(sequenceElementName(name, i));
    emit("Identity", {elements[i]}, names.back(), names.back(), out);
  }
  return names;
}

std::string sequenceElementName(const std::string& sequence, size_t i) { return sequence + "[" + std::to_string(i) + "]"; }

}  // namespace kiln
