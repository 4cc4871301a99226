// Op definitions for QLinearConv and QLinearMatMul (ONNX, plus kiln's extensions listed in
// ops/qlinear.h): shape/type inference and exact integer reference kernels. The accumulator is
// int64 (the products of int8 values minus zero points, summed, plus the int32 bias); the
// epilogue is QLinearParams::output, shared with the optimized tactics.
#include "ops/qlinear.h"

#include <cmath>
#include <string>

#include "ops/conv_geometry.h"
#include "ops/fused_attrs.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/quantize.h"

namespace kiln {

namespace {

bool isInt8(DataType t) { return t == DataType::kINT8 || t == DataType::kUINT8; }

void requireInt8(const LayerDesc& l, size_t i, const char* what) {
  if (!isInt8(l.inputs[i].type))
    throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): " + what + " has type " + toString(l.inputs[i].type) +
                           "; only int8 and uint8 are supported");
}

//! Checks a scale / zero point input's count (1, or `n` when `perChannel`), its type, and a known
//! scale's values (positive and finite).
void checkScalar(const LayerDesc& l, size_t i, const char* what, int64_t n, bool perChannel, DataType zeroType) {
  if (!l.present(i)) return;
  const TensorDesc& t = l.inputs[i];
  int64_t count = 1;
  for (int64_t d : t.dims) count = (d < 0 || count < 0) ? -1 : count * d;
  if (t.dims.size() > 1 || (count >= 0 && count != 1 && !(perChannel && (n < 0 || count == n))))
    opError(l, std::string(what) + " must be a scalar" + (perChannel ? " or have " + std::to_string(n) + " values" : std::string()) +
                   ", got " + toString(t.dims));
  if (zeroType == DataType::kFLOAT) {
    if (!isFloatType(t.type)) opError(l, std::string(what) + " must be a float tensor, got " + toString(t.type));
    if (t.value.valid())
      for (int64_t k = 0; k < t.value.count(); ++k) {
        double s = t.value.getDouble(k);
        if (!(s > 0.0) || !std::isfinite(s)) opError(l, std::string(what) + " must be positive and finite, got " + std::to_string(s));
      }
  } else if (t.type != zeroType) {
    opError(l, std::string(what) + " has type " + toString(t.type) + ", its tensor " + toString(zeroType));
  }
}

DataType outputType(const LayerDesc& l) {
  if (!l.present(kQYScale)) {
    switch (l.attrs->getInt(attr::kFloatOutType, 1)) {
      case 1: return DataType::kFLOAT;
      case 10: return DataType::kHALF;
      case 16: return DataType::kBF16;
      default: opError(l, std::string(attr::kFloatOutType) + " must be 1, 10 or 16");
    }
  }
  return l.present(kQYZero) ? l.inputs[kQYZero].type : DataType::kUINT8;
}

//! The checks both ops share; `channels` = output channels, `rows` = per-row scale count (-1: none).
void inferCommon(const LayerDesc& l, int64_t channels, int64_t rows) {
  requireInputs(l, 5, l.op == "QLinearConv" ? 12 : 9);  // QLinearConv: kiln's residual (9..11)
  requireInt8(l, kQX, "x");
  requireInt8(l, kQW, "w");
  checkScalar(l, kQXScale, "x_scale", rows, rows >= 0, DataType::kFLOAT);
  checkScalar(l, kQXZero, "x_zero_point", rows, rows >= 0, l.inputs[kQX].type);
  checkScalar(l, kQWScale, "w_scale", channels, true, DataType::kFLOAT);
  checkScalar(l, kQWZero, "w_zero_point", channels, true, l.inputs[kQW].type);
  checkScalar(l, kQYScale, "y_scale", 1, false, DataType::kFLOAT);
  if (l.present(kQYZero)) {
    if (!l.present(kQYScale)) opError(l, std::string("y_zero_point without y_scale"));
    requireInt8(l, kQYZero, "y_zero_point");
    checkScalar(l, kQYZero, "y_zero_point", 1, false, l.inputs[kQYZero].type);
  }
  if (l.present(kQBias)) {
    const TensorDesc& b = l.inputs[kQBias];
    if (b.type != DataType::kINT32) opError(l, std::string("bias must be int32, got ") + toString(b.type));
    if (b.dims.size() != 1 || (b.dims[0] >= 0 && channels >= 0 && b.dims[0] != channels))
      opError(l, "bias " + toString(b.dims) + " must have " + std::to_string(channels) + " values");
  }
  fusedActivation(*l.attrs);  // throws on a malformed one
}

