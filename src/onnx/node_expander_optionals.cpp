// Optional values, expanded at import (node_expander.h). kiln has no optional type: an optional
// that holds an element is that element (a tensor, or a sequence's list of tensors), and one made
// empty by an Optional node without input is known empty at import. So Optional and
// OptionalGetElement become aliases, and OptionalHasElement a constant: false for an omitted input
// or an empty optional, true for any tensor or sequence (a value that exists).
#include "onnx/node_expander.h"
#include "onnx/node_expander_util.h"

namespace kiln {

bool NodeExpander::expandOptionalOp(const onnx::NodeProto& node, std::vector<const onnx::NodeProto*>& out) {
  const std::string& op = node.op_type();
  const bool optionalOp = op == "Optional" || op == "OptionalHasElement" || op == "OptionalGetElement";
  if (!optionalOp) {
    for (const auto& in : node.input())
      if (emptyOptionals.count(in))
        throw UnsupportedError(op + " node '" + nodeName(node, out.size()) + "' reads the empty optional '" + in +
                               "'; kiln supports empty optionals only in OptionalHasElement");
    return false;
  }
  const std::string name = nodeName(node, out.size());
  const std::string what = op + " node '" + name + "'";
  if (node.output_size() != 1 || node.output(0).empty()) throw Error(what + " must have one output");
  if (node.input_size() > 1) throw Error(what + " takes at most one input");
  const std::string& output = node.output(0);
  const bool hasInput = node.input_size() == 1 && !node.input(0).empty();
  const bool empty = !hasInput || emptyOptionals.count(node.input(0)) != 0;
  if (op == "Optional") {
    if (empty) emptyOptionals.insert(output);
    else emitAlias(node.input(0), output, name, out);
  } else if (op == "OptionalHasElement") {
    emitConstant(output, scalarProto(onnx::TensorProto::BOOL, empty ? 0 : 1), out);
  } else {  // OptionalGetElement
    if (empty) throw Error(what + ": the optional is empty (it has no element to get)");
    emitAlias(node.input(0), output, name, out);
  }
  return true;
}

}  // namespace kiln
