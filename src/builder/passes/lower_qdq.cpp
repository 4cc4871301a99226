// Explicit quantization: the Q/DQ patterns of ONNX Runtime's quantize_static (QDQ format) become
// integer layers.
//   1. DQ(x) -> Conv / MatMul / Gemm (W = DQ(int8 constant), bias = DQ(int32 constant) or float)
//      [-> Add(DQ(int8 r)), Conv only] [-> Relu / Clip] [-> Q] becomes QLinearConv / QLinearMatMul
//      (the residual as QLinearConv's kiln inputs 9..11, where a kernel takes it): int8/uint8 in, int32
//      accumulation, the requantizing epilogue (ops/qlinear.h) writing the Q's int8 output, or
//      float32 where no Q follows.
//   2. DQ(q) -> MaxPool / data movement (Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat)
//      -> Q with the same scale and zero point is the op on the integers themselves (max and copies
//      commute with a monotone per-tensor map), so the DQ/Q pair goes.
//   3. FP8 (float8e4m3fn) Q/DQ around MatMul / Gemm becomes Fp8MatMul (lower_qdq_fp8.cpp).
// What stays (DQ -> Add -> Q, average pools, ...) runs as float arithmetic: ONNX's semantics exactly.
// Runs before constant folding removes the weights' DQ layers: it reads their int8 inputs.
// `supported` vetoes a rewrite whose new layer no kernel of the target backend runs.
#include <cmath>
#include <limits>
#include <set>

#include "builder/passes/lower_qdq.h"
#include "builder/passes/passes.h"
#include "ops/qlinear.h"
#include "ops/shape_propagation.h"

namespace kiln {

namespace {

bool isInt8(DataType t) { return t == DataType::kINT8 || t == DataType::kUINT8; }

//! A DequantizeLinear / QuantizeLinear with constant per-tensor (scale count 1) parameters.
bool perTensorConst(const Layer* l, const char* op) {
  if (!l || l->op != op || l->inputs.size() < 2) return false;
  if (l->attrs.getInt("block_size", 0) != 0) return false;
  const Tensor* s = l->inputs[1];
  const Tensor* z = l->inputs.size() > 2 ? l->inputs[2] : nullptr;
  return s && s->isConstant() && s->value.count() == 1 && s->type == DataType::kFLOAT && (!z || (z->isConstant() && z->value.count() == 1));
}

//! The DQ producing t from int8/uint8 data with per-tensor constant parameters, or nullptr.
Layer* activationDq(const Tensor* t) {
  Layer* dq = t ? t->producer : nullptr;
  if (!perTensorConst(dq, "DequantizeLinear") || !isInt8(dq->inputs[0]->type)) return nullptr;
  return dq;
}

double scaleOf(const Layer* qdq) { return qdq->inputs[1]->value.getDouble(0); }
int64_t zeroOf(const Layer* qdq) {
  return qdq->inputs.size() > 2 && qdq->inputs[2] ? qdq->inputs[2]->value.getInt(0) : 0;
}
DataType quantTypeOf(const Layer* qdq) {  // Q: its output's type; DQ: its input's
  return qdq->op == "QuantizeLinear" ? qdq->outputs[0]->type : qdq->inputs[0]->type;
}
bool sameQuantization(const Layer* a, const Layer* b) {
  return scaleOf(a) == scaleOf(b) && zeroOf(a) == zeroOf(b) && quantTypeOf(a) == quantTypeOf(b);
}

void checkScale(const Layer* qdq) {
  const HostTensor& s = qdq->inputs[1]->value;
  for (int64_t i = 0; i < s.count(); ++i) {
    double v = s.getDouble(i);
    if (!(v > 0.0) || !std::isfinite(v))
      throw Error("layer '" + qdq->name + "' (" + qdq->op + "): scale must be positive and finite, got " + std::to_string(v));
  }
}

// ---- 2. DQ -> MaxPool / data movement -> Q ---------------------------------------------------------

const std::set<std::string> kPassThrough = {"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Concat"};

bool dropAroundPassThrough(Network& net, const std::function<bool(const LayerDesc&)>& supported) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* op = net.layer(static_cast<int>(i));
    if (!kPassThrough.count(op->op) || op->outputs.size() != 1) continue;
    Layer* q = soleConsumer(net, op->outputs[0]);
    if (!perTensorConst(q, "QuantizeLinear") || !isInt8(q->outputs[0]->type)) continue;
    const size_t dataInputs = op->op == "Concat" ? op->inputs.size() : 1;
    std::vector<Layer*> dqs;
    for (size_t k = 0; k < dataInputs; ++k) {
      Layer* dq = activationDq(op->inputs[k]);
      if (!dq || !sameQuantization(dq, q)) break;
      dqs.push_back(dq);
    }
    if (dqs.size() != dataInputs) continue;
    LayerDesc d = describeLayer(*op);
    for (size_t k = 0; k < dataInputs; ++k) d.inputs[k].type = dqs[k]->inputs[0]->type;
    d.outputs[0].type = q->outputs[0]->type;
    if (!supported(d)) continue;
    for (size_t k = 0; k < dataInputs; ++k) op->inputs[k] = dqs[k]->inputs[0];
    op->outputs[0]->type = q->outputs[0]->type;
    recordFusion(op, q);
    Tensor* out = q->outputs[0];
    net.removeLayer(q);
    net.replaceUses(out, op->outputs[0]);
    changed = true;
  }
  return changed;
}

