// Expansion of ONNX nodes that are not one layer each: calls of model-local functions (their
// bodies inlined), If (both branches inlined, then one If layer selecting between their outputs)
// and Loop with a constant trip count (unrolled). Each inlined node is a copy whose tensor names
// are renamed into the enclosing scope (node_expander.cpp).
#pragma once
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/types.h"
#include "onnx.pb.h"

namespace kiln {

//! Where names used in a body resolve: names defined in the body map to their renamed form;
//! other names are outer-scope references (resolved by the parent scope, or kept at the top
//! level), except in a function body, which sees no outer scope (`closed`: its names get `prefix`).
struct NameScope {
  std::map<std::string, std::string> rename;
  std::string prefix;
  bool closed = false;
  const NameScope* parent = nullptr;
  std::string resolve(const std::string& name) const;
};

struct NodeExpander {
  using FunctionKey = std::tuple<std::string, std::string, std::string>;  // domain, name, overload
  std::map<FunctionKey, const onnx::FunctionProto*> functions;
  //! True when a registered plugin replaces the node (checked before inlining a function body).
  std::function<bool(const onnx::NodeProto&)> pluginReplaces;
  //! The value of a network tensor known at import (an initializer), invalid otherwise.
  std::function<HostTensor(const std::string&)> initializerValue;
  std::string baseDir;
  int opset = 0;
  //! Loops with more iterations than this, or more unrolled nodes than kMaxUnrolledNodes, are refused.
  static constexpr int64_t kMaxLoopIterations = 64;
  static constexpr int64_t kMaxUnrolledNodes = 8192;

  //! Appends `node` (its own names already in the network's namespace; its subgraphs' outer
  //! references resolve through `scope`, nullptr at the top level) to `out`, expanded.
  void expand(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out, int depth);

 private:
  std::deque<onnx::NodeProto> inlined;  // the nodes made here (stable addresses)
  std::map<std::string, const onnx::NodeProto*> constantNodes;  // Constant nodes seen, by output

  const onnx::FunctionProto* functionFor(const onnx::NodeProto& node) const;
  void expandFunction(const onnx::NodeProto& node, const onnx::FunctionProto& f, std::vector<const onnx::NodeProto*>& out, int depth);
  void expandIf(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out, int depth);
  void expandLoop(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out, int depth);
  //! Inlines a subgraph's initializers (as Constant nodes) and nodes into `scope`, which already
  //! maps the graph's inputs.
  void inlineGraph(const onnx::GraphProto& g, NameScope& scope, std::vector<const onnx::NodeProto*>& out, int depth);
  //! A node made here, appended to `out` as it is (not expanded).
  onnx::NodeProto& emit(const std::string& op, const std::vector<std::string>& inputs, const std::string& output,
                        const std::string& name, std::vector<const onnx::NodeProto*>& out);
  onnx::NodeProto& emitConstant(const std::string& output, const onnx::TensorProto& value, std::vector<const onnx::NodeProto*>& out);
  //! The value of a tensor known at import (initializer or Constant node output); invalid otherwise.
  HostTensor importTimeValue(const std::string& name) const;
  static std::string nodeName(const onnx::NodeProto& node, size_t index);
};

}  // namespace kiln
