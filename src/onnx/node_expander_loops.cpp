// Loop and Scan, unrolled at import: each iteration's body is inlined with its inputs bound to the
// previous iteration's values (node_expander.h). Unrolling needs the iteration count at import: a
// Loop's trip count as a constant (or a value shape inference folds, such as a dim of a static
// input), a Scan's length as a static dim of its scan inputs. A Loop that cannot be unrolled (its
// trip count or condition computed from data, or too many iterations) stays one run-time Loop
// layer (ops/loop.cpp) whose body the importer imports as a network of its own.
#include <algorithm>
#include <limits>
#include <set>

#include "onnx/node_expander.h"
#include "onnx/node_expander_util.h"
#include "onnx/tensor_proto.h"

namespace kiln {

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
  // Not unrollable: one run-time Loop layer.
  if (node.input(0).empty()) return emitRuntimeLoop(node, body, scope, out);  // a while loop
  const HostTensor trip = inferredValue(node.input(0), out);
  if (!trip.valid()) return emitRuntimeLoop(node, body, scope, out);  // trip count computed at run time
  if (trip.count() != 1) throw Error(what + ": the trip count must hold one value");
  int64_t trips = std::max<int64_t>(trip.getInt(0), 0);
  if (!node.input(1).empty()) {
    const HostTensor c = inferredValue(node.input(1), out);
    if (!c.valid() || c.count() != 1) return emitRuntimeLoop(node, body, scope, out);  // condition computed at run time
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
      // A value of an enclosing scope (torch's exporter passes the Loop's own constant cond
      // through: torchvision's MViT pools its tokens in such loops): its value as known so far.
      bool bodyInput = false;
      for (const auto& in : body.input()) bodyInput = bodyInput || in.name() == c;
      if (!v.valid() && it == producer.end() && !bodyInput) v = inferredValue(scope ? scope->resolve(c) : c, out);
      alwaysTrue = v.valid() && v.count() == 1 && v.getInt(0) != 0;
      break;
    }
    if (!alwaysTrue) return emitRuntimeLoop(node, body, scope, out);  // may stop at a data-dependent iteration
  }
  // Too long to unroll, or no iteration with scan outputs (whose element dims the run-time loop
  // takes from the body's shape inference).
  if (trips > kMaxLoopIterations || trips * body.node_size() > kMaxUnrolledNodes || (trips == 0 && nScan > 0))
    return emitRuntimeLoop(node, body, scope, out);

  std::vector<std::string> carried(node.input().begin() + 2, node.input().end());
  std::vector<std::vector<std::string>> scans(static_cast<size_t>(nScan));
  const NameScope shared = sharedInitializers(body, name + "/init/", out);
  for (int64_t i = 0; i < trips; ++i) {
    NameScope s = iterationScope(name + "/" + std::to_string(i) + "/", scope, shared);
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
      emitAlias(carried[static_cast<size_t>(k)], node.output(k), name + "/final_" + std::to_string(k), out);
  for (int j = 0; j < nScan; ++j) {
    const std::string& target = node.output(nCarried + j);
    if (!target.empty()) emitStack(scans[static_cast<size_t>(j)], 0, target, out);
  }
}

namespace {

//! Names a graph (and the graphs nested in its nodes' attributes) defines and reads.
void collectNames(const onnx::GraphProto& g, std::set<std::string>& defined, std::vector<std::string>& used) {
  for (const auto& i : g.input()) defined.insert(i.name());
  for (const auto& i : g.initializer()) defined.insert(i.name());
  for (const auto& n : g.node()) {
    for (const auto& i : n.input())
      if (!i.empty()) used.push_back(i);
    for (const auto& o : n.output()) defined.insert(o);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collectNames(a.g(), defined, used);
      for (const auto& sub : a.graphs()) collectNames(sub, defined, used);
    }
  }
  for (const auto& o : g.output()) used.push_back(o.name());
}

}  // namespace

namespace {

//! Uses of `name` as a node input in `g` and the graphs nested in it.
int countUses(const onnx::GraphProto& g, const std::string& name) {
  int n = 0;
  for (const auto& node : g.node()) {
    for (const auto& i : node.input()) n += i == name;
    for (const auto& a : node.attribute()) {
      if (a.has_g()) n += countUses(a.g(), name);
      for (const auto& sub : a.graphs()) n += countUses(sub, name);
    }
  }
  return n;
}

}  // namespace