// ---- QLinearConv ----------------------------------------------------------------------------------

void inferQLinearConv(LayerDesc& l) {
  requireInputs(l, 5, 12);
  const Dims& x = l.inputs[kQX].dims;
  const Dims& w = l.inputs[kQW].dims;
  spatialRankOf(l, x);
  if (w.size() != x.size()) opError(l, "w " + toString(w) + " must have the rank of x " + toString(x));
  const int64_t group = l.attrs->getInt("group", 1);
  if (group < 1) opError(l, "invalid group " + std::to_string(group));
  if (x[1] >= 0 && w[1] >= 0 && w[1] * group != x[1])
    opError(l, "w " + toString(w) + " expects " + std::to_string(w[1] * group) + " input channels, x has " + std::to_string(x[1]));
  if (w[0] >= 0 && w[0] % group != 0) opError(l, "output channels are not divisible by group");
  inferCommon(l, w[0], -1);
  Dims out{x[0], w[0]};
  bool known = true;
  for (size_t i = 2; i < w.size(); ++i) known = known && w[i] >= 0;
  if (known) {
    Window win = convWindow(qlinearConvView(l), x, std::vector<int64_t>(w.begin() + 2, w.end()));
    for (int64_t o : win.out) out.push_back(o);
  } else {
    for (size_t i = 2; i < x.size(); ++i) out.push_back(-1);
  }
  if (l.present(kQR)) {  // kiln's residual: Y's shape, int8 / uint8, per-tensor scale and zero point
    requireInt8(l, kQR, "residual");
    if (!l.present(kQRScale)) opError(l, std::string("residual without its scale"));
    checkScalar(l, kQRScale, "residual scale", 1, false, DataType::kFLOAT);
    checkScalar(l, kQRZero, "residual zero point", 1, false, l.inputs[kQR].type);
    if (!l.inputs[kQR].dims.empty() && l.inputs[kQR].dims.size() != out.size()) opError(l, "residual " + toString(l.inputs[kQR].dims) + " must have Y's shape");
    for (size_t i = 0; i < out.size() && i < l.inputs[kQR].dims.size(); ++i)
      if (out[i] >= 0 && l.inputs[kQR].dims[i] >= 0 && out[i] != l.inputs[kQR].dims[i])
        opError(l, "residual " + toString(l.inputs[kQR].dims) + " must have Y's shape " + toString(out));
  } else if (l.present(kQRScale) || l.present(kQRZero)) {
    opError(l, std::string("residual scale or zero point without a residual"));
  }
  setOutput(l, 0, outputType(l), out);
}

void writeOut(const TensorView& y, int64_t i, float v) {
  switch (y.type) {
    case DataType::kINT8: y.as<int8_t>()[i] = static_cast<int8_t>(v); break;
    case DataType::kUINT8: y.as<uint8_t>()[i] = static_cast<uint8_t>(v); break;
    default: quantWriteFloat(y, i, v);  // float32, or the float16 / bfloat16 of kiln_float_out_type
  }
}

void refQLinearConv(const LayerDesc& l, const KernelIO& io) {
  const ConvProblem p = resolveConv(qlinearConvView(l));
  const Window3& w = p.win;
  const QLinearParams q = readQLinearParams(l, io.in, p.outChannels, 1);
  const TensorView &x = io.in[kQX], &wt = io.in[kQW], &y = io.out[0];
  const int64_t cg = p.inChannelsPerGroup(), mg = p.outChannelsPerGroup();
  const int64_t inSize = w.inSize(), outSize = w.outSize(), kSize = w.kernelSize();
  io.pool->parallelFor(p.batch * p.outChannels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nm = begin; nm < end; ++nm) {
      const int64_t n = nm / p.outChannels, m = nm % p.outChannels, g = m / mg;
      const int64_t xBase = (n * p.inChannels + g * cg) * inSize, wBase = m * cg * kSize;
      const int32_t wz = q.wz(m);
      for (int64_t od = 0; od < w.out[0]; ++od)
        for (int64_t oh = 0; oh < w.out[1]; ++oh)
          for (int64_t ow = 0; ow < w.out[2]; ++ow) {
            int64_t acc = q.biasAt(m);
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t kd = 0; kd < w.kernel[0]; ++kd) {
                const int64_t id = od * w.stride[0] - w.padBegin[0] + kd * w.dilation[0];
                if (id < 0 || id >= w.in[0]) continue;  // padding holds x_zero_point: contributes 0
                for (int64_t kh = 0; kh < w.kernel[1]; ++kh) {
                  const int64_t ih = oh * w.stride[1] - w.padBegin[1] + kh * w.dilation[1];
                  if (ih < 0 || ih >= w.in[1]) continue;
                  for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
                    const int64_t iw = ow * w.stride[2] - w.padBegin[2] + kw * w.dilation[2];
                    if (iw < 0 || iw >= w.in[2]) continue;
                    const int64_t xv = quantReadInt(x, xBase + c * inSize + (id * w.in[1] + ih) * w.in[2] + iw) - q.xZero;
                    const int64_t wv = quantReadInt(wt, wBase + c * kSize + (kd * w.kernel[1] + kh) * w.kernel[2] + kw) - wz;
                    acc += xv * wv;
                  }
                }
              }
            const int64_t at = nm * outSize + (od * w.out[1] + oh) * w.out[2] + ow;
            writeOut(y, at, q.output(acc, 0, m, q.residual ? static_cast<int32_t>(quantReadInt(io.in[kQR], at)) : 0));
          }
    }
  });
}

