// FlexAttention (ai.onnx.preview, opset 1), expanded at import into the ops of its ONNX definition
// (node_expander.h): with Q (B, Hq, L, E), K (B, Hkv, S, E), V (B, Hkv, S, Ev),
//   K, V repeated over the query heads (GQA: query head h reads kv head h / (Hq / Hkv))
//   Score = (Q * sqrt(scale)) @ (K * sqrt(scale))^T      scale defaults to 1 / sqrt(E)
//   Score = score_mod(Cast(Score, P))                   P = softmax_precision (float32, or
//   Prob  = prob_mod(Softmax(Score, axis -1))               float64 for float64 inputs)
//   Y     = Cast(Prob @ Cast(V, P), T)
// score_mod and prob_mod (one rank-4 input, one output of its shape) are inlined like an If
// branch. Shapes are read with Shape ops, so dynamic dims work; the element type T must be known
// at import (it sets the casts).
#include <cmath>

#include "onnx/node_expander.h"
#include "onnx/node_expander_util.h"

namespace kiln {

void NodeExpander::expandFlexAttention(const onnx::NodeProto& node, const NameScope* scope, std::vector<const onnx::NodeProto*>& out,
                                       int depth) {
  const std::string name = nodeName(node, out.size());
  const std::string what = "FlexAttention node '" + name + "'";
  if (node.input_size() != 3 || node.output_size() != 1 || node.output(0).empty())
    throw Error(what + " must have the inputs Q, K, V and one output");
  for (const auto& in : node.input())
    if (in.empty()) throw Error(what + ": Q, K and V are required");
  const std::string &q = node.input(0), &k = node.input(1), &v = node.input(2);
  const std::string p = name + "/";
  DataType type = DataType::kFLOAT;
  if (!inferType || !inferType(q, out, type))
    throw UnsupportedError(what + ": the element type of Q is not known at import");
  const int typeCode = onnxFloatCode(type);
  if (!typeCode) throw Error(what + ": Q must be a float type, got " + toString(type));
  const onnx::AttributeProto* precision = findAttribute(node, "softmax_precision");
  const int64_t defaultPrecision = type == DataType::kDOUBLE ? onnx::TensorProto::DOUBLE : onnx::TensorProto::FLOAT;
  const int64_t softmaxCode = precision ? precision->i() : defaultPrecision;
  if (softmaxCode != onnx::TensorProto::FLOAT && softmaxCode != onnx::TensorProto::DOUBLE && softmaxCode != onnx::TensorProto::FLOAT16 &&
      softmaxCode != onnx::TensorProto::BFLOAT16)
    throw Error(what + ": softmax_precision must be a float type code, got " + std::to_string(softmaxCode));
  for (const auto& a : node.attribute())
    if (a.name() != "scale" && a.name() != "softmax_precision" && a.name() != "score_mod" && a.name() != "prob_mod")
      throw Error(what + ": unknown attribute '" + a.name() + "'");

  auto cast = [&](const std::string& x, int64_t to, const std::string& y) { setAttribute(emit("Cast", {x}, y, y, out), "to", to); };
  auto constant = [&](const std::string& y, onnx::TensorProto t) { emitConstant(y, t, out); };
  // A dim of x as a 1-D int64 tensor: Gather(Shape(x), [i]).
  auto dim = [&](const std::string& x, int64_t i, const std::string& y) {
    emit("Shape", {x}, y + "/shape", y + "/shape", out);
    onnx::TensorProto index = scalarProto(onnx::TensorProto::INT64, i);
    index.add_dims(1);
    constant(y + "/index", index);
    setAttribute(emit("Gather", {y + "/shape", y + "/index"}, y, y, out), "axis", 0);
  };

  // K and V aligned with the query heads, unless the heads are known to be as many.
  std::string kAligned = k, vAligned = v;
  Dims qDims, kDims;
  const bool sameHeads = inferredDims(q, out, qDims) && inferredDims(k, out, kDims) && qDims.size() == 4 && kDims.size() == 4 &&
                         qDims[1] == kDims[1];
  if (!sameHeads) {
    dim(q, 0, p + "batch");
    dim(q, 1, p + "q_heads");
    dim(k, 1, p + "kv_heads");
    dim(k, 2, p + "kv_length");
    emit("Div", {p + "q_heads", p + "kv_heads"}, p + "group", p + "group", out);
    for (const std::string* x : {&k, &v}) {
      const std::string base = p + (x == &k ? "k" : "v");
      dim(*x, 3, base + "_head_size");
      emitUnsqueeze(*x, 2, base + "_unsqueezed", out);
      emitConcat({p + "batch", p + "kv_heads", p + "group", p + "kv_length", base + "_head_size"}, 0, base + "_expand_shape", out);
      emit("Expand", {base + "_unsqueezed", base + "_expand_shape"}, base + "_expanded", base + "_expanded", out);
      emitConcat({p + "batch", p + "q_heads", p + "kv_length", base + "_head_size"}, 0, base + "_aligned_shape", out);
      emit("Reshape", {base + "_expanded", base + "_aligned_shape"}, base + "_aligned", base + "_aligned", out);
    }
    kAligned = p + "k_aligned";
    vAligned = p + "v_aligned";
  }

  // The scale, in float32, split as sqrt(scale) on Q and on K.
  const onnx::AttributeProto* scaleAttr = findAttribute(node, "scale");
  onnx::TensorProto one;
  one.set_data_type(onnx::TensorProto::FLOAT);
  if (scaleAttr) {
    one.add_float_data(scaleAttr->f());
    constant(p + "scale", one);
  } else {
    one.add_float_data(1.0f);
    constant(p + "one", one);
    emit("Shape", {q}, p + "q_shape", p + "q_shape", out);
    emitGather(p + "q_shape", 3, 0, p + "head_size", out);
    cast(p + "head_size", onnx::TensorProto::FLOAT, p + "head_size_f");
    emit("Sqrt", {p + "head_size_f"}, p + "sqrt_head_size", p + "sqrt_head_size", out);
    emit("Div", {p + "one", p + "sqrt_head_size"}, p + "scale", p + "scale", out);
  }
  emit("Sqrt", {p + "scale"}, p + "scale_sqrt_f", p + "scale_sqrt_f", out);
  cast(p + "scale_sqrt_f", typeCode, p + "scale_sqrt");
  emit("Mul", {q, p + "scale_sqrt"}, p + "q_scaled", p + "q_scaled", out);
  emit("Mul", {kAligned, p + "scale_sqrt"}, p + "k_scaled", p + "k_scaled", out);
  onnx::NodeProto& tr = emit("Transpose", {p + "k_scaled"}, p + "k_transposed", p + "k_transposed", out);
  onnx::AttributeProto* perm = tr.add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int64_t i : {0, 1, 3, 2}) perm->add_ints(i);
  emit("MatMul", {p + "q_scaled", p + "k_transposed"}, p + "score", p + "score", out);
  cast(p + "score", softmaxCode, p + "score_sp");

