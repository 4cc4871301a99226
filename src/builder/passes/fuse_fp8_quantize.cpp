// FP8 quantizations as layers of their own, then inside the layers that produce the values (GPU
// builds, after precision assignment: the float types are final). An Fp8MatMul fresh from
// lower_qdq_fp8 quantizes its float X itself, one pass over X per layer. Here:
// 1. The Fp8MatMul layers that read one float tensor with one x_scale share one Fp8Quantize
//    (BERT's Q, K and V projections quantize their input once, not three times) and read its codes.
// 2. An Fp8Quantize of a value that nothing else reads goes into the layer that computes it, which
//    then writes the codes itself and the float16 tensor between them is never written: an
//    Fp8MatMul (the FFN: up projection -> GELU -> Q -> down projection; y_scale: cuBLASLt's FP8 D,
//    or its post pass), a LayerNormalization / RMSNormalization (the Q before the QKV and FFN
//    projections of pre-LN blocks; kFp8OutScaleAttr). Where a LayerNorm's Y has other readers
//    (post-LN blocks: BERT's residual), it writes the codes as a second output beside Y.
// A Q below view layers (Reshape, Flatten, Squeeze, Unsqueeze) moves above them first. Each step is
// kept only where the backend has a kernel for the layers it makes (`supported`).
#include <map>
#include <utility>
#include <vector>

#include "builder/passes/passes.h"
#include "ops/fp8_matmul.h"
#include "ops/shape_propagation.h"

