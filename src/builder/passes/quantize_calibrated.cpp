// Implicit INT8: calibrated activation scales + per-channel weight scales as Q/DQ, lowered by
// lowerQdq (one integer path for explicit and implicit quantization).
//   x -> Conv(W)   becomes   x -> Q(s_x) -> DQ(s_x) -> Conv(DQ(W_int8, s_w[c]))
// s_x from the calibration table (uint8 when the tensor never went negative, else int8; zero point
// 0; always int8 on the GPU, ImplicitTargets::signedActivations), s_w[c] = max|W[c]| / L with L the backend's int8WeightLimit (127, or 63 on CPUs whose int8
// instructions saturate wider weights). A tensor read by several quantized layers gets one Q/DQ pair.
// A residual Add of a quantized conv's output reads its other input through that tensor's Q/DQ
// where it has one, which lowerQdq turns into QLinearConv's residual where a kernel takes it.
// Implicit FP8 (--fp8): MatMul / Gemm get float8e4m3fn Q/DQ instead, per tensor:
//   x -> MatMul(W)   becomes   x -> Q(a / 448) -> DQ -> MatMul(DQ(W_e4m3, max|W| / 448))
// with a the calibrated amax (the table's int8 step times 127, or 255 for an unsigned tensor), which
// lowerQdq makes one Fp8MatMul (lower_qdq_fp8.cpp).
#include "builder/passes/quantize_calibrated.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "builder/passes/lower_qdq.h"
#include "builder/passes/passes.h"
#include "ops/fused_attrs.h"

namespace kiln {

namespace {

bool constFloat(const Tensor* t) { return t && t->isConstant() && t->type == DataType::kFLOAT; }

//! Axis of W's output channels: Conv [M, C/g, k...] 0; MatMul / Gemm [K, N] 1; Gemm transB [N, K] 0.
int64_t weightAxis(const Layer& l) {
  if (l.op == "Conv") return 0;
  return l.op == "Gemm" && l.attrs.getInt("transB", 0) != 0 ? 0 : 1;
}

//! Symmetric int8 per output channel in [-limit, limit]; `scales` gets one scale per channel.
HostTensor quantizeWeight(const HostTensor& w, int64_t axis, int limit, HostTensor* scales) {
  const Dims& d = w.dims();
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= d[k];
  for (size_t k = axis + 1; k < d.size(); ++k) inner *= d[k];
  const int64_t channels = d[axis];
  *scales = HostTensor(DataType::kFLOAT, {channels});
  const float* src = w.as<float>();
  std::vector<float> amax(channels, 0.f);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i) amax[c] = std::max(amax[c], std::fabs(src[(o * channels + c) * inner + i]));
  for (int64_t c = 0; c < channels; ++c) scales->as<float>()[c] = amax[c] > 0 ? amax[c] / static_cast<float>(limit) : 1.f;
  HostTensor q(DataType::kINT8, d);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = (o * channels + c) * inner + i;
        const float v = std::nearbyint(src[k] / scales->as<float>()[c]);
        q.as<int8_t>()[k] = static_cast<int8_t>(std::clamp(v, -static_cast<float>(limit), static_cast<float>(limit)));
      }
  return q;
}

//! float8e4m3fn codes of w / scale, scale = max|w| / 448 (1 when w is all zeros).
HostTensor quantizeWeightFp8(const HostTensor& w, float* scale) {
  float amax = 0.f;
  for (int64_t i = 0; i < w.count(); ++i) amax = std::max(amax, std::fabs(w.as<float>()[i]));
  *scale = amax > 0.f ? amax / 448.f : 1.f;
  HostTensor q(DataType::kFP8E4M3FN, w.dims());
  for (int64_t i = 0; i < w.count(); ++i) q.as<uint8_t>()[i] = floatToNarrow(DataType::kFP8E4M3FN, w.as<float>()[i] / *scale, true);
  return q;
}

Tensor* newOutput(Layer* l, DataType type, const Dims& dims) {
  Tensor* t = l->outputs[0];
  t->type = type;
  t->dims = dims;
  t->dimsKnown = true;
  return t;
}

}  // namespace

