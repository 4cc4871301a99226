// Op definition for LinearAttention (opset 27): causal linear attention as a recurrence over a
// per-head state S (d_k x d_v), the form of Gated DeltaNet / RetNet / Mamba-2 style layers.
// query (B, T, Hq*d_k), key (B, T, Hkv*d_k), value (B, T, Hkv*d_v); optional past_state
// (B, Hkv, d_k, d_v; zeros when omitted), decay (B, T, Hkv or Hkv*d_k; log-space gate) and beta
// (B, T, Hkv or 1). For each step t and kv head h, with update_rule:
//   gated, gated_delta: S *= exp(decay_t)                 (per head, or per row d of S)
//   delta, gated_delta: v_t = beta_t * (v_t - S^T k_t)    (the delta-rule correction)
//   every rule:         S += k_t v_t^T;  o_t = scale * S^T q_t  for each query head of h's group
// (q_num_heads / kv_num_heads query heads share a kv head, GQA). scale defaults to 1/sqrt(d_k).
// Outputs: output (B, T, Hq*d_v) in query's type, present_state (the final S) in past_state's
// type (query's when omitted). chunk_size is a tuning hint with no effect on the result.
// Reference kernel in float32 / float64 (float16 / bfloat16 are computed in float32 around it).
#include <cmath>
#include <vector>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

struct LinearAttentionGeom {
  int64_t qHeads = 0, kvHeads = 0;
  bool gated = false, delta = false;
};