// ---- QLinearMatMul --------------------------------------------------------------------------------

void inferQLinearMatMul(LayerDesc& l) {
  requireInputs(l, 5, 9);
  const Dims& a = l.inputs[kQX].dims;
  const Dims& b = l.inputs[kQW].dims;
  if (a.size() < 2 || b.size() < 2) opError(l, "a and b must have rank >= 2, got " + toString(a) + " and " + toString(b));
  const int64_t M = a[a.size() - 2], K = a.back(), N = b.back();
  if (K >= 0 && b[b.size() - 2] >= 0 && b[b.size() - 2] != K)
    opError(l, "inner dimensions differ: " + toString(a) + " and " + toString(b));
  inferCommon(l, N, M);
  Dims out = broadcastDims(l, Dims(a.begin(), a.end() - 2), Dims(b.begin(), b.end() - 2));
  out.push_back(M);
  out.push_back(N);
  setOutput(l, 0, outputType(l), out);
}

void refQLinearMatMul(const LayerDesc& l, const KernelIO& io) {
  const TensorView &a = io.in[kQX], &b = io.in[kQW], &y = io.out[0];
  const int64_t M = a.dims[a.dims.size() - 2], K = a.dims.back(), N = b.dims.back();
  const QLinearParams q = readQLinearParams(l, io.in, N, M);
  const Dims aBatch(a.dims.begin(), a.dims.end() - 2), bBatch(b.dims.begin(), b.dims.end() - 2);
  const Dims batch(y.dims.begin(), y.dims.end() - 2);
  const std::vector<int64_t> aStride = broadcastStrides(aBatch, batch), bStride = broadcastStrides(bBatch, batch);
  const int64_t batches = volume(batch);
  io.pool->parallelFor(batches * M, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bm = begin; bm < end; ++bm) {
      const int64_t bt = bm / M, m = bm % M;
      int64_t aMat = 0, bMat = 0, rest = bt;
      for (size_t d = batch.size(); d-- > 0;) {
        aMat += (rest % batch[d]) * aStride[d];
        bMat += (rest % batch[d]) * bStride[d];
        rest /= batch[d];
      }
      for (int64_t n = 0; n < N; ++n) {
        int64_t acc = q.biasAt(n);
        const int32_t wz = q.wz(n);
        for (int64_t k = 0; k < K; ++k)
          acc += (quantReadInt(a, (aMat * M + m) * K + k) - q.xZero) * (quantReadInt(b, (bMat * K + k) * N + n) - wz);
        writeOut(y, (bt * M + m) * N + n, q.output(acc, m, n));
      }
    }
  });
}

std::vector<float> readScales(const TensorView& v) {
  std::vector<float> s(static_cast<size_t>(v.count));
  for (int64_t i = 0; i < v.count; ++i) s[i] = quantReadFloat(v, i);
  return s;
}

}  // namespace