namespace kiln {

namespace {

bool floatActivation(DataType t) { return t == DataType::kFLOAT || t == DataType::kHALF || t == DataType::kBF16; }

//! Step 1 for the Fp8MatMul layers `readers` of float tensor `x` at scale `scale`.
bool shareQuantization(Network& net, Tensor* x, float scale, const std::vector<Layer*>& readers,
                       const std::function<bool(const LayerDesc&)>& supported) {
  Attributes qa;
  qa.set("scale", scale);
  Layer* q = net.addLayer("Fp8Quantize", {x}, 1, qa, net.uniqueName(x->name + "_e4m3"));
  Tensor* codes = q->outputs[0];
  codes->type = DataType::kFP8E4M3FN;
  codes->dims = x->dims;
  codes->dimsKnown = x->dimsKnown;
  if (!supported(describeLayer(*q))) {
    net.removeLayer(q);
    return false;
  }
  bool any = false;
  for (Layer* mm : readers) {
    mm->attrs.set("dtype", static_cast<int64_t>(x->type));
    mm->inputs[0] = codes;
    if (supported(describeLayer(*mm))) {
      any = true;
      continue;
    }
    mm->inputs[0] = x;  // this layer keeps quantizing X itself
    mm->attrs.erase("dtype");
  }
  if (!any) net.removeLayer(q);
  return any;
}

bool viewOp(const std::string& op) { return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze"; }

//! Q(view(u)) = view(Q(u)) (the quantization is elementwise): moves `q` above the views between it
//! and the layer computing the values (GPT-2 reshapes [B, S, K] to [B*S, K] before each Gemm)
//! while each tensor on the way has no other reader. The views then carry codes.
void hoistAboveViews(Network& net, Layer* q, const std::function<bool(const LayerDesc&)>& supported) {
  for (;;) {
    Tensor* v = q->inputs[0];
    Layer* view = v->producer;
    if (!view || !viewOp(view->op) || view->outputs.size() != 1 || view->inputs.empty() || soleConsumer(net, v) != q) return;
    Tensor* u = view->inputs[0];
    if (!u->producer || soleConsumer(net, u) != view) return;
    Tensor* codes = q->outputs[0];
    LayerDesc d = describeLayer(*view);
    d.inputs[0].type = d.outputs[0].type = DataType::kFP8E4M3FN;
    if (!supported(d)) return;
    net.replaceUses(codes, v);  // the readers of the codes read the view's output, now codes
    q->inputs[0] = u;
    view->inputs[0] = codes;
    codes->dims = u->dims;
    v->type = DataType::kFP8E4M3FN;
    net.topoSort();
  }
}

bool normOp(const std::string& op) { return op == "LayerNormalization" || op == "RMSNormalization"; }

//! A LayerNorm / RMSNorm whose Y others read too (post-LN BERT: the next block's residual) writes
//! the codes as a second output beside Y: one pass over the rows instead of two.
bool codesBesideNormOutput(Network& net, Layer* q, const std::function<bool(const LayerDesc&)>& supported) {
  Tensor* v = q->inputs[0];
  Layer* p = v->producer;
  if (!p || !normOp(p->op) || p->outputs.size() != 1 || p->outputs[0] != v || p->attrs.has(kFp8OutScaleAttr)) return false;
  p->attrs.set(kFp8OutScaleAttr, q->attrs.getFloat("scale", 1.f));
  p->attrs.set(kFp8CodesOutputAttr, int64_t(1));
  LayerDesc d = describeLayer(*p);
  d.outputs.push_back(TensorDesc{DataType::kFP8E4M3FN, v->dims, {}});
  if (!supported(d)) {
    p->attrs.erase(kFp8OutScaleAttr);
    p->attrs.erase(kFp8CodesOutputAttr);
    return false;
  }
  recordFusion(p, q);
  Tensor* codes = q->outputs[0];
  net.removeLayer(q);
  codes->producer = p;
  p->outputs.push_back(codes);
  return true;
}

//! Step 2: `q` (an Fp8Quantize) into the layer that produces its input (output 0).
bool quantizeInProducer(Network& net, Layer* q, const std::function<bool(const LayerDesc&)>& supported) {
  hoistAboveViews(net, q, supported);
  Tensor* v = q->inputs[0];
  Layer* p = v->producer;
  if (!p || p->outputs.empty() || p->outputs[0] != v) return false;
  if (soleConsumer(net, v) != q) return codesBesideNormOutput(net, q, supported);
  const char* attr = p->op == "Fp8MatMul" ? "y_scale" : normOp(p->op) ? kFp8OutScaleAttr : nullptr;
  if (!attr || p->attrs.has(attr)) return false;
  p->attrs.set(attr, q->attrs.getFloat("scale", 1.f));
  LayerDesc d = describeLayer(*p);
  d.outputs[0].type = DataType::kFP8E4M3FN;
  if (!supported(d)) {
    p->attrs.erase(attr);
    return false;
  }
  recordFusion(p, q);
  Tensor* codes = q->outputs[0];
  net.removeLayer(q);
  v->type = DataType::kFP8E4M3FN;
  net.replaceUses(codes, v);
  return true;
}

}  // namespace

bool fuseFp8Quantize(Network& net, const std::function<bool(const LayerDesc&)>& supported) {
  bool changed = false;
  // Step 1, in layer order (deterministic names).
  std::vector<std::pair<Tensor*, float>> keys;
  std::map<std::pair<Tensor*, float>, std::vector<Layer*>> readers;
  for (auto& l : net.layers()) {
    if (l->op != "Fp8MatMul" || l->inputs.empty() || !floatActivation(l->inputs[0]->type)) continue;
    const std::pair<Tensor*, float> key{l->inputs[0], l->attrs.getFloat("x_scale", 0.f)};
    if (!readers.count(key)) keys.push_back(key);
    readers[key].push_back(l.get());
  }
  for (const auto& key : keys) changed = shareQuantization(net, key.first, key.second, readers[key], supported) || changed;
  if (!changed) return false;
  net.topoSort();
  // Step 2.
  std::vector<Layer*> quantizers;
  for (auto& l : net.layers())
    if (l->op == "Fp8Quantize") quantizers.push_back(l.get());
  for (Layer* q : quantizers) quantizeInProducer(net, q, supported);
  net.topoSort();
  return true;
}

}  // namespace kiln