LinearAttentionGeom linearAttentionGeom(const LayerDesc& l) {
  LinearAttentionGeom g;
  if (!l.attrs->has("q_num_heads") || !l.attrs->has("kv_num_heads"))
    opError(l, "the attributes q_num_heads and kv_num_heads are required");
  g.qHeads = l.attrs->getInt("q_num_heads", 0);
  g.kvHeads = l.attrs->getInt("kv_num_heads", 0);
  if (g.qHeads <= 0 || g.kvHeads <= 0 || g.qHeads % g.kvHeads != 0)
    opError(l, "q_num_heads (" + std::to_string(g.qHeads) + ") must be a positive multiple of kv_num_heads (" +
                   std::to_string(g.kvHeads) + ")");
  const std::string rule = l.attrs->getString("update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    opError(l, "update_rule must be linear, gated, delta or gated_delta, got '" + rule + "'");
  g.gated = rule == "gated" || rule == "gated_delta";
  g.delta = rule == "delta" || rule == "gated_delta";
  return g;
}

// Splits a packed (B, T, heads * d) last dim into d; -1 when unknown.
int64_t headDim(const LayerDesc& l, const char* what, int64_t packed, int64_t heads) {
  if (packed < 0) return -1;
  if (packed % heads != 0)
    opError(l, std::string(what) + "'s last dim " + std::to_string(packed) + " is not a multiple of its head count " +
                   std::to_string(heads));
  return packed / heads;
}

void inferLinearAttention(LayerDesc& l) {
  requireInputs(l, 3, 6);
  const LinearAttentionGeom g = linearAttentionGeom(l);
  const DataType t = l.inputs[0].type;
  if (!isFloat(t)) opError(l, std::string("query must be a float type, got ") + toString(t));
  for (size_t i : {1, 2, 4, 5})
    if (l.present(i) && l.inputs[i].type != t) opError(l, "input " + std::to_string(i) + " must have query's type");
  if (l.present(4) != g.gated) opError(l, g.gated ? "this update_rule needs decay" : "this update_rule takes no decay");
  if (l.present(5) != g.delta) opError(l, g.delta ? "this update_rule needs beta" : "this update_rule takes no beta");
  const char* names[] = {"query", "key", "value", "past_state", "decay", "beta"};
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (l.present(i) && l.inputs[i].dims.size() != (i == 3 ? 4u : 3u))
      opError(l, std::string(names[i]) + " must be rank " + (i == 3 ? "4" : "3") + ", got " + toString(l.inputs[i].dims));
  const Dims &q = l.inputs[0].dims, &k = l.inputs[1].dims, &v = l.inputs[2].dims;
  const int64_t dk = headDim(l, "query", q[2], g.qHeads), dkKey = headDim(l, "key", k[2], g.kvHeads),
                dv = headDim(l, "value", v[2], g.kvHeads);
  if (dk >= 0 && dkKey >= 0 && dk != dkKey) opError(l, "query and key have different head sizes");
  for (size_t i = 1; i < l.inputs.size(); ++i) {
    if (!l.present(i) || i == 3) continue;
    const Dims& d = l.inputs[i].dims;
    for (int a = 0; a < 2; ++a)
      if (d[a] >= 0 && q[a] >= 0 && d[a] != q[a])
        opError(l, std::string(names[i]) + " " + toString(d) + " and query " + toString(q) + " differ in batch or sequence");
  }
  const int64_t headK = dk >= 0 ? dk : dkKey;
  if (l.present(4)) {
    const int64_t last = l.inputs[4].dims[2];
    if (last >= 0 && last != g.kvHeads && (headK < 0 || last != g.kvHeads * headK))
      opError(l, "decay's last dim must be kv_num_heads or kv_num_heads * d_k, got " + std::to_string(last));
  }
  if (l.present(5)) {
    const int64_t last = l.inputs[5].dims[2];
    if (last >= 0 && last != g.kvHeads && last != 1) opError(l, "beta's last dim must be kv_num_heads or 1, got " + std::to_string(last));
  }
  const Dims state{q[0], g.kvHeads, headK, dv};
  DataType stateType = t;
  if (l.present(3)) {
    stateType = l.inputs[3].type;
    if (!isFloat(stateType)) opError(l, std::string("past_state must be a float type, got ") + toString(stateType));
    const Dims& p = l.inputs[3].dims;
    for (size_t a = 0; a < 4; ++a)
      if (p[a] >= 0 && state[a] >= 0 && p[a] != state[a])
        opError(l, "past_state " + toString(p) + " must be (batch, kv_num_heads, d_k, d_v) = " + toString(state));
  }
  setOutput(l, 0, t, {q[0], q[1], dv >= 0 ? g.qHeads * dv : -1});
  if (l.outputs.size() > 1) setOutput(l, 1, stateType, state);
}

template <typename T, typename S>
void linearAttentionKernel(const LayerDesc& l, const KernelIO& io) {
  const LinearAttentionGeom g = linearAttentionGeom(l);
  const Dims& qd = io.in[0].dims;
  const int64_t batch = qd[0], steps = qd[1], dk = qd[2] / g.qHeads, dv = io.in[2].dims[2] / g.kvHeads;
  const int64_t group = g.qHeads / g.kvHeads;
  const float scaleAttr = l.attrs->getFloat("scale", 0.0f);
  const double scale = scaleAttr == 0.0f ? 1.0 / std::sqrt(static_cast<double>(dk)) : static_cast<double>(scaleAttr);
  auto input = [&](size_t i) { return i < io.in.size() && io.in[i].data ? io.in[i].as<const T>() : nullptr; };
  const T *q = input(0), *k = input(1), *v = input(2), *decay = input(4), *beta = input(5);
  const S* past = io.in.size() > 3 && io.in[3].data ? io.in[3].as<const S>() : nullptr;
  const int64_t decayLast = decay ? io.in[4].dims[2] : 0, betaLast = beta ? io.in[5].dims[2] : 0;
  const bool decayPerRow = decay && decayLast != g.kvHeads;
  T* out = io.out[0].as<T>();
  S* present = io.out.size() > 1 ? io.out[1].as<S>() : nullptr;  // null when the output is empty
  const int64_t stateSize = dk * dv;
  io.pool->parallelFor(batch * g.kvHeads, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> state(static_cast<size_t>(stateSize)), vt(static_cast<size_t>(dv));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / g.kvHeads, h = bh % g.kvHeads;
      for (int64_t i = 0; i < stateSize; ++i) state[i] = past ? static_cast<T>(past[bh * stateSize + i]) : T(0);
      for (int64_t t = 0; t < steps; ++t) {
        const int64_t row = b * steps + t;
        const T* kt = k + (row * g.kvHeads + h) * dk;
        const T* vIn = v + (row * g.kvHeads + h) * dv;
        for (int64_t m = 0; m < dv; ++m) vt[m] = vIn[m];
        if (decay) {
          const T* gt = decay + row * decayLast + (decayPerRow ? h * dk : h);
          for (int64_t d = 0; d < dk; ++d) {
            const T f = std::exp(gt[decayPerRow ? d : 0]);
            for (int64_t m = 0; m < dv; ++m) state[d * dv + m] *= f;
          }
        }
        if (beta) {
          const T bt = beta[row * betaLast + (betaLast == 1 ? 0 : h)];
          for (int64_t m = 0; m < dv; ++m) {
            T retrieved = 0;
            for (int64_t d = 0; d < dk; ++d) retrieved += state[d * dv + m] * kt[d];
            vt[m] = bt * (vt[m] - retrieved);
          }
        }
        for (int64_t d = 0; d < dk; ++d)
          for (int64_t m = 0; m < dv; ++m) state[d * dv + m] += kt[d] * vt[m];
        for (int64_t j = 0; j < group; ++j) {
          const int64_t qh = h * group + j;
          const T* qt = q + (row * g.qHeads + qh) * dk;
          T* ot = out + (row * g.qHeads + qh) * dv;
          for (int64_t m = 0; m < dv; ++m) {
            T acc = 0;
            for (int64_t d = 0; d < dk; ++d) acc += qt[d] * state[d * dv + m];
            ot[m] = static_cast<T>(scale * acc);
          }
        }
      }
      if (present)
        for (int64_t i = 0; i < stateSize; ++i) present[bh * stateSize + i] = static_cast<S>(state[i]);
    }
  });
}

void refLinearAttention(const LayerDesc& l, const KernelIO& io) {
  const DataType stateType = io.out.size() > 1 ? io.out[1].type : io.in[0].type;
  dispatchType<kRefFloatTypes>(io.in[0].type, [&](auto t) {
    dispatchType<kRefFloatTypes>(stateType, [&](auto s) {
      linearAttentionKernel<decltype(t), decltype(s)>(l, io);
    }, "LinearAttention's state");
  }, "LinearAttention");
}

}  // namespace

void registerLinearAttentionOps(OpRegistry& r) {
  OpDef d;
  d.name = "LinearAttention";
  d.infer = inferLinearAttention;
  d.ref = refLinearAttention;
  d.minOpset = 27;
  r.add(d);
}

}  // namespace kiln
