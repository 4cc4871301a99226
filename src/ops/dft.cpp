// Op definitions for the Fourier transforms: DFT (opsets 17-20) and STFT (opset 17). Complex
// tensors are real tensors whose last axis is 2 (real, imaginary); a last axis of 1 is a real
// signal. Both run the mixed-radix FFT of ops/fft.h: forward transforms in float64, inverse ones in
// the tensor's precision, as numpy.fft (the ONNX reference) computes complex64 data; the node tests'
// expected values carry that rounding (float32 noise where the exact inverse is 0, atol 1e-7).
// float16 / bfloat16 tensors are computed in float32 around them.
//   DFT(input, dft_length?, axis?): along `axis` (default -2, never the complex axis), the
//     signal zero-padded or cut to dft_length (default: the axis' length; 2 (len - 1) for an
//     inverse one-sided transform):
//     forward        X[k] = sum_j x[j] e^{-2 pi i j k / n}, k < n (n / 2 + 1 when onesided)
//     inverse        x[t] = 1/n sum_k X[k] e^{+2 pi i k t / n} (complex output)
//     inverse, onesided: the real signal of n points whose spectrum's first n / 2 + 1 bins are the
//       input's (Hermitian symmetry; the imaginary parts of bin 0 and of bin n / 2 are ignored), as
//       numpy.fft.irfft; the output's last axis is 1. Computed as the inverse complex transform of
//       the spectrum completed by symmetry.
//   Opsets 17-19 take `axis` as an attribute (default 1); normalize makes it the input.
//   STFT(signal (B, L, 1|2), frame_step, window?, frame_length?): frames
//     f = 0 .. (L - frame_length) / frame_step of frame_length points, each multiplied by the
//     window (default ones) and transformed: output (B, frames, bins, 2), bins = frame_length / 2 + 1
//     when onesided (the default) else frame_length.
#include <algorithm>
#include <vector>

#include "ops/fft.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

// A scalar integer input's value, or `dflt` when omitted; -1 when present but not known.
int64_t optionalScalar(const LayerDesc& l, size_t i, const char* what, int64_t dflt) {
  if (!l.present(i)) return dflt;
  const TensorDesc& t = l.inputs[i];
  if (t.type != DataType::kINT32 && t.type != DataType::kINT64) opError(l, std::string(what) + " must be int32 or int64");
  if (!t.dims.empty() && !(t.dims.size() == 1 && t.dims[0] == 1)) opError(l, std::string(what) + " must be a scalar, got " + toString(t.dims));
  return t.value.valid() ? t.value.getInt(0) : -1;
}

// ------------------------------------------------------------------------------------------ DFT

struct DftGeom {
  int64_t axis = 0;      // normalized
  int64_t length = -1;   // n, the transform length (-1: unknown)
  int64_t outLength = -1;
  bool inverse = false, onesided = false;
  bool axisKnown = true;  // false: an axis input computed at run time (then length is unknown too)
};

DftGeom dftGeom(const LayerDesc& l) {
  DftGeom g;
  const Dims& x = l.inputs[0].dims;
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank < 2) opError(l, "input must have rank 2 or more (the last axis is the complex one), got " + toString(x));
  if (x.back() >= 0 && x.back() != 1 && x.back() != 2) opError(l, "the last axis must be 1 (real) or 2 (complex), got " + toString(x));
  g.inverse = l.attrs->getInt("inverse", 0) != 0;
  g.onesided = l.attrs->getInt("onesided", 0) != 0;
  if (l.present(2)) {
    const TensorDesc& a = l.inputs[2];
    if (a.type != DataType::kINT64 || !(a.dims.empty() || (a.dims.size() == 1 && a.dims[0] == 1)))
      opError(l, "axis must be an int64 scalar");
    g.axisKnown = a.value.valid();
  }
  if (!g.axisKnown) return g;  // axis computed at run time: only the rank is known
  const int64_t axis = l.present(2) ? l.inputs[2].value.getInt(0) : -2;
  if (axis < -rank || axis > rank - 2 || axis == -1) opError(l, "axis " + std::to_string(axis) + " must be in [-rank, -2] or [0, rank - 2]");
  g.axis = axis < 0 ? axis + rank : axis;
  const int64_t in = x[g.axis];
  const int64_t dflt = in < 0 ? -1 : (g.inverse && g.onesided ? 2 * (in - 1) : in);
  g.length = optionalScalar(l, 1, "dft_length", dflt);
  if (l.present(1) && l.inputs[1].value.valid() && g.length < 1) opError(l, "dft_length must be positive, got " + std::to_string(g.length));
  if (g.length == 0) opError(l, "the transform length is 0 (an inverse one-sided transform of a length-1 axis needs dft_length)");
  g.outLength = g.length < 0 ? -1 : (g.onesided && !g.inverse ? g.length / 2 + 1 : g.length);
  return g;
}