// A run-time Loop that carries a sequence can keep it only in the form exporters give a Python
// list appended to in a loop (`rows.append(t)`; torch.export's EmbeddingBag): it starts empty and
// each iteration's body does `seq_out = SequenceInsert(seq_in, t)` (at the end) and nothing else
// with it. Such a sequence becomes a scan output: t stacked over the iterations (one shape for
// all), a "stacked sequence" (stackedSequences) that ConcatFromSequence / SequenceAt /
// SequenceLength after the loop read. Returns the rewritten node (its body in its attribute).
const onnx::NodeProto& NodeExpander::appendedSequencesAsScans(const onnx::NodeProto& node, const onnx::GraphProto& body,
                                                              std::vector<const onnx::NodeProto*>& out) {
  const std::string name = nodeName(node, out.size());
  const std::string what = "Loop node '" + name + "'";
  onnx::NodeProto& n = inlined.emplace_back(node);
  onnx::GraphProto b = body;
  const int carried = node.input_size() - 2;
  for (int k = carried - 1; k >= 0; --k) {
    const std::string& in = node.input(2 + k);
    auto seq = sequences.find(in);
    if (seq == sequences.end()) continue;
    if (!seq->second.empty())
      throw UnsupportedError(what + ": the loop-carried sequence '" + in + "' does not start empty (a loop run at run time can only "
                             "append to an empty sequence)");
    const std::string sIn = body.input(2 + k).name(), sOut = body.output(1 + k).name();
    int producer = -1;
    for (int i = 0; i < b.node_size(); ++i)
      for (const auto& o : b.node(i).output())
        if (o == sOut) producer = i;
    const bool appends = producer >= 0 && b.node(producer).op_type() == "SequenceInsert" && b.node(producer).input_size() >= 2 &&
                         b.node(producer).input(0) == sIn && (b.node(producer).input_size() == 2 || b.node(producer).input(2).empty());
    if (!appends || countUses(body, sIn) != 1 || countUses(body, sOut) != 0)
      throw UnsupportedError(what + ": the loop-carried sequence '" + in + "' is used otherwise than appended to once per iteration "
                             "(supported only in loops unrolled at import)");
    // The appended tensor becomes the body's last scan output.
    onnx::NodeProto* ins = b.mutable_node(producer);
    const std::string value = ins->input(1);
    ins->set_op_type("Identity");
    ins->clear_attribute();
    ins->clear_input();
    ins->add_input(value);
    b.mutable_input()->DeleteSubrange(2 + k, 1);
    b.mutable_output()->DeleteSubrange(1 + k, 1);
    b.add_output()->set_name(sOut);
    n.mutable_input()->DeleteSubrange(2 + k, 1);
    const std::string seqOut = node.output(k);
    n.mutable_output()->DeleteSubrange(k, 1);
    const std::string stacked = name + "/appended_" + std::to_string(k);
    n.add_output(stacked);
    if (!seqOut.empty()) stackedSequences[seqOut] = stacked;
  }
  for (auto& a : *n.mutable_attribute())
    if (a.name() == "body") *a.mutable_g() = std::move(b);
  return n;
}

// The Loop node as it is, plus the tensors of enclosing scopes that its body reads (in the order
// the body first reads them) as extra inputs, resolved through `scope`; their body-side names go
// in the attribute `kiln_outer`. The importer turns the body into a network (importer.cpp).
void NodeExpander::emitRuntimeLoop(const onnx::NodeProto& node, const onnx::GraphProto& body, const NameScope* scope,
                                   std::vector<const onnx::NodeProto*>& out) {
  for (int k = 2; k < node.input_size(); ++k)
    if (sequences.count(node.input(k))) {
      const onnx::NodeProto& n = appendedSequencesAsScans(node, body, out);
      return emitRuntimeLoop(n, *graphAttribute(n, "body", nodeName(n, out.size())), scope, out);
    }
  for (const auto& in : node.input())
    if (sequences.count(in) || stackedSequences.count(in))
      throw UnsupportedError("Loop node '" + nodeName(node, out.size()) +
                             "': its trip count or condition is a sequence");
  std::set<std::string> defined;
  std::vector<std::string> used;
  collectNames(body, defined, used);
  std::vector<std::string> outer;
  std::set<std::string> seen;
  for (const auto& u : used)
    if (!defined.count(u) && seen.insert(u).second) outer.push_back(u);
  onnx::NodeProto& n = inlined.emplace_back(node);
  onnx::AttributeProto* a = n.add_attribute();
  a->set_name("kiln_outer");
  a->set_type(onnx::AttributeProto::STRINGS);
  for (const auto& o : outer) {
    const std::string resolved = scope ? scope->resolve(o) : o;
    if (sequences.count(resolved))
      throw UnsupportedError("Loop node '" + nodeName(node, out.size()) + "': its body reads the sequence '" + o +
                             "' of an enclosing scope (supported only in loops unrolled at import)");
    a->add_strings(o);
    n.add_input(resolved);
  }
  out.push_back(&n);
}

