// Op definition for CausalConvWithState (opset 27): a causal depthwise 1-D convolution that carries
// its left context between calls. input (B, C, L), weight (C, 1, K), optional bias (C) and
// past_state (B, C, K-1; zeros when omitted). With padded = concat(past_state, input) along the
// length axis:
//   output[b, c, t]     = act(bias[c] + sum_k weight[c, 0, k] * padded[b, c, t + k]),  t < L
//   present_state[b, c] = the last K-1 positions of padded
// act is identity ("none") or SiLU ("silu", alias "swish"). Reference kernel in float32 / float64;
// the builder computes float16 / bfloat16 tensors in float32 around it.
#include <cmath>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

bool causalConvSilu(const LayerDesc& l) {
  const std::string act = l.attrs->getString("activation", "none");
  if (act == "silu" || act == "swish") return true;
  if (act != "none") opError(l, "activation must be none, silu or swish, got '" + act + "'");
  return false;
}

// A known dim must equal `want` (when that is known too).
void expectDim(const LayerDesc& l, const char* what, int64_t got, int64_t want, const char* wantWhat) {
  if (got >= 0 && want >= 0 && got != want)
    opError(l, std::string(what) + " is " + std::to_string(got) + " but " + wantWhat + " is " + std::to_string(want));
}

void inferCausalConv(LayerDesc& l) {
  requireInputs(l, 2, 4);
  causalConvSilu(l);
  const DataType t = l.inputs[0].type;
  if (!isFloat(t)) opError(l, std::string("input must be a float type, got ") + toString(t));
  for (size_t i = 1; i < l.inputs.size(); ++i)
    if (l.present(i) && l.inputs[i].type != t) opError(l, "input " + std::to_string(i) + " must have the type of input 0");
  const Dims &x = l.inputs[0].dims, &w = l.inputs[1].dims;
  if (x.size() != 3) opError(l, "input must be rank 3 (batch, channels, length), got " + toString(x));
  if (w.size() != 3) opError(l, "weight must be rank 3 (channels, 1, kernel), got " + toString(w));
  expectDim(l, "weight's dim 0", w[0], x[1], "the channel count");
  if (w[1] >= 0 && w[1] != 1) opError(l, "weight's dim 1 must be 1 (depthwise), got " + std::to_string(w[1]));
  if (w[2] == 0) opError(l, "the kernel size must be at least 1");
  const int64_t channels = x[1] >= 0 ? x[1] : w[0], carry = w[2] >= 0 ? w[2] - 1 : -1;
  if (l.present(2)) {
    const Dims& b = l.inputs[2].dims;
    if (b.size() != 1) opError(l, "bias must be rank 1 (channels), got " + toString(b));
    expectDim(l, "bias's length", b[0], channels, "the channel count");
  }
  if (l.present(3)) {
    const Dims& p = l.inputs[3].dims;
    if (p.size() != 3) opError(l, "past_state must be rank 3 (batch, channels, kernel - 1), got " + toString(p));
    expectDim(l, "past_state's batch", p[0], x[0], "input's batch");
    expectDim(l, "past_state's channels", p[1], channels, "the channel count");
    expectDim(l, "past_state's length", p[2], carry, "kernel - 1");
  }
  setOutput(l, 0, t, {x[0], channels, x[2]});
  if (l.outputs.size() > 1) setOutput(l, 1, t, {x[0], channels, carry});
}

void refCausalConv(const LayerDesc& l, const KernelIO& io) {
  const bool silu = causalConvSilu(l);
  const Dims& x = io.in[0].dims;
  const int64_t batch = x[0], channels = x[1], length = x[2], kernel = io.in[1].dims[2], carry = kernel - 1;
  const bool hasBias = io.in.size() > 2 && io.in[2].data, hasPast = io.in.size() > 3 && io.in[3].data;
  dispatchType<kRefFloatTypes>(io.in[0].type, [&](auto tag) {
    using T = decltype(tag);
    const T* in = io.in[0].as<const T>();
    const T* w = io.in[1].as<const T>();
    const T* bias = hasBias ? io.in[2].as<const T>() : nullptr;
    const T* past = hasPast ? io.in[3].as<const T>() : nullptr;
    T* out = io.out[0].as<T>();
    T* present = io.out.size() > 1 ? io.out[1].as<T>() : nullptr;  // null when empty
    auto runRow = [&](int64_t row) {
      const int64_t c = row % channels;
      const T* xr = in + row * length;
      const T* pr = past ? past + row * carry : nullptr;
      // position p of the padded row: the past state (or zero) before the input
      auto padded = [&](int64_t p) -> T { return p < carry ? (pr ? pr[p] : T(0)) : xr[p - carry]; };
      const T* wr = w + c * kernel;
      T* yr = out + row * length;
      for (int64_t t = 0; t < length; ++t) {
        T acc = bias ? bias[c] : T(0);
        for (int64_t k = 0; k < kernel; ++k) acc += wr[k] * padded(t + k);
        yr[t] = silu ? acc / (T(1) + std::exp(-acc)) : acc;
      }
      if (present)
        for (int64_t p = 0; p < carry; ++p) present[row * carry + p] = padded(length + p);
    };
    io.pool->parallelFor(batch * channels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) runRow(row);
    });
  }, "CausalConvWithState");
}

}  // namespace

void registerCausalConvOps(OpRegistry& r) {
  OpDef d;
  d.name = "CausalConvWithState";
  d.infer = inferCausalConv;
  d.ref = refCausalConv;
  d.minOpset = 27;
  r.add(d);
}

}  // namespace kiln
