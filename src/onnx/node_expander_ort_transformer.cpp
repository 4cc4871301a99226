// The fused ops of ONNX Runtime's transformer optimizer (onnxruntime.transformers.optimizer, and
// optimum's ORT-optimized exports) that a model keeps when it comes to kiln, expanded at import into
// their definition in standard ops; kiln's own passes then fuse them again (LayerNormalization and
// the RMSNorm / GELU patterns, the GPU's skip-LayerNorm and pointwise fusions):
//   com.microsoft Gelu(X)                    0.5 X (1 + erf(X / sqrt 2))
//   com.microsoft BiasGelu(A, B)             Gelu(A + B)
//   com.microsoft FastGelu(X, bias?)         tanh form on X (+ bias): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   com.microsoft QuickGelu(X; alpha=1.702)  X sigmoid(alpha X)
//   com.microsoft SkipLayerNormalization(input, skip, gamma, beta?, bias?; epsilon)
//        s = (input + bias) + skip; outputs LayerNormalization(s) (its mean and 1/std) and s (index 3)
//   SimplifiedLayerNormalization(X, scale; axis, epsilon)   (default domain in ONNX Runtime)
//        X / sqrt(mean(X^2 over axis..) + epsilon) * scale; output 1 its 1/rms
//   com.microsoft SkipSimplifiedLayerNormalization(input, skip, gamma, bias?; epsilon)
//        the same on s = (input + bias) + skip; outputs (y, unused, 1/rms, s)
// and those ONNX Runtime writes when it saves a model it optimized (ORT_ENABLE_EXTENDED):
//   com.microsoft FusedConv(X, W, B?, Z?; Conv's attributes, activation, activation_params)
//        act(Conv(X, W, B) + Z)
//   com.microsoft FusedGemm(A, B, C?; Gemm's attributes, activation, activation_alpha/beta)
//        act(Gemm(A, B, C))
//   com.microsoft FusedMatMul(A, B; alpha, transA, transB)
//        alpha * (A or A^T of its last two axes) @ (B or B^T)
// with act one of Relu, Tanh, Sigmoid, LeakyRelu(alpha), Clip(min, max), HardSigmoid(alpha, beta).
#include <algorithm>
#include <cmath>
#include <limits>

#include "onnx/node_expander.h"
#include "onnx/node_expander_util.h"