// A Scan (opset 9+) that cannot be unrolled, as a run-time Loop: the trip count is the scan
// inputs' length (Shape -> Gather), the loop carries the states and, unchanged, the scan inputs and
// the length; each iteration's body Gathers slice t of every scan input (length - 1 - t for a
// reverse direction) under the Scan body's own input names, then runs the Scan body's nodes. The
// stacked scan outputs are reversed (Slice with step -1) and moved to their axis (Transpose) after.
void NodeExpander::emitRuntimeScan(const onnx::NodeProto& node, const onnx::GraphProto& scanBody, int nState, int nScanIn,
                                   const std::vector<int64_t>& inAxes, const std::vector<int64_t>& inDirs,
                                   const std::vector<int64_t>& outAxes, const std::vector<int64_t>& outDirs, const NameScope* scope,
                                   std::vector<const onnx::NodeProto*>& out) {
  const std::string name = nodeName(node, out.size());
  const std::string what = "Scan node '" + name + "'";
  const std::string p = name + "/run_time/";
  const int nScanOut = node.output_size() - nState;
  // The length: dim inAxes[0] of the first scan input (Gather takes a negative axis as it is).
  emitConstant(p + "axis0", scalarProto(onnx::TensorProto::INT64, inAxes[0]), out);
  emit("Shape", {node.input(nState)}, p + "shape0", p + "shape0", out);
  emit("Gather", {p + "shape0", p + "axis0"}, p + "length", p + "length", out);

  onnx::GraphProto b;
  b.set_name(scanBody.name() + "_as_loop");
  auto addInput = [&](const std::string& n) { b.add_input()->set_name(n); };
  auto addOutput = [&](const std::string& n) { b.add_output()->set_name(n); };
  auto addNode = [&](const std::string& op, const std::vector<std::string>& ins, const std::string& o) {
    onnx::NodeProto* n = b.add_node();
    n->set_op_type(op);
    n->set_name(p + "body/" + o);
    for (const auto& i : ins) n->add_input(i);
    n->add_output(o);
    return n;
  };
  const std::string iter = p + "i", condIn = p + "cond", lenIn = p + "len_in";
  addInput(iter);
  addInput(condIn);
  for (int k = 0; k < nState; ++k) *b.add_input() = scanBody.input(k);
  for (int j = 0; j < nScanIn; ++j) addInput(p + "x" + std::to_string(j) + "_in");
  addInput(lenIn);
  *b.add_initializer() = scalarProto(onnx::TensorProto::INT64, 1);
  b.mutable_initializer(0)->set_name(p + "one");
  addNode("Sub", {lenIn, p + "one"}, p + "last");
  addNode("Sub", {p + "last", iter}, p + "back");
  for (int j = 0; j < nScanIn; ++j) {
    onnx::NodeProto* g = addNode("Gather", {p + "x" + std::to_string(j) + "_in", inDirs[static_cast<size_t>(j)] ? p + "back" : iter},
                                 scanBody.input(nState + j).name());
    onnx::AttributeProto* a = g->add_attribute();
    a->set_name("axis");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(inAxes[static_cast<size_t>(j)]);
  }
  for (const auto& init : scanBody.initializer()) *b.add_initializer() = init;
  for (const auto& n : scanBody.node()) *b.add_node() = n;
  addNode("Identity", {condIn}, p + "cond_out");
  addOutput(p + "cond_out");
  for (int k = 0; k < nState; ++k) *b.add_output() = scanBody.output(k);
  for (int j = 0; j < nScanIn; ++j) {
    addNode("Identity", {p + "x" + std::to_string(j) + "_in"}, p + "x" + std::to_string(j) + "_out");
    addOutput(p + "x" + std::to_string(j) + "_out");
  }
  addNode("Identity", {lenIn}, p + "len_out");
  addOutput(p + "len_out");
  for (int j = 0; j < nScanOut; ++j) *b.add_output() = scanBody.output(nState + j);

  onnx::NodeProto& loop = inlined.emplace_back();
  loop.set_op_type("Loop");
  loop.set_name(name);
  loop.add_input(p + "length");
  loop.add_input("");
  for (int k = 0; k < nState; ++k) loop.add_input(node.input(k));
  for (int j = 0; j < nScanIn; ++j) loop.add_input(node.input(nState + j));
  loop.add_input(p + "length");
  for (int k = 0; k < nState; ++k) loop.add_output(node.output(k).empty() ? p + "state" + std::to_string(k) : node.output(k));
  for (int j = 0; j <= nScanIn; ++j) loop.add_output(p + "carried" + std::to_string(j));
  std::vector<std::string> stacked;
  for (int j = 0; j < nScanOut; ++j) {
    const bool direct = outDirs[static_cast<size_t>(j)] == 0 && outAxes[static_cast<size_t>(j)] == 0 && !node.output(nState + j).empty();
    stacked.push_back(direct ? node.output(nState + j) : p + "stacked" + std::to_string(j));
    loop.add_output(stacked.back());
  }
  onnx::AttributeProto* ba = loop.add_attribute();
  ba->set_name("body");
  ba->set_type(onnx::AttributeProto::GRAPH);
  *ba->mutable_g() = std::move(b);
  emitRuntimeLoop(loop, loop.attribute(0).g(), scope, out);

  for (int j = 0; j < nScanOut; ++j) {
    const std::string& target = node.output(nState + j);
    if (target.empty() || stacked[static_cast<size_t>(j)] == target) continue;
    std::string cur = stacked[static_cast<size_t>(j)];
    if (outDirs[static_cast<size_t>(j)]) {  // reverse along the stacking axis 0
      if (opset < 10) throw UnsupportedError(what + ": a reverse scan output of a run-time Scan needs opset 10 or newer");
      const std::string r = p + "rev" + std::to_string(j) + "_";
      emitConstant(r + "start", scalarProto(onnx::TensorProto::INT64, -1), out);
      emitConstant(r + "end", scalarProto(onnx::TensorProto::INT64, std::numeric_limits<int64_t>::min()), out);
      emitConstant(r + "axis", scalarProto(onnx::TensorProto::INT64, 0), out);
      emitUnsqueeze(r + "start", 0, r + "starts", out);  // also the step, -1
      emitUnsqueeze(r + "end", 0, r + "ends", out);
      emitUnsqueeze(r + "axis", 0, r + "axes", out);
      const std::string next = outAxes[static_cast<size_t>(j)] == 0 ? target : p + "reversed" + std::to_string(j);
      emit("Slice", {cur, r + "starts", r + "ends", r + "axes", r + "starts"}, next, next, out);
      cur = next;
    }
    int64_t axis = outAxes[static_cast<size_t>(j)];
    if (axis == 0) continue;
    // Moving the stacked axis needs the output's rank: from the Scan body's declared output.
    const auto& vt = scanBody.output(nState + j).type();
    if (!vt.has_tensor_type() || !vt.tensor_type().has_shape())
      throw UnsupportedError(what + ": scan output " + std::to_string(j) + " goes to axis " + std::to_string(axis) +
                             " and its rank is not declared in the body (needed for a Scan run at run time)");
    const int64_t rank = vt.tensor_type().shape().dim_size() + 1;
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) throw Error(what + ": scan output axis " + std::to_string(outAxes[static_cast<size_t>(j)]) + " is out of range");
    onnx::NodeProto& t = emit("Transpose", {cur}, target, target, out);
    onnx::AttributeProto* perm = t.add_attribute();
    perm->set_name("perm");
    perm->set_type(onnx::AttributeProto::INTS);
    for (int64_t k = 1; k <= axis; ++k) perm->add_ints(k);
    perm->add_ints(0);
    for (int64_t k = axis + 1; k < rank; ++k) perm->add_ints(k);
  }
}

