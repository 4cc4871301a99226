// Op definitions for Conv and ConvTranspose: shape/type inference and naive reference kernels.
// Both support 1..3 spatial axes, groups, dilations, every auto_pad mode and the fused forms
// (kiln_activation; Conv's 4th residual input).
#include <string>

#include "ops/activation.h"
#include "ops/conv_geometry.h"
#include "ops/fused_attrs.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

constexpr int64_t kMaxGroup = int64_t(1) << 30;

void requireFloatType(const LayerDesc& l, size_t i) {
  DataType t = l.inputs[i].type;
  if (!isFloat(t))
    throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): input " + std::to_string(i) + " has type " +
                           toString(t) + "; only floating-point types are supported");
  if (t != l.inputs[0].type) opError(l, "input " + std::to_string(i) + " type differs from X's type");
}

int64_t groupOf(const LayerDesc& l) {
  int64_t g = l.attrs->getInt("group", 1);
  if (g < 1 || g > kMaxGroup) opError(l, "invalid group " + std::to_string(g));
  return g;
}

//! Spatial kernel size: from W's dims, or kernel_shape where W's dims are unknown. -1 if neither.
std::vector<int64_t> kernelOf(const LayerDesc& l, const Dims& w) {
  std::vector<int64_t> k(w.begin() + 2, w.end());
  if (l.attrs->has("kernel_shape")) {
    std::vector<int64_t> ks = l.attrs->getInts("kernel_shape");
    if (ks.size() != k.size()) opError(l, "kernel_shape " + toString(Dims(ks)) + " does not match W " + toString(w));
    for (size_t i = 0; i < k.size(); ++i) {
      if (k[i] >= 0 && ks[i] != k[i]) opError(l, "kernel_shape " + toString(Dims(ks)) + " does not match W " + toString(w));
      k[i] = ks[i];
    }
  }
  return k;
}

bool allKnown(const std::vector<int64_t>& v) {
  for (int64_t x : v)
    if (x < 0) return false;
  return true;
}

//! Checks the optional bias input (index 2): rank 1 with `channels` entries.
void checkBias(const LayerDesc& l, int64_t channels) {
  if (!l.present(2)) return;
  requireFloatType(l, 2);
  const Dims& b = l.inputs[2].dims;
  if (b.size() != 1 || (b[0] >= 0 && channels >= 0 && b[0] != channels))
    opError(l, "bias B " + toString(b) + " must be a vector of " + std::to_string(channels) + " elements");
}

//! Output dims [N, channels, spatial...], spatial -1 when the kernel is unknown.
Dims outputDims(const Dims& x, int64_t channels, const Window* w) {
  Dims out{x[0], channels};
  for (size_t i = 2; i < x.size(); ++i) out.push_back(w ? w->out[i - 2] : -1);
  return out;
}

void checkWeightsRank(const LayerDesc& l) {
  const Dims& x = l.inputs[0].dims;
  const Dims& w = l.inputs[1].dims;
  if (w.size() != x.size()) opError(l, "W " + toString(w) + " must have the rank of X " + toString(x));
}

void inferConv(LayerDesc& l) {
  requireInputs(l, 2, 4);
  const Dims& x = l.inputs[0].dims;
  const Dims& w = l.inputs[1].dims;
  spatialRankOf(l, x);
  checkWeightsRank(l);
  requireFloatType(l, 0);
  requireFloatType(l, 1);
  int64_t group = groupOf(l);
  int64_t c = x[1], m = w[0];
  if (c >= 0 && c % group != 0) opError(l, "input channels " + std::to_string(c) + " are not divisible by group " + std::to_string(group));
  if (c >= 0 && w[1] >= 0 && w[1] * group != c)
    opError(l, "W " + toString(w) + " expects " + std::to_string(w[1] * group) + " input channels, X has " + std::to_string(c));
  if (m >= 0 && m % group != 0) opError(l, "output channels " + std::to_string(m) + " are not divisible by group " + std::to_string(group));
  checkBias(l, m);
  std::vector<int64_t> k = kernelOf(l, w);
  Dims out;
  if (allKnown(k)) {
    Window win = convWindow(l, x, k);
    out = outputDims(x, m, &win);
  } else {
    out = outputDims(x, m, nullptr);
  }
  if (l.present(3)) {
    requireFloatType(l, 3);
    const Dims& r = l.inputs[3].dims;
    bool ok = r.size() == out.size();
    for (size_t i = 0; ok && i < r.size(); ++i) ok = r[i] < 0 || out[i] < 0 || r[i] == out[i];
    if (!ok) opError(l, "residual input " + toString(r) + " must have the output's shape " + toString(out));
  }
  setOutput(l, 0, l.inputs[0].type, out);
}

