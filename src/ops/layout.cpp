// kiln-internal op "LayoutConvert": copies a 4-D tensor from one physical layout to another
// (kiln_layout_in -> kiln_layout_out; ops/conv_layout.h): float32 between "nchw",
// "nChw8c" and "nChw16c" (the CPU layout pass, builder/passes/cpu_layout.cpp), any element type
// between "nchw" and "nhwc" (the GPU layout pass, builder/passes/gpu_layout.cpp). Its dims are
// logical NCHW on both sides: only the byte order changes.

#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

//! The block of X (out = false) or Y; LayoutConvert needs both attributes.
int64_t blockOf(const LayerDesc& l, bool out) {
  const char* name = out ? attr::kLayoutOut : attr::kLayoutIn;
  if (!l.attrs->has(name)) opError(l, std::string("missing attribute ") + name);
  int64_t b = out ? outLayoutBlock(l) : inLayoutBlock(l);
  if (b == 0) opError(l, std::string("unknown layout in ") + name + " (expected nchw, nChw8c, nChw16c or nhwc)");
  return b;
}

void inferLayoutConvert(LayerDesc& l) {
  requireInputs(l, 1, 1);
  const TensorDesc& x = l.inputs[0];
  const int64_t fromB = blockOf(l, false), toB = blockOf(l, true);
  if (fromB == kNhwcBlock || toB == kNhwcBlock) {
    if (x.dims.size() != 4) opError(l, "expects a 4-D NCHW tensor, got dims " + toString(x.dims));
    if (fromB + toB != kNhwcBlock + 1) opError(l, "converts between nchw and nhwc only");
    setOutput(l, 0, x.type, x.dims);
    return;
  }
  if (x.type != DataType::kFLOAT)
    throw UnsupportedError("layer '" + l.name + "' (LayoutConvert): only float32 tensors are converted, got " +
                           toString(x.type));
  if (x.dims.size() != 4) opError(l, "expects a 4-D NCHW tensor, got dims " + toString(x.dims));
  const int64_t from = blockOf(l, false), to = blockOf(l, true);
  const int64_t c = x.dims[1];
  if (c >= 0 && (c % from != 0 || c % to != 0))
    opError(l, std::to_string(c) + " channels are not a multiple of the channel block of " +
                   layoutName(c % from != 0 ? from : to));
  setOutput(l, 0, x.type, x.dims);
}

void refLayoutConvert(const LayerDesc& l, const KernelIO& io) {
  const Dims& d = l.inputs[0].dims;
  const int64_t fromB = blockOf(l, false), toB = blockOf(l, true);
  if (fromB == kNhwcBlock || toB == kNhwcBlock) {
    const int64_t hw = d[2] * d[3];
    const size_t elem = elementSize(l.inputs[0].type);
    if (toB == kNhwcBlock) transposeInner(io.in[0].data, io.out[0].data, d[0], d[1], hw, elem);
    else transposeInner(io.in[0].data, io.out[0].data, d[0], hw, d[1], elem);
    return;
  }
  convertLayout(io.in[0].as<const float>(), blockOf(l, false), io.out[0].as<float>(),
                     blockOf(l, true), d[0], d[1], d[2] * d[3], io.pool);
}

}  // namespace

void registerLayoutOps(OpRegistry& r) {
  OpDef d;
  d.name = "LayoutConvert";
  d.infer = inferLayoutConvert;
  d.ref = refLayoutConvert;
  d.onnx = false;
  d.anyType = true;  // moves elements of any type (float16 on the GPU): no float32 casts around it
  r.add(d);
}

}  // namespace kiln
