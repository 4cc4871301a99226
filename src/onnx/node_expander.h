// Expansion of ONNX nodes that are not one layer each: calls of model-local functions (their
// bodies inlined), If (both branches inlined, then one If layer selecting between their outputs),
// Loop with a trip count known at import and Scan over a length known at import (unrolled,
// node_expander_loops.cpp), the sequence ops (node_expander_sequences.cpp): a sequence is a
// list of tensors known at import, and each op on it becomes ops on its elements, and the optional
// ops (node_expander_optionals.cpp): an optional value is its element, or known empty at import;
// FlexAttention (ai.onnx.preview) becomes the ops of its definition (node_expander_flex_attention.cpp).
// Each inlined node is a copy whose tensor names are renamed into the enclosing scope
// (node_expander.cpp).
#pragma once
#include <deque>
#include <functional>
#include <map>
#include <set>
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
  //! Dims (and the value, when computable at import) of a tensor produced by the nodes expanded
  //! so far (`sofar`), by shape inference over them; false when not known at import. Used only
  //! where an expansion needs a shape: a Scan's length, SplitToSequence without split sizes.
  std::function<bool(const std::string& name, const std::vector<const onnx::NodeProto*>& sofar, Dims& dims, HostTensor& value)>
      inferTensor;
  //! The element type of a tensor produced by the nodes expanded so far (by inference over them);
  //! false when not known at import. Used where an expansion casts to an input's type (FlexAttention).
  std::function<bool(const std::string& name, const std::vector<const onnx::NodeProto*>& sofar, DataType& type)> inferType;
  //! Sequence values by (network) tensor name: their elements' tensor names, in order. Graph
  //! inputs of sequence type are entered by the importer; sequence ops add the others.
  std::map<std::string, std::vector<std::string>> sequences;
  //! Sequences of a length known only at run time, by (network) tensor name: one tensor of the
  //! elements stacked along axis 0 (a run-time Loop's appended list, node_expander_loops.cpp).
  std::map<std::string, std::string> stackedSequences;
  //! Optional values made empty by an Optional node without input (node_expander_optionals.cpp).
  std::set<std::string> emptyOptionals;
  std::string baseDir;
  int opset = 0;
  //! Loops and Scans with more iterations than this, or more unrolled nodes than kMaxUnrolledNodes,
  //! are refused.
  static constexpr int64_t kMaxLoopIterations = 64;
  static constexpr int64_t kMaxUnrolledNodes = 8192;

  //! Appends `node` (its own names already in the network's namespace; its subgraphs' outer
  //! references resolve through `scope`, nullptr at the top level) to `out`, expanded.
  void expand(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out, int depth);
  //! A sequence graph output: one Identity per element into sequenceElementName(name, i);
  //! returns those names.
  std::vector<std::string> expandSequenceOutput(const std::string& name, std::vector<const onnx::NodeProto*>& out);

 private:
  std::deque<onnx::NodeProto> inlined;  // the nodes made here (stable addresses)
  std::map<std::string, const onnx::NodeProto*> constantNodes;  // Constant nodes seen, by output

  const onnx::FunctionProto* functionFor(const onnx::NodeProto& node) const;
  void expandFunction(const onnx::NodeProto& node, const onnx::FunctionProto& f, std::vector<const onnx::NodeProto*>& out, int depth);
  void expandIf(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out, int depth);
  void expandLoop(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out, int depth);
  //! A Loop that cannot be unrolled, as one node for the run-time Loop layer (ops/loop.cpp).
  void emitRuntimeLoop(const onnx::NodeProto& node, const onnx::GraphProto& body, const NameScope* scope,
                       std::vector<const onnx::NodeProto*>& out);
  //! The Loop with its appended-to sequences turned into scan outputs (node_expander_loops.cpp).
  const onnx::NodeProto& appendedSequencesAsScans(const onnx::NodeProto& node, const onnx::GraphProto& body,
                                                  std::vector<const onnx::NodeProto*>& out);
  //! ConcatFromSequence, SequenceAt, SequenceLength, Identity of a stacked sequence; false when
  //! `node` reads none (node_expander_sequences.cpp).
  bool expandStackedSequenceOp(const onnx::NodeProto& node, std::vector<const onnx::NodeProto*>& out);
  //! A Scan that cannot be unrolled, as a run-time Loop (node_expander_loops.cpp).
  void emitRuntimeScan(const onnx::NodeProto& node, const onnx::GraphProto& body, int nState, int nScanIn,
                       const std::vector<int64_t>& inAxes, const std::vector<int64_t>& inDirs, const std::vector<int64_t>& outAxes,
                       const std::vector<int64_t>& outDirs, const NameScope* scope, std::vector<const onnx::NodeProto*>& out);
  void expandScan(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out, int depth);
  //! ai.onnx.preview FlexAttention as its decomposition, score_mod / prob_mod inlined
  //! (node_expander_flex_attention.cpp).
  void expandFlexAttention(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out, int depth);
  //! ONNX 1.0-1.4's experimental ops (ImageScaler, Crop, ScaledTanh, ParametricSoftplus, Affine)
  //! as the standard ops they were defined by; false for any other op (node_expander_experimental.cpp).
  bool expandExperimentalOp(const onnx::NodeProto& node, std::vector<const onnx::NodeProto*>& out);
  //! ONNX Runtime's com.microsoft quantized ops (QLinearAdd, QLinearConcat, QGemm, ...) as DQ -> op
  //! -> Q in standard ops; false for any other op (node_expander_qlinear_contrib.cpp).
  bool expandQLinearContribOp(const onnx::NodeProto& node, std::vector<const onnx::NodeProto*>& out);
  //! ONNX Runtime's transformer-optimizer ops (Gelu, BiasGelu, FastGelu, QuickGelu, the skip and
  //! simplified LayerNorms) in standard ops; false for any other op (node_expander_ort_transformer.cpp).
  bool expandOrtTransformerOp(const onnx::NodeProto& node, std::vector<const onnx::NodeProto*>& out);
  //! com.microsoft MatMulNBits as a MatMul with its weights dequantized at import
  //! (node_expander_matmul_nbits.cpp).
  void expandMatMulNBits(const onnx::NodeProto& node, std::vector<const onnx::NodeProto*>& out);
  //! Optional, OptionalHasElement, OptionalGetElement (node_expander_optionals.cpp); false when
  //! `node` is none of them.
  bool expandOptionalOp(const onnx::NodeProto& node, std::vector<const onnx::NodeProto*>& out);
  //! Sequence ops (and Identity/If on sequences); false when `node` is not one.
  bool expandSequenceOp(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out, int depth);
  void expandSplitToSequence(const onnx::NodeProto& node, const std::string& name, std::vector<const onnx::NodeProto*>& out);
  void expandSequenceMap(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out, int depth);
  //! The scope of one unrolled iteration of `body`: its initializers (placed once, in `shared`)
  //! and the names in `bind` (body input -> tensor) already mapped.
  NameScope iterationScope(const std::string& prefix, const NameScope* parent, const NameScope& shared) const;
  //! Places a body's initializers once for all iterations (as Constant nodes under `prefix`).
  NameScope sharedInitializers(const onnx::GraphProto& body, const std::string& prefix, std::vector<const onnx::NodeProto*>& out);
  //! Inlines a subgraph's initializers (as Constant nodes) and nodes into `scope`, which already
  //! maps the graph's inputs.
  void inlineGraph(const onnx::GraphProto& g, NameScope& scope, std::vector<const onnx::NodeProto*>& out, int depth);
  //! A node made here, appended to `out` as it is (not expanded).
  onnx::NodeProto& emit(const std::string& op, const std::vector<std::string>& inputs, const std::string& output,
                        const std::string& name, std::vector<const onnx::NodeProto*>& out);
  onnx::NodeProto& emitConstant(const std::string& output, const onnx::TensorProto& value, std::vector<const onnx::NodeProto*>& out);
  //! The value of a tensor known at import (initializer or Constant node output); invalid otherwise.
  HostTensor importTimeValue(const std::string& name) const;
  //! importTimeValue, else the value computed by shape inference over the nodes so far (shapes
  //! folded: `Shape(x)`, sizes derived from them); invalid when known only at run time.
  HostTensor inferredValue(const std::string& name, const std::vector<const onnx::NodeProto*>& out) const;
  //! The rank of a tensor by shape inference over the nodes so far; -1 when unknown.
  int64_t inferredRank(const std::string& name, const std::vector<const onnx::NodeProto*>& out) const;
  //! ReduceMean of x over `axes` with keepdims, in the model opset's form (axes an attribute
  //! before 18, an input from 18).
  onnx::NodeProto& emitReduceMean(const std::string& x, const std::vector<int64_t>& axes, const std::string& output,
                                  std::vector<const onnx::NodeProto*>& out);
  //! The dims of a tensor by shape inference over the nodes so far; false when not static.
  bool inferredDims(const std::string& name, const std::vector<const onnx::NodeProto*>& out, Dims& dims) const;
  //! Small node builders for expansions (in the form the model's opset expects).
  void emitGather(const std::string& x, int64_t index, int64_t axis, const std::string& output, std::vector<const onnx::NodeProto*>& out);
  void emitUnsqueeze(const std::string& x, int64_t axis, const std::string& output, std::vector<const onnx::NodeProto*>& out);
  void emitConcat(const std::vector<std::string>& items, int64_t axis, const std::string& output, std::vector<const onnx::NodeProto*>& out);
  //! Stacks tensors along a new axis `axis` (Unsqueeze each, then Concat).
  void emitStack(const std::vector<std::string>& items, int64_t axis, const std::string& output, std::vector<const onnx::NodeProto*>& out);
  //! `output` as another name of `input`: a sequence is aliased, a tensor gets an Identity node.
  void emitAlias(const std::string& input, const std::string& output, const std::string& name, std::vector<const onnx::NodeProto*>& out);
  static std::string nodeName(const onnx::NodeProto& node, size_t index);
};

}  // namespace kiln
