// Packs an attention's Q, K and V projections into one MatMul (horizontal GEMM fusion). Exports of
// transformers' BERT / RoBERTa / ViT / T5 / Whisper / DeBERTa keep three Linear layers reading the
// same hidden states; after the attention fusion their outputs feed one Attention layer in the
// flat form ([B, S, H*D] inputs, q_num_heads). Three GEMMs of N = H*D become one of N = 3*H*D
// (weights and biases concatenated along N), and the Attention reads Q, K and V as strided views
// of the packed [B, S, 3*H*D] output, as it does for timm's packed qkv projection: two launches
// fewer per layer and a wider GEMM (BERT-base at batch 1: three 768-wide GEMMs of ~15 us each on
// the H200). Where only K and V share their input (cross-attention), those two are packed.
// Equal Q / KV head counts only; the packed layer must still have a fused attention kernel
// (`supported`). Dynamic batch / sequence dims: the views are fitted as expressions of the packed
// buffer's dims at the profiles' sample shapes (view_exprs.h), as the attention fusion's own views.
#include "builder/passes/passes.h"
#include "builder/passes/symbolic_dims.h"
#include "builder/passes/view_exprs.h"
#include "ops/fused_attrs.h"

#include <cstring>

namespace kiln {

namespace {

//! A projection that can join a pack: MatMul(A, constant 2-D W) [+ constant 1-D bias], no other
//! fused work, read by `att` only, output [B, S, N] (N static).
bool packable(const Network& net, const Layer* att, const Tensor* out) {
  const Layer* p = out ? out->producer : nullptr;
  if (!p || p->op != "MatMul" || !p->domain.empty() || p->outputs.size() != 1 || p->inputs.size() < 2 || p->inputs.size() > 3) return false;
  if (!p->attrs.all().empty() || !p->inputs[0] || !p->inputs[1] || !p->inputs[1]->isConstant() || p->inputs[1]->dims.size() != 2) return false;
  if (p->inputs.size() == 3 && (!p->inputs[2] || !p->inputs[2]->isConstant() || p->inputs[2]->dims != Dims{p->inputs[1]->dims[1]}))
    return false;
  if (out->isOutput || !out->dimsKnown || out->dims.size() != 3 || out->dims[2] != p->inputs[1]->dims[1]) return false;
  return soleConsumer(net, out) == att;
}

//! Whether projections a and b can share one GEMM: the same input, weight rows, types and precision constraint.
bool samePack(const Layer* a, const Layer* b) {
  // A projection without a bias (Whisper's k_proj) packs with biased ones: its part of the bias is 0.
  return a->inputs[0] == b->inputs[0] && a->inputs[1]->dims[0] == b->inputs[1]->dims[0] && a->inputs[1]->type == b->inputs[1]->type &&
         a->outputs[0]->type == b->outputs[0]->type &&
         (a->inputs.size() < 3 || b->inputs.size() < 3 || a->inputs[2]->type == b->inputs[2]->type) && a->precision == b->precision;
}

//! [K, N0] .. [K, Nk] concatenated along the columns (any element type: bytes are copied).
HostTensor concatColumns(const std::vector<const HostTensor*>& parts) {
  const int64_t k = parts[0]->dims()[0];
  const size_t es = elementSize(parts[0]->type());
  int64_t n = 0;
  for (const HostTensor* p : parts) n += p->dims()[1];
  HostTensor out(parts[0]->type(), Dims{k, n});
  auto* dst = static_cast<uint8_t*>(out.data());
  int64_t col = 0;
  for (const HostTensor* p : parts) {
    const int64_t w = p->dims()[1];
    const auto* src = static_cast<const uint8_t*>(p->data());
    for (int64_t r = 0; r < k; ++r) std::memcpy(dst + (r * n + col) * es, src + r * w * es, static_cast<size_t>(w) * es);
    col += w;
  }
  return out;
}

//! 1-D tensors concatenated (as one-row matrices).
HostTensor concatVectors(const std::vector<const HostTensor*>& parts) {
  std::vector<HostTensor> rows;
  for (const HostTensor* p : parts) rows.push_back(p->reshaped(Dims{1, p->count()}));
  std::vector<const HostTensor*> views;
  for (const HostTensor& r : rows) views.push_back(&r);
  const HostTensor joined = concatColumns(views);
  return joined.reshaped(Dims{joined.count()});
}

}  // namespace

bool packQkvProjections(Network& net, const std::function<bool(const Layer&)>& supported, const InputSamples& samples) {
  bool changed = false;
  SymbolicDims sym(samples);
  const size_t count = net.layers().size();
  for (size_t i = 0; i < count; ++i) {
    Layer* att = net.layer(static_cast<int>(i));
    if (att->op != "Attention" || !att->domain.empty() || hasQkvViews(att->attrs) || att->inputs.size() < 3) continue;
    const int64_t h = att->attrs.getInt("q_num_heads", 0);
    if (h <= 0 || att->attrs.getInt("kv_num_heads", 0) != h || att->outputs.size() != 1) continue;
    Tensor *q = att->inputs[0], *k = att->inputs[1], *v = att->inputs[2];
    if (!q || !k || !v || q == k || k == v || q == v || !packable(net, att, k) || !packable(net, att, v)) continue;
    const Layer *pk = k->producer, *pv = v->producer;
    if (!samePack(pk, pv) || !sym.sameDims(k, v)) continue;
    const bool withQ = packable(net, att, q) && samePack(q->producer, pk);
    // Q [B, Sq, H*D], K and V [B, Skv, H*D] (the flat form: Dv = D), output [B, Sq, H*D].
    Tensor* y = att->outputs[0];
    const Dims &qd = q->dims, &kd = k->dims;
    if (qd.size() != 3 || !q->dimsKnown || qd[2] <= 0 || qd[2] != kd[2] || qd[2] % h != 0 || !sym.sameDim(q, 0, k, 0)) continue;
    const int64_t d = qd[2] / h, dv = d;
    if (!y->dimsKnown || y->dims.size() != 3 || y->dims[2] != h * dv || !sym.sameDim(y, 0, q, 0) || !sym.sameDim(y, 1, q, 1)) continue;
    const bool dynamic = !isStatic(qd) || !isStatic(kd) || !isStatic(y->dims);
    if (dynamic && sym.nbSamples() < 2) continue;  // no samples to fit the views' expressions to

    // The pack: [Q |] K | V projections, in that order along N.
    std::vector<const Layer*> parts;
    if (withQ) parts.push_back(q->producer);
    parts.push_back(pk);
    parts.push_back(pv);
    std::vector<const HostTensor*> ws, bs;
    const Tensor* anyBias = nullptr;
    for (const Layer* p : parts)
      if (p->inputs.size() == 3) anyBias = p->inputs[2];
    std::vector<HostTensor> zeros;  // biases of the projections without one
    zeros.reserve(parts.size());
    int64_t n = 0;
    for (const Layer* p : parts) {
      ws.push_back(&p->inputs[1]->value);
      if (p->inputs.size() == 3) bs.push_back(&p->inputs[2]->value);
      else if (anyBias) bs.push_back(&zeros.emplace_back(anyBias->type, Dims{p->inputs[1]->dims[1]}));
      n += p->outputs[0]->dims[2];
    }
    // The views at dims (batch, Sq, Skv: the packed buffer's rows; output dims `od`).
    auto viewsAt = [&](int64_t b, int64_t sq, int64_t skv, const Dims& od) {
      QkvViews w;
      w.b = b, w.h = h, w.sq = sq, w.skv = skv, w.d = d, w.dv = dv;
      int64_t offset = 0;
      auto viewOf = [&](const Tensor* t, int64_t rows, bool packed) {
        if (!packed) return std::array<int64_t, 4>{0, rows * t->dims[2], t->dims[2] / h, t->dims[2]};
        std::array<int64_t, 4> r{offset, rows * n, t->dims[2] / h, n};
        offset += t->dims[2];
        return r;
      };
      w.q = viewOf(q, sq, withQ);
      w.k = viewOf(k, skv, true);
      w.v = viewOf(v, skv, true);
      w.outView = true;
      w.o = {sq * h * dv, dv, h * dv};
      w.oDims = od;
      return w;
    };
    Attributes viewAttrs;
    if (!dynamic) {
      setQkvViews(viewAttrs, viewsAt(qd[0], qd[1], kd[1], y->dims));
    } else {  // one set of views per sample shape, fitted as expressions of the input dims
      std::vector<QkvViews> views;
      std::vector<std::array<Dims, 4>> refs;
      for (size_t smp = 0; smp < sym.nbSamples(); ++smp) {
        const Dims &qs = sym.at(q, smp).dims, &ks = sym.at(k, smp).dims, &ys = sym.at(y, smp).dims;
        if (qs.size() != 3 || ks.size() != 3 || ys.size() != 3 || !isStatic(qs) || !isStatic(ks) || !isStatic(ys)) break;
        views.push_back(viewsAt(qs[0], qs[1], ks[1], ys));
        const Dims packedDims{ks[0], ks[1], n};
        refs.push_back({withQ ? packedDims : qs, packedDims, packedDims, ys});
      }
      std::vector<int64_t> exprs;
      if (views.size() != sym.nbSamples() || !fitViewExprs(views, refs, exprs)) continue;
      setQkvViews(viewAttrs, constantViewValues(views[0], exprs));
      setQkvViewExprs(viewAttrs, exprs);
    }

    // Check on a copy that the packed form still has a fused kernel before changing anything.
    Tensor probe;
    probe.name = pk->outputs[0]->name + "_packed";
    probe.type = pk->outputs[0]->type;
    probe.dims = Dims{kd[0], kd[1], n};
    probe.dimsKnown = true;
    Layer candidate = *att;
    for (const auto& [name, value] : viewAttrs.all()) candidate.attrs.set(name, value);
    candidate.attrs.erase("q_num_heads");
    candidate.attrs.erase("kv_num_heads");
    candidate.inputs[0] = withQ ? &probe : q;
    candidate.inputs[1] = candidate.inputs[2] = &probe;
    if (supported && !supported(candidate)) continue;

    Tensor* wt = net.addConstant(net.uniqueName(pk->name + "_packed_weights"), concatColumns(ws));
    std::vector<Tensor*> in{pk->inputs[0], wt};
    if (!bs.empty()) in.push_back(net.addConstant(net.uniqueName(pk->name + "_packed_bias"), concatVectors(bs)));
    Layer* mm = net.addLayer("MatMul", in, 1, Attributes{}, net.uniqueName(pk->name + "_packed"));
    recordStandIn(mm, std::vector<const Layer*>(parts.begin(), parts.end()));  // the widest precision constraint of the parts
    Tensor* packedOut = mm->outputs[0];
    packedOut->type = probe.type;
    packedOut->dims = probe.dims;
    packedOut->dimsKnown = true;
    att->attrs = candidate.attrs;
    att->inputs[0] = withQ ? packedOut : q;
    att->inputs[1] = att->inputs[2] = packedOut;
    changed = true;
  }
  if (changed) net.removeDeadLayers();  // the old projections; the builder sorts the new MatMuls after the pass
  return changed;
}

}  // namespace kiln