// ---- 1. DQ -> Conv / MatMul / Gemm [-> activation] [-> Q] ------------------------------------------

//! The int8 weight of a DQ'd constant, with its scale / zero point per output channel.
struct QuantWeight {
  Tensor* data = nullptr;   //!< int8/uint8 constant
  Tensor* scale = nullptr;  //!< 1 or `channels` values
  Tensor* zero = nullptr;   //!< may be null
  bool perChannel = false;
};

//! `w` = DQ(int8 constant) quantized per tensor or along `axis` (the output channels).
bool quantWeight(const Tensor* w, int64_t axis, QuantWeight* out) {
  Layer* dq = w ? w->producer : nullptr;
  if (!dq || dq->op != "DequantizeLinear" || dq->inputs.size() < 2 || dq->attrs.getInt("block_size", 0) != 0) return false;
  Tensor* data = dq->inputs[0];
  Tensor* s = dq->inputs[1];
  Tensor* z = dq->inputs.size() > 2 ? dq->inputs[2] : nullptr;
  if (!data->isConstant() || !isInt8(data->type) || !s->isConstant() || s->type != DataType::kFLOAT || (z && !z->isConstant()))
    return false;
  const int64_t rank = static_cast<int64_t>(data->dims.size());
  if (s->value.count() != 1) {
    int64_t a = dq->attrs.getInt("axis", 1);
    if (a < 0) a += rank;
    if (a != axis || s->dims.size() != 1) return false;
  }
  checkScale(dq);
  *out = {data, s, z, s->value.count() != 1};
  return true;
}

//! The bias in accumulator units (scale x_scale * w_scale[c]), from DQ(int32 constant) or a float
//! constant; false when it does not fit int32.
bool accumulatorBias(const Tensor* b, double xScale, const HostTensor& wScale, int64_t channels, std::vector<int32_t>* out) {
  if (!b || !b->isConstant() || b->value.count() != channels) return false;
  const Layer* dq = b->producer;
  const bool intBias = dq && dq->op == "DequantizeLinear" && dq->inputs[0]->isConstant() && dq->inputs[0]->type == DataType::kINT32 &&
                       dq->inputs[1]->isConstant();
  out->resize(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const float accScale = static_cast<float>(xScale) * static_cast<float>(wScale.getDouble(wScale.count() == 1 ? 0 : c));
    if (intBias) {
      const HostTensor& bs = dq->inputs[1]->value;
      const float scale = static_cast<float>(bs.getDouble(bs.count() == 1 ? 0 : c));
      if (scale == accScale && zeroOf(dq) == 0) {  // quantize_static's bias: already in accumulator units
        (*out)[c] = static_cast<int32_t>(dq->inputs[0]->value.getInt(c));
        continue;
      }
    }
    const double v = std::nearbyint(b->value.getDouble(c) / accScale);
    if (!(std::fabs(v) < 2147483647.0)) return false;
    (*out)[c] = static_cast<int32_t>(v);
  }
  return true;
}