bool isQuantizable(const Layer& l) {
  if (l.precision && *l.precision != DataType::kINT8) return false;
  if (l.inputs.size() < 2 || l.outputs.size() != 1 || !l.inputs[0] || l.inputs[0]->type != DataType::kFLOAT ||
      l.inputs[0]->isConstant() || hasFusedActivation(l.attrs) || !constFloat(l.inputs[1]))
    return false;
  const Tensor* b = l.inputs.size() > 2 ? l.inputs[2] : nullptr;
  if (l.op == "Conv") return l.inputs.size() <= 3 && (!b || constFloat(b));
  if (l.inputs[1]->dims.size() != 2) return false;
  if (l.op == "MatMul") return l.inputs.size() == 2 || (l.inputs.size() == 3 && constFloat(b));  // 3: a fused bias
  if (l.op == "Gemm")
    return l.attrs.getInt("transA", 0) == 0 && l.attrs.getFloat("alpha", 1.f) == 1.f && (!b || (constFloat(b) && l.attrs.getFloat("beta", 1.f) == 1.f));
  return false;
}

bool quantizeCalibrated(Network& net, const CalibrationTable& table, const std::function<bool(const LayerDesc&)>& supported,
                        int weightLimit, ImplicitTargets targets, ImplicitQuantization* result) {
  auto fp8Layer = [&](const Layer& l) { return targets.fp8 && l.op != "Conv"; };
  std::vector<Layer*> candidates;
  for (auto& l : net.layers()) {
    if (!isQuantizable(*l) || !(fp8Layer(*l) || targets.int8)) continue;
    if (targets.convsOnRequest && l->op == "Conv" && !(l->precision && *l->precision == DataType::kINT8)) {
      result->keptFloat[l->name] = "GPU convs run INT8 only where --layerPrecisions asks for int8 (slower than FP16 until the residual path is integer)";
      continue;
    }
    candidates.push_back(l.get());
  }
  std::map<std::pair<Tensor*, bool>, Tensor*> dequantized;  // (activation, FP8) -> its DQ output
  std::set<std::string> ours;              // names of the Q/DQ layers made here
  std::map<std::string, HostTensor> floatWeights;
  std::set<std::string> fp8Names;  // layers quantized FP8
  std::vector<std::string> order;
  // x through Q/DQ with its calibrated scale `a` (INT8 or, with `fp8`, E4M3), made once per tensor.
  auto dequantizedOf = [&](Tensor* x, ActivationScale a, bool fp8) {
    Tensor*& dq = dequantized[{x, fp8}];
    if (dq) return dq;
    if (targets.signedActivations && a.isUnsigned) a = {a.scale * 255.f / 127.f, false};  // the same amax on [-127, 127]
    HostTensor s(DataType::kFLOAT, {}), z(fp8 ? DataType::kFP8E4M3FN : a.isUnsigned ? DataType::kUINT8 : DataType::kINT8, {});
    *s.as<float>() = fp8 ? a.scale * (a.isUnsigned ? 255.f : 127.f) / 448.f : a.scale;
    Tensor* st = net.addConstant(net.uniqueName(x->name + "_scale"), s);
    Tensor* zt = net.addConstant(net.uniqueName(x->name + "_zero_point"), z);
    Layer* q = net.addLayer("QuantizeLinear", {x, st, zt}, 1, {}, net.uniqueName(x->name + "_calib_q"));
    Layer* d = net.addLayer("DequantizeLinear", {newOutput(q, z.type(), x->dims), st, zt}, 1, {}, net.uniqueName(x->name + "_calib_dq"));
    dq = newOutput(d, DataType::kFLOAT, x->dims);
    ours.insert(q->name), ours.insert(d->name);
    return dq;
  };
  for (Layer* l : candidates) {
    Tensor* x = l->inputs[0];
    auto it = table.scales.find(x->name);
    if (it == table.scales.end()) {
      result->keptFloat[l->name] = "no calibration scale for its input '" + x->name + "'";
      continue;
    }
    const bool fp8 = fp8Layer(*l);
    Tensor* dq = dequantizedOf(x, it->second, fp8);
    Tensor* w = l->inputs[1];
    HostTensor ws;
    HostTensor wq;
    Attributes axis;
    if (fp8) {
      float s = 1.f;
      wq = quantizeWeightFp8(w->value, &s);
      ws = HostTensor(DataType::kFLOAT, {});
      *ws.as<float>() = s;
    } else {
      wq = quantizeWeight(w->value, weightAxis(*l), weightLimit, &ws);
      axis.set("axis", weightAxis(*l));
    }
    Layer* dw = net.addLayer("DequantizeLinear", {net.addConstant(net.uniqueName(w->name + (fp8 ? "_e4m3" : "_int8")), wq),
                                                  net.addConstant(net.uniqueName(w->name + "_scale"), ws)},
                             1, axis, net.uniqueName(w->name + "_calib_dq"));
    ours.insert(dw->name);
    floatWeights[l->name] = w->value;
    if (fp8) fp8Names.insert(l->name);
    order.push_back(l->name);
    l->inputs[0] = dq;
    l->inputs[1] = newOutput(dw, DataType::kFLOAT, w->dims);
  }
  if (floatWeights.empty()) return false;
  // Residual blocks: an Add of a quantized conv's output (its sole reader) and a tensor with a
  // calibrated scale reads that tensor through its Q/DQ too, so that lowerQdq can make the conv,
  // the Add and what follows one integer layer (QLinearConv's residual); put back below when the
  // backend has no kernel for that form and the float identity still exists (the identity's own
  // producer may have become an integer layer writing int8, its Q now its only reader).
  struct ResidualRead {
    size_t slot;
    Tensor* identity;  // its float input (compared, never read, until found alive again below)
    std::string name;
  };
  std::map<std::string, ResidualRead> residualReads;  // by the Add's name
  if (targets.int8) {
    std::vector<Layer*> adds;  // first: making a Q/DQ below adds layers
    for (auto& lp : net.layers())
      if (lp->op == "Add" && lp->inputs.size() == 2 && lp->outputs.size() == 1) adds.push_back(lp.get());
    for (Layer* add : adds) {
      for (size_t k = 0; k < 2; ++k) {
        Tensor* convOut = add->inputs[k];
        Tensor* other = add->inputs[1 - k];
        Layer* conv = convOut->producer;
        if (!conv || conv->op != "Conv" || !floatWeights.count(conv->name) || fp8Names.count(conv->name) || convOut == other ||
            net.consumers(convOut).size() != 1 || other->dims != convOut->dims || other->type != DataType::kFLOAT)
          continue;
        // The identity's calibrated Q/DQ: a quantized layer's input already has one; another quantized
        // conv's output (a downsample branch) gets one when calibration observed it.
        Tensor* dq = nullptr;
        if (auto it = dequantized.find({other, false}); it != dequantized.end()) dq = it->second;
        const Layer* from = other->producer;
        auto scale = table.scales.find(other->name);
        if (!dq && from && from->op == "Conv" && floatWeights.count(from->name) && !fp8Names.count(from->name) && scale != table.scales.end())
          dq = dequantizedOf(other, scale->second, false);
        if (!dq) continue;
        residualReads[add->name] = {1 - k, other, other->name};
        add->inputs[1 - k] = dq;
        break;
      }
    }
  }
  net.topoSort();
  lowerQdq(net, supported);
  // Adds lowerQdq left read the float identity again, where it still exists: the block before may
  // have become one integer layer whose int8 output replaced it (then the Add keeps reading DQ(Q)).
  std::set<const Tensor*> alive;
  for (auto& tp : net.tensors()) alive.insert(tp.get());
  for (auto& lp : net.layers()) {
    auto it = residualReads.find(lp->name);
    if (it == residualReads.end() || lp->op != "Add") continue;
    Tensor* id = it->second.identity;
    if (alive.count(id) && id->name == it->second.name && id->type == DataType::kFLOAT) lp->inputs[it->second.slot] = id;
  }
  // What lowerQdq left (the backend has no integer kernel for it) reads its float inputs again.
  for (auto& l : net.layers()) {
    if (!floatWeights.count(l->name)) continue;
    result->keptFloat[l->name] = fp8Names.count(l->name) ? std::string("no FP8 kernel for it (Fp8MatMul) on this backend or device")
                                                          : "no INT8 kernel for its integer form (" + std::string(l->op == "Conv" ? "QLinearConv" : "QLinearMatMul") +
                                                                ") on this backend";
    Layer* dq = l->inputs[0]->producer;
    Layer* q = dq && ours.count(dq->name) ? dq->inputs[0]->producer : nullptr;
    if (q && ours.count(q->name)) l->inputs[0] = q->inputs[0];
    l->inputs[1] = net.addConstant(net.uniqueName(l->name + "_weight"), floatWeights[l->name]);
  }
  for (const std::string& name : order)
    if (!result->keptFloat.count(name)) {
      result->quantized.push_back(name);
      result->fp8 += static_cast<int>(fp8Names.count(name));
    }
  net.removeDeadLayers();
  net.topoSort();
  return true;
}

}  // namespace kiln