// Scan (opset 9+): inputs [initial states (N)..., scan inputs (M)...]; the body maps [states,
// one slice of each scan input] to [new states, one slice of each scan output]. Unrolled: the
// slice t of a scan input is Gather(x, t, axis) (t counted from the end for a reverse direction),
// and a scan output stacks the iterations' slices along its axis (in reverse order for a
// reverse direction). Opset 8's form has a leading batch axis on every input and output and an
// optional sequence_lens input first: each batch entry is unrolled on its own, then restacked.
void NodeExpander::expandScan(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out,
                              int depth) {
  const std::string name = nodeName(node, out.size());
  const onnx::GraphProto& body = *graphAttribute(node, "body", name);
  const std::string what = "Scan node '" + name + "'";
  const bool batched = opset < 9;  // opset 8: batch axis 0 and sequence_lens
  const int first = batched ? 1 : 0;
  const int64_t nScanIn = intAttribute(node, "num_scan_inputs", -1);
  const int nIn = node.input_size() - first;
  if (nScanIn < 1 || nScanIn > nIn) throw Error(what + ": num_scan_inputs must be in [1, " + std::to_string(nIn) + "]");
  const int nState = nIn - static_cast<int>(nScanIn);
  const int nScanOut = node.output_size() - nState;
  if (body.input_size() != nIn) throw Error(what + ": its body has " + std::to_string(body.input_size()) + " inputs, the node " + std::to_string(nIn));
  if (nScanOut < 0 || body.output_size() != node.output_size())
    throw Error(what + ": its body has " + std::to_string(body.output_size()) + " outputs and the node " + std::to_string(node.output_size()));
  std::vector<int64_t> inAxes = intsAttribute(node, "scan_input_axes"), outAxes = intsAttribute(node, "scan_output_axes");
  std::vector<int64_t> inDirs = intsAttribute(node, batched ? "directions" : "scan_input_directions");
  std::vector<int64_t> outDirs = intsAttribute(node, "scan_output_directions");
  if (inAxes.empty()) inAxes.assign(static_cast<size_t>(nScanIn), 0);
  if (outAxes.empty()) outAxes.assign(static_cast<size_t>(nScanOut), 0);
  if (inDirs.empty()) inDirs.assign(static_cast<size_t>(nScanIn), 0);
  if (outDirs.empty()) outDirs.assign(static_cast<size_t>(nScanOut), 0);
  if (inAxes.size() != static_cast<size_t>(nScanIn) || inDirs.size() != static_cast<size_t>(nScanIn) ||
      outAxes.size() != static_cast<size_t>(nScanOut) || outDirs.size() != static_cast<size_t>(nScanOut))
    throw Error(what + ": its axes/directions attributes must have one entry per scan input or output");
  for (int64_t d : inDirs) if (d != 0 && d != 1) throw Error(what + ": directions must be 0 or 1");
  for (int64_t d : outDirs) if (d != 0 && d != 1) throw Error(what + ": directions must be 0 or 1");

  // The length: a static dim of the scan inputs, the same in all.
  const int64_t seqAxisOffset = batched ? 1 : 0;
  int64_t length = -1, batch = 1;
  for (int j = 0; j < nScanIn; ++j) {
    const std::string& x = node.input(first + nState + j);
    Dims d;
    if (!inferredDims(x, out, d)) {
      if (batched)
        throw UnsupportedError(what + ": the length of scan input '" + x +
                               "' is not known at import (an opset-8 Scan is unrolled over a static length; give the input static dims)");
      return emitRuntimeScan(node, body, nState, static_cast<int>(nScanIn), inAxes, inDirs, outAxes, outDirs, scope, out);
    }
    const int64_t rank = static_cast<int64_t>(d.size());
    int64_t axis = batched ? 1 : inAxes[static_cast<size_t>(j)];
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) throw Error(what + ": scan input axis " + std::to_string(inAxes[static_cast<size_t>(j)]) +
                                              " is out of range for rank " + std::to_string(rank));
    inAxes[static_cast<size_t>(j)] = axis - seqAxisOffset;
    if (length >= 0 && d[static_cast<size_t>(axis)] != length)
      throw Error(what + ": its scan inputs have different lengths (" + std::to_string(length) + " and " +
                  std::to_string(d[static_cast<size_t>(axis)]) + ")");
    length = d[static_cast<size_t>(axis)];
    if (batched) batch = d[0];
  }
  if (batched && !node.input(0).empty()) {
    const HostTensor lens = inferredValue(node.input(0), out);
    bool full = lens.valid();
    for (int64_t i = 0; full && i < lens.count(); ++i) full = lens.getInt(i) == length;
    if (!full)
      throw UnsupportedError(what + ": sequence_lens shorter than the scan inputs' length (or known only at run time) are not supported");
  }
  const bool tooLong = length > kMaxLoopIterations || length * batch * body.node_size() > kMaxUnrolledNodes;
  if (!batched && (tooLong || (length == 0 && nScanOut > 0)))
    return emitRuntimeScan(node, body, nState, static_cast<int>(nScanIn), inAxes, inDirs, outAxes, outDirs, scope, out);
  if (length == 0 && nScanOut > 0)
    throw UnsupportedError(what + " runs no iteration and has scan outputs (empty tensors of unknown shape are not supported)");
  if (tooLong)
    throw UnsupportedError(what + ": " + std::to_string(length) + " iterations of " + std::to_string(batch) + " batch entries exceed "
                           "kiln's unroll limits (" + std::to_string(kMaxLoopIterations) + " iterations, " +
                           std::to_string(kMaxUnrolledNodes) + " nodes; an opset-8 Scan is unrolled at build time)");

  const NameScope shared = sharedInitializers(body, name + "/init/", out);
  // Per batch entry (one entry without opset 8's batch axis): final states and stacked scan outputs.
  std::vector<std::vector<std::string>> finalStates(static_cast<size_t>(nState)), scanOuts(static_cast<size_t>(nScanOut));
  for (int64_t b = 0; b < batch; ++b) {
    const std::string bp = name + (batched ? "/b" + std::to_string(b) : "");
    std::vector<std::string> state, scanIn;
    for (int k = 0; k < nState; ++k) {
      const std::string& init = node.input(first + k);
      if (!batched) { state.push_back(init); continue; }
      state.push_back(bp + "/state_" + std::to_string(k));
      emitGather(init, b, 0, state.back(), out);
    }
    for (int j = 0; j < nScanIn; ++j) {
      const std::string& x = node.input(first + nState + j);
      if (!batched) { scanIn.push_back(x); continue; }
      scanIn.push_back(bp + "/scan_in_" + std::to_string(j));
      emitGather(x, b, 0, scanIn.back(), out);
    }
    std::vector<std::vector<std::string>> slices(static_cast<size_t>(nScanOut));
    for (int64_t t = 0; t < length; ++t) {
      NameScope s = iterationScope(bp + "/" + std::to_string(t) + "/", scope, shared);
      for (int k = 0; k < nState; ++k) s.rename[body.input(k).name()] = state[static_cast<size_t>(k)];
      for (int j = 0; j < nScanIn; ++j) {
        const std::string slice = bp + "/slice/" + std::to_string(t) + "/" + std::to_string(j);
        const int64_t index = inDirs[static_cast<size_t>(j)] ? length - 1 - t : t;
        emitGather(scanIn[static_cast<size_t>(j)], index, inAxes[static_cast<size_t>(j)], slice, out);
        s.rename[body.input(nState + j).name()] = slice;
      }
      inlineGraph(body, s, out, depth);
      for (int k = 0; k < nState; ++k) state[static_cast<size_t>(k)] = s.resolve(body.output(k).name());
      for (int j = 0; j < nScanOut; ++j) slices[static_cast<size_t>(j)].push_back(s.resolve(body.output(nState + j).name()));
    }
    for (int k = 0; k < nState; ++k) finalStates[static_cast<size_t>(k)].push_back(state[static_cast<size_t>(k)]);
    for (int j = 0; j < nScanOut; ++j) {
      std::vector<std::string>& items = slices[static_cast<size_t>(j)];
      if (outDirs[static_cast<size_t>(j)]) std::reverse(items.begin(), items.end());
      if (!batched) { scanOuts[static_cast<size_t>(j)] = items; continue; }
      const std::string stacked = bp + "/scan_out_" + std::to_string(j);
      emitStack(items, 0, stacked, out);
      scanOuts[static_cast<size_t>(j)].push_back(stacked);
    }
  }
  // Opset 8 restacks the batch entries along axis 0; opset 9+ stacks the slices along the output axis.
  for (int k = 0; k < nState; ++k) {
    const std::string& target = node.output(k);
    if (target.empty()) continue;
    if (batched) emitStack(finalStates[static_cast<size_t>(k)], 0, target, out);
    else emitAlias(finalStates[static_cast<size_t>(k)][0], target, name + "/final_" + std::to_string(k), out);
  }
  for (int j = 0; j < nScanOut; ++j) {
    const std::string& target = node.output(nState + j);
    if (!target.empty()) emitStack(scanOuts[static_cast<size_t>(j)], batched ? 0 : outAxes[static_cast<size_t>(j)], target, out);
  }
}

}  // namespace kiln
