// ONNX Runtime's com.microsoft quantized ops, which quantize_static in QOperator format writes (the
// "-int8" models of the ONNX model zoo are made so) next to the standard QLinearConv /
// QLinearMatMul, expanded at import into their definition in standard ops: every quantized input
// dequantized, the float op, the result quantized again,
//   QLinearAdd / QLinearMul            Q(DQ(A) + DQ(B))        (numpy broadcasting)
//   QLinearSigmoid / QLinearLeakyRelu   Q(op(DQ(X)))
//   QLinearSoftmax                      Q(Softmax(DQ(X)))       (`opset` < 13: over the flattened
//                                                               trailing axes, as Softmax-1/11)
//   QLinearGlobalAveragePool            Q(GlobalAveragePool(DQ(X)))  (channels_last: mean over H, W)
//   QLinearAveragePool                  Q(AveragePool(DQ(X)))   (channels_last: transposed around it)
//   QLinearConcat                       Q(Concat(DQ(X1), DQ(X2), ...))
//   QGemm                               [Q](alpha * (DQ(A) op DQ(B) + DQ(C, a_scale * b_scale)))
//   QuantizeLinear / DequantizeLinear   the standard ops
// lower_qdq then makes integer layers of what it can (a Concat or MaxPool between a DQ and a Q of
// one scale); the rest computes in float exactly as ONNX's Q/DQ define it. An output zero point
// that is omitted is a zero of the input's type (the contrib ops keep the input's type; the
// standard QuantizeLinear would give uint8).
#include <algorithm>
#include <cstring>

#include "onnx/node_expander.h"
#include "onnx/node_expander_util.h"