void inferConvTranspose(LayerDesc& l) {
  requireInputs(l, 2, 3);
  const Dims& x = l.inputs[0].dims;
  const Dims& w = l.inputs[1].dims;
  spatialRankOf(l, x);
  checkWeightsRank(l);
  requireFloatType(l, 0);
  requireFloatType(l, 1);
  int64_t group = groupOf(l);
  int64_t c = x[1];
  if (c >= 0 && c % group != 0) opError(l, "input channels " + std::to_string(c) + " are not divisible by group " + std::to_string(group));
  if (c >= 0 && w[0] >= 0 && w[0] != c)
    opError(l, "W " + toString(w) + " expects " + std::to_string(w[0]) + " input channels, X has " + std::to_string(c));
  int64_t m = w[1] < 0 ? -1 : w[1] * group;
  checkBias(l, m);
  std::vector<int64_t> k = kernelOf(l, w);
  if (allKnown(k)) {
    Window win = convTransposeWindow(l, x, k);
    setOutput(l, 0, l.inputs[0].type, outputDims(x, m, &win));
  } else {
    setOutput(l, 0, l.inputs[0].type, outputDims(x, m, nullptr));
  }
}

template <typename T>
T finish(double acc, const Activation& act) {
  if (act.kind == ActKind::kNone) return static_cast<T>(acc);
  return static_cast<T>(act(static_cast<float>(acc)));
}

//! Y[n, m] = act(sum_{c in group, k} X[n, c, o*s - pb + k*d] * W[m, c, k] + B[m] + R[n, m]).
template <typename T>
void convRef(const LayerDesc& l, const KernelIO& io) {
  const ConvProblem p = resolveConv(l);
  const Window3& w = p.win;
  const T* x = io.in[0].as<T>();
  const T* wt = io.in[1].as<T>();
  const T* bias = io.in.size() > 2 ? io.in[2].as<T>() : nullptr;
  const T* res = io.in.size() > 3 ? io.in[3].as<T>() : nullptr;
  T* y = io.out[0].as<T>();
  const Activation act = fusedActivation(*l.attrs);
  const int64_t cg = p.inChannelsPerGroup(), mg = p.outChannelsPerGroup();
  const int64_t inSize = w.inSize(), outSize = w.outSize(), kSize = w.kernelSize();
  io.pool->parallelFor(p.batch * p.outChannels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nm = begin; nm < end; ++nm) {
      const int64_t n = nm / p.outChannels, m = nm % p.outChannels, g = m / mg;
      const T* xg = x + (n * p.inChannels + g * cg) * inSize;
      const T* wm = wt + m * cg * kSize;
      for (int64_t od = 0; od < w.out[0]; ++od)
        for (int64_t oh = 0; oh < w.out[1]; ++oh)
          for (int64_t ow = 0; ow < w.out[2]; ++ow) {
            double acc = bias ? static_cast<double>(bias[m]) : 0.0;
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t kd = 0; kd < w.kernel[0]; ++kd) {
                int64_t id = od * w.stride[0] - w.padBegin[0] + kd * w.dilation[0];
                if (id < 0 || id >= w.in[0]) continue;
                for (int64_t kh = 0; kh < w.kernel[1]; ++kh) {
                  int64_t ih = oh * w.stride[1] - w.padBegin[1] + kh * w.dilation[1];
                  if (ih < 0 || ih >= w.in[1]) continue;
                  for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
                    int64_t iw = ow * w.stride[2] - w.padBegin[2] + kw * w.dilation[2];
                    if (iw < 0 || iw >= w.in[2]) continue;
                    acc += static_cast<double>(xg[c * inSize + (id * w.in[1] + ih) * w.in[2] + iw]) *
                           static_cast<double>(wm[c * kSize + (kd * w.kernel[1] + kh) * w.kernel[2] + kw]);
                  }
                }
              }
            int64_t o = (od * w.out[1] + oh) * w.out[2] + ow;
            if (res) acc += static_cast<double>(res[nm * outSize + o]);
            y[nm * outSize + o] = finish<T>(acc, act);
          }
    }
  });
}

