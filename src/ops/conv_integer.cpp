// Op definition for ConvInteger (opset 10): the integer convolution of (x - x_zero_point) and
// (w - w_zero_point) with Conv's attributes (pads / auto_pad, strides, dilations, group), int32
// accumulation and output. x and w are int8 or uint8; x_zero_point is a scalar, w_zero_point a
// scalar or one per output channel; both default to 0. Padding holds x_zero_point, so it adds 0.
// Reference kernel (the geometry is Conv's, ops/conv_geometry.h).
#include "ops/conv_geometry.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/quantize.h"

namespace kiln {

namespace {

void requireInt8(const LayerDesc& l, size_t i, const char* what) {
  const DataType t = l.inputs[i].type;
  if (t != DataType::kINT8 && t != DataType::kUINT8) opError(l, std::string(what) + " must be int8 or uint8, got " + toString(t));
}

void inferConvInteger(LayerDesc& l) {
  requireInputs(l, 2, 4);
  const Dims &x = l.inputs[0].dims, &w = l.inputs[1].dims;
  spatialRankOf(l, x);
  requireInt8(l, 0, "x");
  requireInt8(l, 1, "w");
  if (w.size() != x.size()) opError(l, "w " + toString(w) + " must have the rank of x " + toString(x));
  const int64_t group = l.attrs->getInt("group", 1);
  if (group < 1) opError(l, "invalid group " + std::to_string(group));
  if (x[1] >= 0 && w[1] >= 0 && w[1] * group != x[1])
    opError(l, "w " + toString(w) + " expects " + std::to_string(w[1] * group) + " input channels, x has " + std::to_string(x[1]));
  if (w[0] >= 0 && w[0] % group != 0) opError(l, "output channels are not divisible by group");
  if (l.present(2)) {
    if (l.inputs[2].type != l.inputs[0].type) opError(l, "x_zero_point must have x's type");
    if (volume(l.inputs[2].dims) != 1) opError(l, "x_zero_point must be a scalar, got " + toString(l.inputs[2].dims));
  }
  if (l.present(3)) {
    const Dims& z = l.inputs[3].dims;
    if (l.inputs[3].type != l.inputs[1].type) opError(l, "w_zero_point must have w's type");
    const bool scalar = z.empty() || (z.size() == 1 && z[0] == 1);
    if (!scalar && !(z.size() == 1 && (z[0] < 0 || w[0] < 0 || z[0] == w[0])))
      opError(l, "w_zero_point must be a scalar or one value per output channel, got " + toString(z));
  }
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  if (l.attrs->has("kernel_shape")) kernel = l.attrs->getInts("kernel_shape");
  if (kernel.size() != x.size() - 2) opError(l, "kernel_shape must have one value per spatial axis");
  Dims out{x[0], w[0]};
  bool known = true;
  for (int64_t k : kernel) known = known && k >= 0;
  if (known) {
    const Window win = convWindow(l, x, kernel);
    out.insert(out.end(), win.out.begin(), win.out.end());
  } else {
    out.resize(x.size(), -1);
  }
  setOutput(l, 0, DataType::kINT32, out);
}

void refConvInteger(const LayerDesc& l, const KernelIO& io) {
  const ConvProblem p = resolveConv(l);
  const Window3& w = p.win;
  const TensorView &x = io.in[0], &wt = io.in[1];
  const bool hasXZero = io.in.size() > 2 && io.in[2].data, hasWZero = io.in.size() > 3 && io.in[3].data;
  const int64_t xZero = hasXZero ? quantReadInt(io.in[2], 0) : 0;
  auto wZero = [&](int64_t m) { return hasWZero ? quantReadInt(io.in[3], io.in[3].count == 1 ? 0 : m) : 0; };
  int32_t* y = io.out[0].as<int32_t>();
  const int64_t cg = p.inChannelsPerGroup(), mg = p.outChannelsPerGroup();
  const int64_t inSize = w.inSize(), outSize = w.outSize(), kSize = w.kernelSize();
  io.pool->parallelFor(p.batch * p.outChannels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nm = begin; nm < end; ++nm) {
      const int64_t n = nm / p.outChannels, m = nm % p.outChannels, g = m / mg, wz = wZero(m);
      const int64_t xBase = (n * p.inChannels + g * cg) * inSize, wBase = m * cg * kSize;
      for (int64_t od = 0; od < w.out[0]; ++od)
        for (int64_t oh = 0; oh < w.out[1]; ++oh)
          for (int64_t ow = 0; ow < w.out[2]; ++ow) {
            int64_t acc = 0;
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t kd = 0; kd < w.kernel[0]; ++kd) {
                const int64_t id = od * w.stride[0] - w.padBegin[0] + kd * w.dilation[0];
                if (id < 0 || id >= w.in[0]) continue;
                for (int64_t kh = 0; kh < w.kernel[1]; ++kh) {
                  const int64_t ih = oh * w.stride[1] - w.padBegin[1] + kh * w.dilation[1];
                  if (ih < 0 || ih >= w.in[1]) continue;
                  for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
                    const int64_t iw = ow * w.stride[2] - w.padBegin[2] + kw * w.dilation[2];
                    if (iw < 0 || iw >= w.in[2]) continue;
                    const int64_t xv = quantReadInt(x, xBase + c * inSize + (id * w.in[1] + ih) * w.in[2] + iw) - xZero;
                    const int64_t wv = quantReadInt(wt, wBase + c * kSize + (kd * w.kernel[1] + kh) * w.kernel[2] + kw) - wz;
                    acc += xv * wv;
                  }
                }
              }
            y[nm * outSize + (od * w.out[1] + oh) * w.out[2] + ow] = static_cast<int32_t>(acc);
          }
    }
  });
}

}  // namespace

void registerConvIntegerOps(OpRegistry& r) {
  OpDef d;
  d.name = "ConvInteger";
  d.infer = inferConvInteger;
  d.ref = refConvInteger;
  d.minOpset = 10;
  r.add(d);
}

}  // namespace kiln
