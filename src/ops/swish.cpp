// Op definitions for Swish (opset 24: y = x * sigmoid(alpha * x)) and SwiGLU (opset 28:
// y = Swish_alpha(A) * B, A and B of one shape, no broadcasting). Reference kernels in float32 /
// float64; the builder computes float16 / bfloat16 tensors in float32 around them.
#include <cmath>

#include "core/type_dispatch.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerSwishOps(OpRegistry& r);  // called from elementwise.cpp

namespace {

void requireFloat(const LayerDesc& l, size_t i) {
  if (!isFloat(l.inputs[i].type)) opError(l, std::string("input must be a float type, got ") + toString(l.inputs[i].type));
}

void inferSwish(LayerDesc& l) {
  requireInputs(l, 1, 1);
  requireFloat(l, 0);
  setOutput(l, 0, l.inputs[0].type, l.inputs[0].dims);
}

void inferSwiGlu(LayerDesc& l) {
  requireInputs(l, 2, 2);
  requireFloat(l, 0);
  if (l.inputs[1].type != l.inputs[0].type) opError(l, "A and B must have the same type");
  const Dims &a = l.inputs[0].dims, &b = l.inputs[1].dims;
  bool same = a.size() == b.size();
  for (size_t k = 0; same && k < a.size(); ++k) same = a[k] < 0 || b[k] < 0 || a[k] == b[k];
  if (!same) opError(l, "A " + toString(a) + " and B " + toString(b) + " must have the same shape");
  setOutput(l, 0, l.inputs[0].type, a);
}

// gate * sigmoid(alpha * gate) * value (value = 1 for Swish), in the tensor's own precision.
void swishKernel(const LayerDesc& l, const KernelIO& io) {
  const double alpha = l.attrs->getFloat("alpha", 1.0f);
  const bool gated = io.in.size() > 1;
  dispatchType<kRefFloatTypes>(io.in[0].type, [&](auto tag) {
    using T = decltype(tag);
    const T* a = io.in[0].as<const T>();
    const T* b = gated ? io.in[1].as<const T>() : nullptr;
    T* y = io.out[0].as<T>();
    const T al = static_cast<T>(alpha);
    for (int64_t i = 0; i < io.out[0].count; ++i) {
      const T s = a[i] / (T(1) + std::exp(-al * a[i]));
      y[i] = gated ? s * b[i] : s;
    }
  }, l.op.c_str());
}

}  // namespace

void registerSwishOps(OpRegistry& r) {
  OpDef swish;
  swish.name = "Swish";
  swish.infer = inferSwish;
  swish.ref = swishKernel;
  swish.minOpset = 24;
  r.add(swish);
  OpDef glu;
  glu.name = "SwiGLU";
  glu.infer = inferSwiGlu;
  glu.ref = swishKernel;
  glu.minOpset = 28;
  r.add(glu);
}

}  // namespace kiln