QLinearParams readQLinearParams(const LayerDesc& l, const std::vector<TensorView>& in, int64_t channels, int64_t rows) {
  auto has = [&](int i) { return static_cast<size_t>(i) < in.size() && in[i].data; };
  if (!has(kQXScale) || !has(kQWScale)) opError(l, "x_scale and w_scale are required");
  QLinearParams q;
  q.xScale = readScales(in[kQXScale]);
  q.wScale = readScales(in[kQWScale]);
  if (q.xScale.size() != 1 && static_cast<int64_t>(q.xScale.size()) != rows) opError(l, "x_scale has the wrong count");
  if (q.wScale.size() != 1 && static_cast<int64_t>(q.wScale.size()) != channels) opError(l, "w_scale has the wrong count");
  if (has(kQXZero)) {
    for (int64_t i = 1; i < in[kQXZero].count; ++i)
      if (quantReadInt(in[kQXZero], i) != quantReadInt(in[kQXZero], 0))
        throw UnsupportedError("layer '" + l.name + "': per-row zero points of x are not supported");
    q.xZero = static_cast<int32_t>(quantReadInt(in[kQXZero], 0));
  }
  q.wZero = {0};
  if (has(kQWZero)) {
    q.wZero.resize(static_cast<size_t>(in[kQWZero].count));
    for (int64_t i = 0; i < in[kQWZero].count; ++i) q.wZero[i] = static_cast<int32_t>(quantReadInt(in[kQWZero], i));
    if (q.wZero.size() != 1 && static_cast<int64_t>(q.wZero.size()) != channels) opError(l, "w_zero_point has the wrong count");
  }
  q.floatOut = !has(kQYScale);
  if (!q.floatOut) {
    q.yScale = quantReadFloat(in[kQYScale], 0);
    q.yZero = has(kQYZero) ? static_cast<int32_t>(quantReadInt(in[kQYZero], 0)) : 0;
    quantRange(has(kQYZero) ? in[kQYZero].type : DataType::kUINT8, q.lo, q.hi);
  }
  for (float s : q.xScale)
    if (!(s > 0.f) || !std::isfinite(s)) opError(l, "x_scale must be positive and finite");
  for (float s : q.wScale)
    if (!(s > 0.f) || !std::isfinite(s)) opError(l, "w_scale must be positive and finite");
  if (!q.floatOut && (!(q.yScale > 0.f) || !std::isfinite(q.yScale))) opError(l, "y_scale must be positive and finite");
  if (l.present(kQR)) {  // R itself is run-time data: present in the desc, absent from constant views
    if (!has(kQRScale)) opError(l, "residual without its scale");
    q.residual = true;
    q.rScale = quantReadFloat(in[kQRScale], 0);
    q.rZero = has(kQRZero) ? static_cast<int32_t>(quantReadInt(in[kQRZero], 0)) : 0;
    if (!(q.rScale > 0.f) || !std::isfinite(q.rScale)) opError(l, "residual scale must be positive and finite");
  }
  if (has(kQBias)) {
    if (in[kQBias].count != channels) opError(l, "bias has the wrong count");
    q.bias.assign(in[kQBias].as<const int32_t>(), in[kQBias].as<const int32_t>() + channels);
  }
  q.act = fusedActivation(*l.attrs);
  return q;
}

LayerDesc qlinearConvView(const LayerDesc& l) {
  LayerDesc c;
  c.name = l.name;
  c.op = "Conv";
  c.attrs = l.attrs;
  c.inputs = {l.inputs[kQX], l.inputs[kQW]};
  c.inputPresent = {true, true};
  return c;
}

std::vector<TensorView> constantInputViews(const LayerDesc& l) {
  std::vector<TensorView> v(l.inputs.size());
  for (size_t i = 0; i < l.inputs.size(); ++i) {
    const HostTensor& t = l.inputs[i].value;
    if (!l.present(i) || !t.valid()) continue;
    v[i].data = const_cast<void*>(t.data());
    v[i].type = t.type();
    v[i].dims = t.dims();
    v[i].count = t.count();
  }
  return v;
}

bool qlinearScalarsConstant(const LayerDesc& l) {
  for (int i : {kQXScale, kQXZero, kQWScale, kQWZero, kQYScale, kQYZero, kQBias, kQRScale, kQRZero})
    if (l.present(i) && !l.inputs[i].value.valid()) return false;
  return true;
}

void registerQLinearOps(OpRegistry& r) {
  OpDef conv;
  conv.name = "QLinearConv";
  conv.infer = inferQLinearConv;
  conv.ref = refQLinearConv;
  conv.anyType = true;  // integer in and out; float32 scales (float16 scales read as they are)
  conv.minOpset = 10;
  r.add(conv);
  OpDef mm;
  mm.name = "QLinearMatMul";
  mm.infer = inferQLinearMatMul;
  mm.ref = refQLinearMatMul;
  mm.anyType = true;
  mm.minOpset = 10;
  r.add(mm);
}

}  // namespace kiln