namespace kiln {

bool NodeExpander::expandOrtTransformerOp(const onnx::NodeProto& node, std::vector<const onnx::NodeProto*>& out) {
  const std::string& op = node.op_type();
  const bool ms = node.domain() == "com.microsoft";
  const bool known = (ms && (op == "Gelu" || op == "BiasGelu" || op == "FastGelu" || op == "QuickGelu" || op == "SkipLayerNormalization" ||
                             op == "SkipSimplifiedLayerNormalization" || op == "FusedConv" || op == "FusedGemm" || op == "FusedMatMul")) ||
                     ((ms || isDefaultDomain(node.domain())) && op == "SimplifiedLayerNormalization");
  if (!known || (pluginReplaces && pluginReplaces(node))) return false;
  const std::string name = nodeName(node, out.size());
  const std::string what = op + " node '" + name + "'";
  const std::string p = name + "/";
  auto in = [&](int i) { return i < node.input_size() ? node.input(i) : std::string(); };
  auto outName = [&](int i) { return i < node.output_size() ? node.output(i) : std::string(); };
  if (in(0).empty() || outName(0).empty()) throw Error(what + " needs an input and an output");
  int counter = 0;
  auto fresh = [&](const char* stem) { return p + stem + std::to_string(counter++); };
  // The element type of X sets the constants' type (float32, float16, bfloat16).
  DataType type = DataType::kFLOAT;
  if (!inferType || !inferType(in(0), out, type)) throw UnsupportedError(what + ": the element type of its input is not known at import");
  const int code = onnxFloatCode(type);
  if (!code) throw Error(what + ": its input must be a float type, got " + toString(type));
  auto scalar = [&](float v) {  // a float32 constant cast to X's type (folded at build)
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::FLOAT);
    t.add_float_data(v);
    const std::string c = fresh("c");
    emitConstant(c, t, out);
    if (code == onnx::TensorProto::FLOAT) return c;
    const std::string cast = fresh("cast");
    setAttribute(emit("Cast", {c}, cast, cast, out), "to", code);
    return cast;
  };
  auto binary = [&](const char* bop, const std::string& a, const std::string& b, std::string result = "") {
    if (result.empty()) result = fresh("t");
    emit(bop, {a, b}, result, result == outName(0) ? name : result, out);
    return result;
  };
  auto unary = [&](const char* uop, const std::string& a, std::string result = "") {
    if (result.empty()) result = fresh("t");
    emit(uop, {a}, result, result == outName(0) ? name : result, out);
    return result;
  };
  // Gelu forms on x, writing `result`.
  auto erfGelu = [&](const std::string& x, const std::string& result) {
    const std::string e = unary("Erf", binary("Div", x, scalar(static_cast<float>(std::sqrt(2.0)))));
    binary("Mul", binary("Mul", x, scalar(0.5f)), binary("Add", e, scalar(1.f)), result);
  };
  auto tanhGelu = [&](const std::string& x, const std::string& result) {
    const std::string cube = binary("Mul", binary("Mul", x, x), x);
    const std::string inner = binary("Mul", binary("Add", x, binary("Mul", cube, scalar(0.044715f))),
                                     scalar(static_cast<float>(std::sqrt(2.0 / M_PI))));
    binary("Mul", binary("Mul", x, scalar(0.5f)), binary("Add", unary("Tanh", inner), scalar(1.f)), result);
  };
  // y = x / sqrt(mean(x^2 over the axes from `axis`) + eps) * scale; 1/rms into `invStd` if asked.
  auto rmsNorm = [&](const std::string& x, const std::string& scale, int64_t axis, float eps, const std::string& result,
                     const std::string& invStd) {
    const int64_t rank = inferredRank(x, out);
    if (rank < 0) throw UnsupportedError(what + ": the rank of its input is not known at import");
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) throw Error(what + ": axis is out of range for rank " + std::to_string(rank));
    std::vector<int64_t> axes;
    for (int64_t a = axis; a < rank; ++a) axes.push_back(a);
    const std::string mean = fresh("mean");
    emitReduceMean(binary("Mul", x, x), axes, mean, out);
    const std::string rms = unary("Sqrt", binary("Add", mean, scalar(eps)));
    binary("Mul", binary("Div", x, rms), scale, result);
    if (!invStd.empty()) binary("Div", scalar(1.f), rms, invStd);
  };
  // (input + bias) + skip for the skip norms, into output 3 when the node asks for it. The bias
  // first: the optimizer moved a MatMul's bias here, and kiln's MatMul + bias fusion takes it back.
  auto skipSum = [&](int biasInput) {
    if (in(1).empty() || in(2).empty()) throw Error(what + " needs input, skip and gamma");
    const std::string biased = in(biasInput).empty() ? in(0) : binary("Add", in(0), in(biasInput));
    return binary("Add", biased, in(1), outName(3));
  };

  // ORT's activation after a fused Conv / Gemm, into `result`; `params` as activation_params.
  auto activation = [&](const std::string& x, const std::string& result, const std::vector<float>& params) {
    const onnx::AttributeProto* a = findAttribute(node, "activation");
    const std::string act = a ? a->s() : "";
    auto param = [&](size_t i, float fallback) { return i < params.size() ? params[i] : fallback; };
    if (act.empty() || act == "Identity") {
      unary("Identity", x, result);
    } else if (act == "Relu" || act == "Tanh" || act == "Sigmoid") {
      unary(act.c_str(), x, result);
    } else if (act == "LeakyRelu") {
      setAttribute(emit("LeakyRelu", {x}, result, result == outName(0) ? name : result, out), "alpha", param(0, 0.01f));
    } else if (act == "HardSigmoid") {
      onnx::NodeProto& n = emit("HardSigmoid", {x}, result, result == outName(0) ? name : result, out);
      setAttribute(n, "alpha", param(0, 0.2f));
      setAttribute(n, "beta", param(1, 0.5f));
    } else if (act == "Clip") {
      const float lo = param(0, -std::numeric_limits<float>::max()), hi = param(1, std::numeric_limits<float>::max());
      if (opset < 11) {
        onnx::NodeProto& n = emit("Clip", {x}, result, result == outName(0) ? name : result, out);
        setAttribute(n, "min", lo);
        setAttribute(n, "max", hi);
      } else {
        emit("Clip", {x, scalar(lo), scalar(hi)}, result, result == outName(0) ? name : result, out);
      }
    } else {
      throw UnsupportedError(what + ": activation '" + act + "' (supported: Relu, Tanh, Sigmoid, LeakyRelu, Clip, HardSigmoid)");
    }
  };
  auto floats = [&](const char* attr) {
    const onnx::AttributeProto* a = findAttribute(node, attr);
    return a ? std::vector<float>(a->floats().begin(), a->floats().end()) : std::vector<float>{};
  };
  // The node's attributes but those named, onto n.
  auto copyAttributes = [&](onnx::NodeProto& n, std::initializer_list<const char*> drop) {
    for (const auto& a : node.attribute())
      if (std::none_of(drop.begin(), drop.end(), [&](const char* d) { return a.name() == d; })) *n.add_attribute() = a;
  };

  if (op == "FusedConv") {
    if (in(1).empty()) throw Error(what + " needs X and W");
    const std::string conv = fresh("conv");
    onnx::NodeProto& c = emit("Conv", {in(0), in(1)}, conv, conv, out);
    if (!in(2).empty()) c.add_input(in(2));
    copyAttributes(c, {"activation", "activation_params"});
    activation(in(3).empty() ? conv : binary("Add", conv, in(3)), outName(0), floats("activation_params"));
  } else if (op == "FusedGemm") {
    if (in(1).empty()) throw Error(what + " needs A and B");
    const std::string gemm = fresh("gemm");
    onnx::NodeProto& g = emit("Gemm", {in(0), in(1)}, gemm, gemm, out);
    if (!in(2).empty()) g.add_input(in(2));
    copyAttributes(g, {"activation", "activation_alpha", "activation_beta", "activation_gamma"});
    std::vector<float> params;
    if (const onnx::AttributeProto* a = findAttribute(node, "activation_alpha")) params.push_back(a->f());
    if (const onnx::AttributeProto* b = findAttribute(node, "activation_beta")) {
      if (params.empty()) params.push_back(0.01f);
      params.push_back(b->f());
    }
    activation(gemm, outName(0), params);
  } else if (op == "FusedMatMul") {
    if (in(1).empty()) throw Error(what + " needs A and B");
    if (intAttribute(node, "transBatchA", 0) || intAttribute(node, "transBatchB", 0))
      throw UnsupportedError(what + ": transBatchA / transBatchB are not supported");
    auto transposedLast2 = [&](const std::string& x) {  // x with its last two axes swapped
      const int64_t rank = inferredRank(x, out);
      if (rank < 2) throw UnsupportedError(what + ": the rank of '" + x + "' is not known at import (or is below 2)");
      std::vector<int64_t> perm;
      for (int64_t a = 0; a < rank; ++a) perm.push_back(a);
      std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
      const std::string t = fresh("transposed");
      setAttribute(emit("Transpose", {x}, t, t, out), "perm", perm);
      return t;
    };
    const std::string a = intAttribute(node, "transA", 0) ? transposedLast2(in(0)) : in(0);
    const std::string b = intAttribute(node, "transB", 0) ? transposedLast2(in(1)) : in(1);
    const float alpha = floatAttribute(node, "alpha", 1.f);
    if (alpha == 1.f) {
      binary("MatMul", a, b, outName(0));
    } else {
      binary("Mul", binary("MatMul", a, b), scalar(alpha), outName(0));
    }
  } else if (op == "Gelu") {
    erfGelu(in(0), outName(0));
  } else if (op == "BiasGelu") {
    if (in(1).empty()) throw Error(what + " needs A and B");
    erfGelu(binary("Add", in(0), in(1)), outName(0));
  } else if (op == "FastGelu") {
    tanhGelu(in(1).empty() ? in(0) : binary("Add", in(0), in(1)), outName(0));
  } else if (op == "QuickGelu") {
    binary("Mul", in(0), unary("Sigmoid", binary("Mul", in(0), scalar(floatAttribute(node, "alpha", 1.702f)))), outName(0));
  } else if (op == "SkipLayerNormalization") {
    const std::string s = skipSum(4);
    onnx::NodeProto& ln = emit("LayerNormalization", {s, in(2)}, outName(0), name, out);
    if (!in(3).empty()) ln.add_input(in(3));
    for (int k = 1; k <= 2; ++k)
      if (!outName(k).empty()) {
        while (ln.output_size() < k) ln.add_output("");
        ln.add_output(outName(k));
      }
    setAttribute(ln, "axis", int64_t(-1));
    setAttribute(ln, "epsilon", floatAttribute(node, "epsilon", 1e-12f));
  } else if (op == "SkipSimplifiedLayerNormalization") {
    if (!outName(1).empty()) throw UnsupportedError(what + ": output 1 (a mean, which RMS normalization does not compute) is read");
    rmsNorm(skipSum(3), in(2), -1, floatAttribute(node, "epsilon", 1e-12f), outName(0), outName(2));
  } else {  // SimplifiedLayerNormalization
    if (in(1).empty()) throw Error(what + " needs X and scale");
    rmsNorm(in(0), in(1), intAttribute(node, "axis", -1), floatAttribute(node, "epsilon", 1e-5f), outName(0), outName(1));
  }
  return true;
}

}  // namespace kiln