//! A Relu / Clip after the layer that a requantizing epilogue can apply.
bool activationOf(const Layer* l, Activation* act) {
  if (l->op == "Relu") {
    *act = {ActKind::kRelu, 0.f, 0.f};
    return true;
  }
  if (l->op != "Clip") return false;
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  if (l->inputs.size() > 1 && l->inputs[1] && !scalarValue(l->inputs[1], &lo)) return false;
  if (l->inputs.size() > 2 && l->inputs[2] && !scalarValue(l->inputs[2], &hi)) return false;
  *act = {ActKind::kClip, static_cast<float>(lo), static_cast<float>(hi)};
  return true;
}

//! The Add reading `t` (its sole reader) with an int8 per-tensor DQ as its other input: a residual
//! the conv's epilogue can add (QLinearConv inputs 9..11). Null when there is none.
Layer* residualAdd(Network& net, const Tensor* t, Layer** dqr) {
  Layer* add = soleConsumer(net, t);
  if (!add || add->op != "Add" || add->inputs.size() != 2 || add->outputs.size() != 1) return nullptr;
  const Tensor* other = add->inputs[0] == t ? add->inputs[1] : add->inputs[0];
  if (other == t || other->dims != t->dims) return nullptr;
  *dqr = activationDq(other);
  return *dqr ? add : nullptr;
}