  // A modifier subgraph applied to `x`: its one input bound to x, its output's name returned.
  auto applyModifier = [&](const char* attr, const std::string& x) -> std::string {
    const onnx::AttributeProto* a = findAttribute(node, attr);
    if (!a) return x;
    if (a->type() != onnx::AttributeProto::GRAPH) throw Error(what + ": '" + attr + "' must be a graph");
    const onnx::GraphProto& g = a->g();
    if (g.input_size() != 1 || g.output_size() != 1)
      throw Error(what + ": '" + attr + "' must have one input and one output, it has " + std::to_string(g.input_size()) + " and " +
                  std::to_string(g.output_size()));
    NameScope s;
    s.prefix = p + attr + "/";
    s.parent = scope;
    s.rename[g.input(0).name()] = x;
    inlineGraph(g, s, out, depth);
    return s.resolve(g.output(0).name());
  };
  const std::string score = applyModifier("score_mod", p + "score_sp");
  setAttribute(emit("Softmax", {score}, p + "prob", p + "prob", out), "axis", 3);
  const std::string prob = applyModifier("prob_mod", p + "prob");
  if (softmaxCode == typeCode) {
    emit("MatMul", {prob, vAligned}, node.output(0), name, out);
    return;
  }
  cast(vAligned, softmaxCode, p + "v_sp");
  emit("MatMul", {prob, p + "v_sp"}, p + "y_sp", p + "y_sp", out);
  cast(p + "y_sp", typeCode, node.output(0));
}

}  // namespace kiln
