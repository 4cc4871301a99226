// The experimental ops of ONNX 1.0-1.4 (default domain, removed from the spec since), which old
// model-zoo files still hold (Tiny YOLOv2's ImageScaler) and ONNX Runtime still runs, expanded at
// import into the standard ops they were defined by:
//   ImageScaler(x; scale, bias[C])      x * scale + bias (per channel of NCHW x)
//   Crop(x; border[l, t, r, b], scale)  x[:, :, t : H - b, l : W - r], or [t : t + sh, l : l + sw]
//   ScaledTanh(x; alpha, beta)          alpha * tanh(beta * x)
//   ParametricSoftplus(x; alpha, beta)  alpha * softplus(beta * x)
//   Affine(x; alpha, beta)              alpha * x + beta
// The expansions are written in the form of the model's opset (attributes for Slice before 10,
// `broadcast` for Mul/Add before 7), which the importer then normalizes like any node.
#include <cstring>
#include <limits>

#include "onnx/node_expander.h"
#include "onnx/node_expander_util.h"

namespace kiln {

namespace {

onnx::TensorProto floatTensor(const std::vector<int64_t>& dims, const std::vector<float>& values) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  return t;
}

}  // namespace

bool NodeExpander::expandExperimentalOp(const onnx::NodeProto& node, std::vector<const onnx::NodeProto*>& out) {
  const std::string& op = node.op_type();
  if (op != "ImageScaler" && op != "Crop" && op != "ScaledTanh" && op != "ParametricSoftplus" && op != "Affine") return false;
  if (pluginReplaces && pluginReplaces(node)) return false;
  const std::string name = nodeName(node, out.size());
  const std::string what = op + " node '" + name + "'";
  if (node.input_size() != 1 || node.input(0).empty() || node.output_size() != 1 || node.output(0).empty())
    throw Error(what + " must have one input and one output");
  const std::string &x = node.input(0), &y = node.output(0), p = name + "/";
  // Binary op with a constant operand, in the opset's broadcasting form.
  auto binary = [&](const char* bop, const std::string& a, const std::string& constant, const std::string& result) {
    onnx::NodeProto& n = emit(bop, {a, constant}, result, p + result.substr(result.rfind('/') + 1), out);
    if (opset < 7) setAttribute(n, "broadcast", int64_t(1));
  };
  auto scalar = [&](const std::string& id, float v) {
    emitConstant(p + id, floatTensor({}, {v}), out);
    return p + id;
  };
  if (op == "ImageScaler") {
    const onnx::AttributeProto* bias = findAttribute(node, "bias");
    const std::string scaled = bias ? p + "scaled" : y;
    binary("Mul", x, scalar("scale", floatAttribute(node, "scale", 1.f)), scaled);
    if (bias) {
      std::vector<float> b(bias->floats().begin(), bias->floats().end());
      emitConstant(p + "bias", floatTensor({1, static_cast<int64_t>(b.size()), 1, 1}, b), out);
      binary("Add", scaled, p + "bias", y);
    }
  } else if (op == "Affine") {
    binary("Mul", x, scalar("alpha", floatAttribute(node, "alpha", 1.f)), p + "scaled");
    binary("Add", p + "scaled", scalar("beta", floatAttribute(node, "beta", 0.f)), y);
  } else if (op == "ScaledTanh" || op == "ParametricSoftplus") {
    binary("Mul", x, scalar("beta", floatAttribute(node, "beta", 1.f)), p + "inner");
    emit(op == "ScaledTanh" ? "Tanh" : "Softplus", {p + "inner"}, p + "act", p + "act", out);
    binary("Mul", p + "act", scalar("alpha", floatAttribute(node, "alpha", 1.f)), y);
  } else {  // Crop: NCHW, along H and W
    const std::vector<int64_t> border = intsAttribute(node, "border"), scale = intsAttribute(node, "scale");
    if (border.size() != 4) throw Error(what + ": border must be [left, top, right, bottom]");
    if (!scale.empty() && scale.size() != 2) throw Error(what + ": scale must be [height, width]");
    for (int64_t v : border)
      if (v < 0) throw Error(what + ": border values must be non-negative");
    const int64_t kEnd = std::numeric_limits<int64_t>::max();
    const std::vector<int64_t> starts = {border[1], border[0]};
    const std::vector<int64_t> ends = scale.empty()
                                          ? std::vector<int64_t>{border[3] ? -border[3] : kEnd, border[2] ? -border[2] : kEnd}
                                          : std::vector<int64_t>{border[1] + scale[0], border[0] + scale[1]};
    const std::vector<int64_t> axes = {2, 3};
    if (opset < 10) {
      onnx::NodeProto& s = emit("Slice", {x}, y, p + "slice", out);
      setAttribute(s, "starts", starts);
      setAttribute(s, "ends", ends);
      setAttribute(s, "axes", axes);
    } else {
      auto ints = [&](const std::string& id, const std::vector<int64_t>& v) {
        onnx::TensorProto t;
        t.set_data_type(onnx::TensorProto::INT64);
        t.add_dims(static_cast<int64_t>(v.size()));
        for (int64_t e : v) t.add_int64_data(e);
        emitConstant(p + id, t, out);
        return p + id;
      };
      emit("Slice", {x, ints("starts", starts), ints("ends", ends), ints("axes", axes)}, y, p + "slice", out);
    }
  }
  return true;
}

}  // namespace kiln