void inferDft(LayerDesc& l) {
  requireInputs(l, 1, 3);
  if (!isFloat(l.inputs[0].type)) opError(l, std::string("input must be a float type, got ") + toString(l.inputs[0].type));
  const DftGeom g = dftGeom(l);
  Dims out = l.inputs[0].dims;
  if (g.axisKnown) out[g.axis] = g.outLength;
  else out.assign(out.size(), -1);
  out.back() = g.inverse && g.onesided ? 1 : 2;
  setOutput(l, 0, l.inputs[0].type, out);
}

void normalizeDft(Network& net, Layer& layer, int opset) {
  if (opset >= 20) return;
  HostTensor axis(DataType::kINT64, {});
  axis.as<int64_t>()[0] = layer.attrs.getInt("axis", 1);
  layer.attrs.erase("axis");
  if (layer.inputs.size() < 3) layer.inputs.resize(3, nullptr);
  layer.inputs[2] = net.addConstant(net.uniqueName(layer.name + "_axis"), axis);
}

//! The transform of every line of a T tensor, computed in W (T, or double).
template <typename T, typename W>
void dftLines(const DftGeom& g, const KernelIO& io) {
  const Dims &x = io.in[0].dims, &y = io.out[0].dims;
  const int64_t inC = x.back(), outC = y.back(), n = g.length, inLen = x[g.axis], outLen = y[g.axis];
  const int64_t outer = volume(Dims(x.begin(), x.begin() + g.axis));
  const int64_t inner = volume(Dims(x.begin() + g.axis + 1, x.end() - 1));
  const bool realOutput = g.inverse && g.onesided;
  // The input points the transform reads: n (zero-padded or cut); irfft reads n / 2 + 1 bins.
  const int64_t half = n / 2 + 1, used = std::min(inLen, realOutput ? half : n);
  const ComplexFft<W> fft(n);
  const W scale = g.inverse ? W(1) / static_cast<W>(n) : W(1);
  const T* in = io.in[0].as<const T>();
  T* out = io.out[0].as<T>();
  io.pool->parallelFor(outer * inner, 1, [&](int64_t begin, int64_t end) {
    std::vector<Complex<W>> line(static_cast<size_t>(n)), scratch(static_cast<size_t>(n));
    for (int64_t li = begin; li < end; ++li) {
      const int64_t o = li / inner, i = li % inner;
      std::fill(line.begin(), line.end(), Complex<W>{W(0), W(0)});
      for (int64_t j = 0; j < used; ++j) {
        const T* p = in + ((o * inLen + j) * inner + i) * inC;
        line[j] = {static_cast<W>(p[0]), inC == 2 ? static_cast<W>(p[1]) : W(0)};
      }
      if (realOutput) {  // the Hermitian spectrum: bin n - k is bin k's conjugate
        line[0].i = W(0);
        if (n % 2 == 0) line[n / 2].i = W(0);
        for (int64_t k = half; k < n; ++k) line[k] = {line[n - k].r, -line[n - k].i};
      }
      fft.run(line.data(), scratch.data(), !g.inverse, scale);
      for (int64_t k = 0; k < outLen; ++k) {
        T* q = out + ((o * outLen + k) * inner + i) * outC;
        q[0] = static_cast<T>(line[k].r);
        if (outC == 2) q[1] = static_cast<T>(line[k].i);
      }
    }
  });
}

void refDft(const LayerDesc& l, const KernelIO& io) {
  const DftGeom g = dftGeom(l);
  dispatchType<kRefFloatTypes>(io.in[0].type, [&](auto tag) {
    using T = decltype(tag);
    if (g.inverse) dftLines<T, T>(g, io);
    else dftLines<T, double>(g, io);
  }, "DFT");
}

// ----------------------------------------------------------------------------------------- STFT

struct StftGeom {
  int64_t frameLength = -1, step = -1, frames = -1, bins = -1;
};