namespace kiln {

namespace {

int onnxIntCode(DataType t) {
  switch (t) {
    case DataType::kINT8: return onnx::TensorProto::INT8;
    case DataType::kUINT8: return onnx::TensorProto::UINT8;
    case DataType::kINT16: return onnx::TensorProto::INT16;
    case DataType::kUINT16: return onnx::TensorProto::UINT16;
    default: return 0;
  }
}

}  // namespace

bool NodeExpander::expandQLinearContribOp(const onnx::NodeProto& node, std::vector<const onnx::NodeProto*>& out) {
  static const char* kOps[] = {"QLinearAdd", "QLinearMul", "QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax",
                               "QLinearGlobalAveragePool", "QLinearAveragePool", "QLinearConcat", "QGemm",
                               "QuantizeLinear", "DequantizeLinear"};
  const std::string& op = node.op_type();
  if (node.domain() != "com.microsoft" || std::find(std::begin(kOps), std::end(kOps), op) == std::end(kOps)) return false;
  if (pluginReplaces && pluginReplaces(node)) return false;
  const std::string name = nodeName(node, out.size());
  const std::string what = op + " node '" + name + "' (com.microsoft)";
  const std::string p = name + "/";
  auto in = [&](int i) { return i < node.input_size() ? node.input(i) : std::string(); };
  if (node.output_size() < 1 || node.output(0).empty()) throw Error(what + " must have an output");
  const std::string& y = node.output(0);

  if (op == "QuantizeLinear" || op == "DequantizeLinear") {  // the standard ops (axis; 16-bit types)
    onnx::NodeProto& n = emit(op, {in(0), in(1)}, y, name, out);
    if (!in(2).empty()) n.add_input(in(2));
    for (const auto& a : node.attribute())
      if (a.name() == "axis") *n.add_attribute() = a;
    return true;
  }
  // The quantized type of the op: its first quantized input's.
  const int first = op == "QLinearConcat" ? 2 : 0;
  DataType qtype = DataType::kUINT8;
  if (!inferType || !inferType(in(first), out, qtype)) throw UnsupportedError(what + ": the type of '" + in(first) + "' is not known at import");
  const int qcode = onnxIntCode(qtype);
  if (!qcode) throw Error(what + ": quantized inputs must be 8- or 16-bit integers, got " + toString(qtype));
  int counter = 0;
  auto fresh = [&](const char* stem) { return p + stem + std::to_string(counter++); };
  auto dq = [&](const std::string& x, const std::string& scale, const std::string& zero) {
    if (x.empty() || scale.empty()) throw Error(what + ": a quantized input or its scale is missing");
    const std::string r = fresh("dq");
    onnx::NodeProto& n = emit("DequantizeLinear", {x, scale}, r, r, out);
    if (!zero.empty()) n.add_input(zero);
    return r;
  };
  std::string zeroOfType;  // a zero of qtype, made on first use
  auto quantize = [&](const std::string& v, const std::string& scale, std::string zero, const std::string& result) {
    if (scale.empty()) throw Error(what + ": the output scale is missing");
    if (zero.empty()) {
      if (zeroOfType.empty()) {
        onnx::TensorProto z;  // a scalar 0 (8- and 16-bit integers are stored in int32_data)
        z.set_data_type(qcode);
        z.add_int32_data(0);
        zeroOfType = p + "zero";
        emitConstant(zeroOfType, z, out);
      }
      zero = zeroOfType;
    }
    emit("QuantizeLinear", {v, scale, zero}, result, result == y ? name : result, out);
  };
  // The rank of a quantized input, from the nodes so far.
  auto rankOf = [&](const std::string& x) {
    const int64_t rank = inferredRank(x, out);
    if (rank < 0) throw UnsupportedError(what + ": the rank of '" + x + "' is not known at import");
    return rank;
  };

  if (op == "QLinearAdd" || op == "QLinearMul") {
    const std::string r = fresh("f");
    emit(op == "QLinearAdd" ? "Add" : "Mul", {dq(in(0), in(1), in(2)), dq(in(3), in(4), in(5))}, r, r, out);
    quantize(r, in(6), in(7), y);
  } else if (op == "QLinearSigmoid" || op == "QLinearLeakyRelu") {
    const std::string r = fresh("f");
    onnx::NodeProto& n = emit(op == "QLinearSigmoid" ? "Sigmoid" : "LeakyRelu", {dq(in(0), in(1), in(2))}, r, r, out);
    if (op == "QLinearLeakyRelu") setAttribute(n, "alpha", floatAttribute(node, "alpha", 0.01f));
    quantize(r, in(3), in(4), y);
  } else if (op == "QLinearSoftmax") {
    const int64_t semantics = intAttribute(node, "opset", -1), axis = intAttribute(node, "axis", -1);
    if (semantics < 1) throw Error(what + ": attribute 'opset' (the Softmax semantics) is required");
    const std::string x = dq(in(0), in(1), in(2));
    const std::string r = fresh("f");
    if (semantics >= 13 || opset < 13) {
      if (semantics >= 13 && opset < 13) throw UnsupportedError(what + ": Softmax-13 semantics in a model of opset " + std::to_string(opset));
      setAttribute(emit("Softmax", {x}, r, r, out), "axis", axis);
    } else {  // Softmax-1/11 in a newer model: over the flattened trailing axes
      const std::string flat = fresh("flat"), soft = fresh("soft"), shape = fresh("shape");
      setAttribute(emit("Flatten", {x}, flat, flat, out), "axis", axis);
      setAttribute(emit("Softmax", {flat}, soft, soft, out), "axis", 1);
      emit("Shape", {x}, shape, shape, out);
      emit("Reshape", {soft, shape}, r, r, out);
    }
    quantize(r, in(3), in(4), y);
  } else if (op == "QLinearGlobalAveragePool") {
    const std::string x = dq(in(0), in(1), in(2));
    const std::string r = fresh("f");
    if (intAttribute(node, "channels_last", 0) != 0) {
      std::vector<int64_t> axes;
      for (int64_t a = 1, rank = rankOf(in(0)); a + 1 < rank; ++a) axes.push_back(a);
      emitReduceMean(x, axes, r, out);
    } else {
      emit("GlobalAveragePool", {x}, r, r, out);
    }
    quantize(r, in(3), in(4), y);
  } else if (op == "QLinearAveragePool") {
    std::string x = dq(in(0), in(1), in(2));
    const bool last = intAttribute(node, "channels_last", 0) != 0;
    const int64_t rank = last ? rankOf(in(0)) : 0;
    if (last) {
      std::vector<int64_t> toFirst{0, rank - 1};
      for (int64_t a = 1; a + 1 < rank; ++a) toFirst.push_back(a);
      const std::string t = fresh("nchw");
      setAttribute(emit("Transpose", {x}, t, t, out), "perm", toFirst);
      x = t;
    }
    const std::string r = fresh("f");
    onnx::NodeProto& pool = emit("AveragePool", {x}, r, r, out);
    for (const auto& a : node.attribute())
      if (a.name() != "channels_last") *pool.add_attribute() = a;
    std::string result = r;
    if (last) {
      std::vector<int64_t> toLast{0};
      for (int64_t a = 2; a < rank; ++a) toLast.push_back(a);
      toLast.push_back(1);
      result = fresh("nhwc");
      setAttribute(emit("Transpose", {r}, result, result, out), "perm", toLast);
    }
    quantize(result, in(3), in(4), y);
  } else if (op == "QLinearConcat") {
    if (node.input_size() < 5 || (node.input_size() - 2) % 3 != 0)
      throw Error(what + ": inputs must be Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per tensor");
    std::vector<std::string> parts;
    for (int i = 2; i < node.input_size(); i += 3) parts.push_back(dq(in(i), in(i + 1), in(i + 2)));
    const std::string r = fresh("f");
    setAttribute(emit("Concat", parts, r, r, out), "axis", intAttribute(node, "axis", 0));
    quantize(r, in(0), in(1), y);
  } else {  // QGemm
    const int64_t transA = intAttribute(node, "transA", 0), transB = intAttribute(node, "transB", 0);
    const onnx::AttributeProto* alpha = findAttribute(node, "alpha");
    const std::string a = dq(in(0), in(1), in(2));
    // B's scale per output column: axis 1 of [K, N], axis 0 of transB's [N, K].
    const std::string bq = fresh("dq");
    onnx::NodeProto& bn = emit("DequantizeLinear", {in(3), in(4)}, bq, bq, out);
    if (!in(5).empty()) bn.add_input(in(5));
    setAttribute(bn, "axis", transB ? 0 : 1);
    const std::string r = fresh("f");
    onnx::NodeProto& g = emit("Gemm", {a, bq}, r, r, out);
    setAttribute(g, "transA", transA);
    setAttribute(g, "transB", transB);
    if (alpha) *g.add_attribute() = *alpha;
    if (!in(6).empty()) {  // int32 C in units of a_scale * b_scale (per column where B's scale is)
      const std::string cs = fresh("c_scale"), c = fresh("c");
      emit("Mul", {in(1), in(4)}, cs, cs, out);
      setAttribute(emit("DequantizeLinear", {in(6), cs}, c, c, out), "axis", rankOf(in(6)) - 1);
      g.add_input(c);
      if (alpha) {  // ONNX Runtime's QGemm scales the sum: alpha * (A B + C)
        onnx::AttributeProto* beta = g.add_attribute();
        *beta = *alpha;
        beta->set_name("beta");
      }
    }
    if (!in(7).empty()) quantize(r, in(7), in(8), y);
    else emit("Identity", {r}, y, name, out);
  }
  return true;
}

}  // namespace kiln