bool lowerOne(Network& net, Layer* l, const std::function<bool(const LayerDesc&)>& supported, bool withResidual) {
  const bool conv = l->op == "Conv", gemm = l->op == "Gemm";
  if (!conv && !gemm && l->op != "MatMul") return false;
  if (l->inputs.size() < 2 || l->outputs.size() != 1 || hasFusedActivation(l->attrs)) return false;
  Layer* dqx = activationDq(l->inputs[0]);
  if (!dqx) return false;
  // The residual form needs the Add before any of the work below (lowerQdq asks for it first).
  Layer* dqr = nullptr;
  Layer* add = conv && withResidual ? residualAdd(net, l->outputs[0], &dqr) : nullptr;
  if (withResidual && !add) return false;
  // Weight layout: Conv [M, C/g, k...] per channel on axis 0; MatMul [K, N] on axis 1; Gemm
  // [K, N] (axis 1) or transB [N, K] (axis 0), transposed here to [K, N].
  const bool transB = gemm && l->attrs.getInt("transB", 0) != 0;
  if (gemm && (l->attrs.getInt("transA", 0) != 0 || l->attrs.getFloat("alpha", 1.f) != 1.f ||
               (l->inputs.size() > 2 && l->inputs[2] && l->attrs.getFloat("beta", 1.f) != 1.f)))
    return false;
  const Tensor* w = l->inputs[1];
  if (!conv && w->dims.size() != 2) return false;
  QuantWeight qw;
  if (!quantWeight(w, conv || transB ? 0 : 1, &qw)) return false;
  checkScale(dqx);
  const int64_t channels = conv ? w->dims[0] : (transB ? w->dims[0] : w->dims[1]);
  if (channels < 0) return false;
  // Bias: Conv's / Gemm's third input (MatMul's Add stays a separate, Q/DQ-wrapped layer).
  std::vector<int32_t> bias;
  const Tensor* b = l->inputs.size() > 2 ? l->inputs[2] : nullptr;
  if (b && !accumulatorBias(b, scaleOf(dqx), qw.scale->value, channels, &bias)) return false;
  // Output: the sole reader chain [Add(DQ(int8 residual))] [Relu / Clip] -> Q (per tensor, int8), else float32.
  std::vector<Layer*> dead = {l};
  Tensor* result = l->outputs[0];
  if (add) {
    checkScale(dqr);
    dead.push_back(add);
    result = add->outputs[0];
  }
  Activation act;
  Layer* next = soleConsumer(net, result);
  if (next && activationOf(next, &act)) {
    Layer* q = soleConsumer(net, next->outputs[0]);
    if (perTensorConst(q, "QuantizeLinear") && isInt8(q->outputs[0]->type)) {
      dead.push_back(next);
      next = q;
      result = next->outputs[0];
      dead.push_back(q);
    } else {
      act = {};
      next = nullptr;
    }
  } else if (perTensorConst(next, "QuantizeLinear") && isInt8(next->outputs[0]->type)) {
    result = next->outputs[0];
    dead.push_back(next);
  } else {
    next = nullptr;
  }
  const Layer* q = next;
  if (q) checkScale(q);
  // Q without a zero point outputs uint8 unless output_dtype says otherwise: the layer's output
  // type is its zero point's (uint8 when omitted).
  if (q && !(q->inputs.size() > 2 && q->inputs[2]) && q->outputs[0]->type != DataType::kUINT8) return false;
  // The new layer's inputs, in QLinearConv / QLinearMatMul order.
  Tensor* wData = qw.data;
  if (transB) wData = net.addConstant(net.uniqueName(qw.data->name + "_kn"), transposed2d(qw.data->value));
  Tensor* biasT = nullptr;
  if (!bias.empty()) {
    HostTensor bt(DataType::kINT32, {channels});
    std::copy(bias.begin(), bias.end(), bt.as<int32_t>());
    biasT = net.addConstant(net.uniqueName(l->name + "_bias_i32"), bt);
  }
  std::vector<Tensor*> in = {dqx->inputs[0], dqx->inputs[1], dqx->inputs.size() > 2 ? dqx->inputs[2] : nullptr,
                             wData, qw.scale, qw.zero,
                             q ? q->inputs[1] : nullptr, q && q->inputs.size() > 2 ? q->inputs[2] : nullptr, biasT};
  if (dqr) in.insert(in.end(), {dqr->inputs[0], dqr->inputs[1], dqr->inputs.size() > 2 ? dqr->inputs[2] : nullptr});
  while (!in.empty() && !in.back()) in.pop_back();
  Attributes attrs;
  if (conv) attrs = l->attrs;
  if (act.kind != ActKind::kNone) setFusedActivation(attrs, act);
  Layer* ql = net.addLayer(conv ? "QLinearConv" : "QLinearMatMul", in, 1, attrs, net.uniqueName(l->name + "_int8"));
  LayerDesc d = describeLayer(*ql);
  d.outputs[0].type = result->type;
  d.outputs[0].dims = result->dims;
  if (!supported(d)) {
    net.removeLayer(ql);
    return false;
  }
  replaceWithFused(net, ql, dead, result);
  ql->fusedOps.insert(ql->fusedOps.begin(), dqx->op + ":" + dqx->name);
  return true;
}

}  // namespace

HostTensor transposed2d(const HostTensor& w) {
  const int64_t r = w.dims()[0], c = w.dims()[1];
  HostTensor t(w.type(), {c, r});
  const uint8_t* s = w.as<uint8_t>();
  uint8_t* d = t.as<uint8_t>();
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j) d[j * r + i] = s[i * c + j];
  return t;
}

bool lowerQdq(Network& net, const std::function<bool(const LayerDesc&)>& supported) {
  bool changed = dropAroundPassThrough(net, supported);
  changed = lowerFp8Qdq(net, supported) || changed;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* l = net.layer(static_cast<int>(i));
    // The residual form first (the conv, the Add and the Relu / Q in one integer layer) where a
    // kernel takes it, else the conv alone.
    if (lowerOne(net, l, supported, true) || lowerOne(net, l, supported, false)) {
      changed = true;
      i = static_cast<size_t>(-1);  // the layer list was re-sorted: start over
    }
  }
  if (changed) net.removeDeadLayers();
  return changed;
}

}  // namespace kiln