StftGeom stftGeom(const LayerDesc& l) {
  StftGeom g;
  const Dims& x = l.inputs[0].dims;
  if (x.size() != 3 || (x[2] >= 0 && x[2] != 1 && x[2] != 2))
    opError(l, "signal must be (batch, length, 1 or 2), got " + toString(x));
  g.step = optionalScalar(l, 1, "frame_step", -1);
  if (l.inputs[1].value.valid() && g.step < 1) opError(l, "frame_step must be positive, got " + std::to_string(g.step));
  const int64_t window = l.present(2) ? (l.inputs[2].dims.size() == 1 ? l.inputs[2].dims[0] : -2) : -1;
  if (window == -2) opError(l, "window must be rank 1, got " + toString(l.inputs[2].dims));
  g.frameLength = optionalScalar(l, 3, "frame_length", l.present(2) ? window : x[1]);
  if (l.present(3) && l.inputs[3].value.valid()) {
    if (g.frameLength < 1) opError(l, "frame_length must be positive, got " + std::to_string(g.frameLength));
    if (window >= 0 && window != g.frameLength) opError(l, "the window's length differs from frame_length");
  }
  const bool onesided = l.attrs->getInt("onesided", 1) != 0;
  if (g.frameLength >= 0) g.bins = onesided ? g.frameLength / 2 + 1 : g.frameLength;
  if (g.frameLength >= 0 && g.step >= 1 && x[1] >= 0) {
    if (g.frameLength > x[1]) opError(l, "frame_length " + std::to_string(g.frameLength) + " is longer than the signal");
    g.frames = (x[1] - g.frameLength) / g.step + 1;
  }
  return g;
}

void inferStft(LayerDesc& l) {
  requireInputs(l, 2, 4);
  const DataType t = l.inputs[0].type;
  if (!isFloat(t)) opError(l, std::string("signal must be a float type, got ") + toString(t));
  if (l.present(2) && l.inputs[2].type != t) opError(l, "window must have the signal's type");
  const StftGeom g = stftGeom(l);
  setOutput(l, 0, t, {l.inputs[0].dims[0], g.frames, g.bins, 2});
}

void refStft(const LayerDesc& l, const KernelIO& io) {
  const StftGeom g = stftGeom(l);
  const Dims& x = io.in[0].dims;
  const int64_t batch = x[0], length = x[1], inC = x[2], n = g.frameLength;
  const bool hasWindow = io.in.size() > 2 && io.in[2].data;
  dispatchType<kRefFloatTypes>(io.in[0].type, [&](auto tag) {
    using T = decltype(tag);
    const ComplexFft<double> fft(n);  // a forward transform: in float64, as DFT's
    const T* in = io.in[0].as<const T>();
    const T* window = hasWindow ? io.in[2].as<const T>() : nullptr;
    T* out = io.out[0].as<T>();
    io.pool->parallelFor(batch * g.frames, 1, [&](int64_t begin, int64_t end) {
      std::vector<Complex<double>> frame(static_cast<size_t>(n)), scratch(static_cast<size_t>(n));
      for (int64_t bf = begin; bf < end; ++bf) {
        const int64_t b = bf / g.frames, f = bf % g.frames;
        for (int64_t j = 0; j < n; ++j) {
          const T* p = in + (b * length + f * g.step + j) * inC;
          const T wj = window ? window[j] : T(1);  // windowed in T, as the reference
          frame[j] = {static_cast<double>(p[0] * wj), inC == 2 ? static_cast<double>(p[1] * wj) : 0.0};
        }
        fft.run(frame.data(), scratch.data(), true, 1.0);
        for (int64_t k = 0; k < g.bins; ++k) {
          T* q = out + (bf * g.bins + k) * 2;
          q[0] = static_cast<T>(frame[k].r);
          q[1] = static_cast<T>(frame[k].i);
        }
      }
    });
  }, "STFT");
}

}  // namespace

void registerDftOps(OpRegistry& r) {
  OpDef dft;
  dft.name = "DFT";
  dft.infer = inferDft;
  dft.ref = refDft;
  dft.normalize = normalizeDft;
  dft.valueInputs = {1, 2};
  dft.minOpset = 17;
  r.add(dft);
  OpDef stft;
  stft.name = "STFT";
  stft.infer = inferStft;
  stft.ref = refStft;
  stft.valueInputs = {1, 3};
  stft.minOpset = 17;
  r.add(stft);
}

}  // namespace kiln
