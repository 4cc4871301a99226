// Explicit FP8 quantization: the Q/DQ pattern of NVIDIA ModelOpt-style FP8 exports around a
// MatMul / Gemm becomes one Fp8MatMul layer (ops/fp8_matmul.cpp), which the GPU runs on the FP8
// tensor cores:
//   X -> QuantizeLinear(x_scale, float8e4m3fn zero) -> DequantizeLinear(x_scale) -> MatMul / Gemm
//   W:  DequantizeLinear(float8e4m3fn constant, w_scale), or DQ(Q(float constant)) (codes computed here)
//   bias: Gemm's C, a MatMul's fused bias, or an Add of a constant [N] row after the MatMul
// Per-tensor scales only (a per-channel weight keeps the float Q/DQ path, ONNX's semantics exactly);
// the Q may feed several DQ / MatMul pairs (Q, K and V projections): each layer quantizes X itself.
#include <cmath>

#include "builder/passes/lower_qdq.h"
#include "builder/passes/passes.h"
#include "ops/fused_attrs.h"
#include "ops/shape_propagation.h"

namespace kiln {

namespace {

constexpr DataType kE4M3 = DataType::kFP8E4M3FN;

//! A constant scalar float scale (positive, finite) of a Q / DQ layer, and a zero (or absent)
//! float8e4m3fn zero point.
bool fp8ScaleOf(const Layer* l, float* scale) {
  if (!l || l->inputs.size() < 2 || l->attrs.getInt("block_size", 0) != 0) return false;
  const Tensor* s = l->inputs[1];
  if (!s || !s->isConstant() || s->value.count() != 1 || s->type != DataType::kFLOAT) return false;
  const float v = static_cast<float>(s->value.getDouble(0));
  if (!(v > 0.f) || !std::isfinite(v)) return false;
  if (l->inputs.size() > 2 && l->inputs[2]) {
    const Tensor* z = l->inputs[2];
    if (!z->isConstant() || z->type != kE4M3 || z->value.count() != 1 || (z->value.as<uint8_t>()[0] & 0x7f) != 0) return false;
  }
  *scale = v;
  return true;
}

//! t = DQ(Q(x)) with one per-tensor float8e4m3fn scale: sets x and the scale.
bool activationQdq(const Tensor* t, Tensor** x, float* scale) {
  const Layer* dq = t ? t->producer : nullptr;
  if (!dq || dq->op != "DequantizeLinear" || dq->inputs[0]->type != kE4M3) return false;
  const Layer* q = dq->inputs[0]->producer;
  if (!q || q->op != "QuantizeLinear" || q->outputs[0]->type != kE4M3 || q->attrs.getInt("saturate", 1) == 0) return false;
  float sq = 0.f, sd = 0.f;
  if (!fp8ScaleOf(q, &sq) || !fp8ScaleOf(dq, &sd) || sq != sd) return false;
  if (!isFloat(q->inputs[0]->type) || q->inputs[0]->type == DataType::kDOUBLE) return false;
  *x = q->inputs[0];
  *scale = sq;
  return true;
}

//! w = DQ(float8e4m3fn constant) or DQ(Q(float constant)), 2-D, one per-tensor scale: the codes.
bool weightCodes(const Tensor* w, HostTensor* codes, float* scale) {
  const Layer* dq = w ? w->producer : nullptr;
  if (!dq || dq->op != "DequantizeLinear" || !fp8ScaleOf(dq, scale)) return false;
  const Tensor* data = dq->inputs[0];
  if (data->type != kE4M3 || data->dims.size() != 2) return false;
  if (data->isConstant()) {
    *codes = data->value;
    return true;
  }
  const Layer* q = data->producer;
  float sq = 0.f;
  if (!q || q->op != "QuantizeLinear" || q->attrs.getInt("saturate", 1) == 0 || !fp8ScaleOf(q, &sq) || sq != *scale) return false;
  const Tensor* f = q->inputs[0];
  if (!f->isConstant() || f->type != DataType::kFLOAT) return false;
  HostTensor c(kE4M3, f->dims);
  for (int64_t i = 0; i < c.count(); ++i)
    c.as<uint8_t>()[i] = floatToNarrow(kE4M3, static_cast<float>(f->value.getDouble(i)) / sq, true);
  *codes = c;
  return true;
}

//! A constant float32 row of n values ([N] or [1, .., 1, N]).
bool biasRow(const Tensor* b, int64_t n) {
  if (!b || !b->isConstant() || b->type != DataType::kFLOAT || b->value.count() != n || b->dims.empty() || b->dims.back() != n) return false;
  return true;
}

bool lowerOne(Network& net, Layer* l, const std::function<bool(const LayerDesc&)>& supported) {
  const bool gemm = l->op == "Gemm";
  if ((!gemm && l->op != "MatMul") || l->inputs.size() < 2 || l->outputs.size() != 1 || hasFusedActivation(l->attrs)) return false;
  if (gemm && (l->attrs.getInt("transA", 0) != 0 || l->attrs.getFloat("alpha", 1.f) != 1.f ||
               (l->inputs.size() > 2 && l->inputs[2] && l->attrs.getFloat("beta", 1.f) != 1.f)))
    return false;
  Tensor* x = nullptr;
  float xs = 0.f, ws = 0.f;
  HostTensor codes;
  if (!activationQdq(l->inputs[0], &x, &xs) || !weightCodes(l->inputs[1], &codes, &ws)) return false;
  if (gemm && l->attrs.getInt("transB", 0) != 0) codes = transposed2d(codes);
  const int64_t N = codes.dims()[1];
  std::vector<Layer*> dead = {l};
  Tensor* result = l->outputs[0];
  const Tensor* bias = nullptr;
  if (l->inputs.size() > 2 && l->inputs[2]) {  // Gemm's C, or a MatMul's fused bias (fuseMatMulBias)
    if (!biasRow(l->inputs[2], N)) return false;
    bias = l->inputs[2];
  } else if (!gemm) {  // MatMul -> Add(constant row): the bias
    Layer* add = soleConsumer(net, result);
    if (add && add->op == "Add" && add->inputs.size() == 2 && add->outputs.size() == 1 && !result->isOutput) {
      const Tensor* other = add->inputs[0] == result ? add->inputs[1] : add->inputs[0];
      if (biasRow(other, N) && add->outputs[0]->dims == result->dims) {
        bias = other;
        dead.push_back(add);
        result = add->outputs[0];
      }
    }
  }
  std::vector<Tensor*> in = {x, net.addConstant(net.uniqueName(l->name + "_w_e4m3"), codes)};
  if (bias) {
    HostTensor row(DataType::kFLOAT, {N});
    for (int64_t n = 0; n < N; ++n) row.as<float>()[n] = static_cast<float>(bias->value.getDouble(n));
    in.push_back(net.addConstant(net.uniqueName(l->name + "_bias"), row));
  }
  Attributes a;
  a.set("x_scale", xs);
  a.set("w_scale", ws);
  Layer* f = net.addLayer("Fp8MatMul", in, 1, a, net.uniqueName(l->name + "_fp8"));
  LayerDesc d = describeLayer(*f);
  d.outputs[0].type = result->type;
  d.outputs[0].dims = result->dims;
  if (result->type != x->type || !supported(d)) {
    net.removeLayer(f);
    return false;
  }
  Layer* dqx = l->inputs[0]->producer;
  replaceWithFused(net, f, dead, result);
  f->fusedOps.insert(f->fusedOps.begin(), dqx->op + ":" + dqx->name);
  return true;
}

}  // namespace

bool lowerFp8Qdq(Network& net, const std::function<bool(const LayerDesc&)>& supported) {
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    if (lowerOne(net, net.layer(static_cast<int>(i)), supported)) {
      changed = true;
      i = static_cast<size_t>(-1);  // the layer list was re-sorted: start over
    }
  }
  return changed;
}

}  // namespace kiln