//! Gather form of the transposed convolution: output o receives X[i] * W[k] where
//! o = i*s - pb + k*d, i.e. i = (o + pb - k*d) / s when that division is exact.
template <typename T>
void convTransposeRef(const LayerDesc& l, const KernelIO& io) {
  const ConvProblem p = resolveConvTranspose(l);
  const Window3& w = p.win;
  const T* x = io.in[0].as<T>();
  const T* wt = io.in[1].as<T>();
  const T* bias = io.in.size() > 2 ? io.in[2].as<T>() : nullptr;
  T* y = io.out[0].as<T>();
  const Activation act = fusedActivation(*l.attrs);
  const int64_t cg = p.inChannelsPerGroup(), mg = p.outChannelsPerGroup();
  const int64_t inSize = w.inSize(), outSize = w.outSize(), kSize = w.kernelSize();
  // Input index along one axis for output o and kernel tap k, or -1 when no input maps there.
  auto source = [&](int axis, int64_t o, int64_t k) -> int64_t {
    int64_t num = o + w.padBegin[axis] - k * w.dilation[axis];
    if (num < 0 || num % w.stride[axis] != 0) return -1;
    int64_t i = num / w.stride[axis];
    return i < w.in[axis] ? i : -1;
  };
  io.pool->parallelFor(p.batch * p.outChannels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nm = begin; nm < end; ++nm) {
      const int64_t n = nm / p.outChannels, m = nm % p.outChannels, g = m / mg, mInGroup = m % mg;
      const T* xg = x + (n * p.inChannels + g * cg) * inSize;
      for (int64_t od = 0; od < w.out[0]; ++od)
        for (int64_t oh = 0; oh < w.out[1]; ++oh)
          for (int64_t ow = 0; ow < w.out[2]; ++ow) {
            double acc = bias ? static_cast<double>(bias[m]) : 0.0;
            for (int64_t kd = 0; kd < w.kernel[0]; ++kd) {
              int64_t id = source(0, od, kd);
              if (id < 0) continue;
              for (int64_t kh = 0; kh < w.kernel[1]; ++kh) {
                int64_t ih = source(1, oh, kh);
                if (ih < 0) continue;
                for (int64_t kw = 0; kw < w.kernel[2]; ++kw) {
                  int64_t iw = source(2, ow, kw);
                  if (iw < 0) continue;
                  int64_t xOff = (id * w.in[1] + ih) * w.in[2] + iw;
                  int64_t kOff = (kd * w.kernel[1] + kh) * w.kernel[2] + kw;
                  for (int64_t c = 0; c < cg; ++c)
                    acc += static_cast<double>(xg[c * inSize + xOff]) *
                           static_cast<double>(wt[((g * cg + c) * mg + mInGroup) * kSize + kOff]);
                }
              }
            }
            y[nm * outSize + (od * w.out[1] + oh) * w.out[2] + ow] = finish<T>(acc, act);
          }
    }
  });
}

void convRefEntry(const LayerDesc& l, const KernelIO& io) {
  dispatchType<kRefFloatTypes>(l.inputs[0].type, [&](auto tag) { convRef<decltype(tag)>(l, io); }, "the Conv reference kernel");
}

void convTransposeRefEntry(const LayerDesc& l, const KernelIO& io) {
  dispatchType<kRefFloatTypes>(l.inputs[0].type, [&](auto tag) { convTransposeRef<decltype(tag)>(l, io); },
                               "the ConvTranspose reference kernel");
}

}  // namespace

void registerConvOps(OpRegistry& r) {
  OpDef conv;
  conv.name = "Conv";
  conv.infer = inferConv;
  conv.ref = convRefEntry;
  r.add(conv);

  OpDef convT;
  convT.name = "ConvTranspose";
  convT.infer = inferConvTranspose;
  convT.ref = convTransposeRefEntry;
  r.add(convT);
}

}  // namespace kiln
