// Op definitions for the signal-processing generators (opset 17): HannWindow, HammingWindow,
// BlackmanWindow and MelWeightMatrix. Their output shapes come from input values (value inputs),
// so they fold when those are constants and run on the host-known values otherwise.
// Windows of `size` points, n = 0 .. size-1, N = size (periodic, the default) or size - 1:
//   Hann     sin^2(pi n / N)
//   Hamming  25/46 - 21/46 cos(2 pi n / N)
//   Blackman 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N)
// in the type output_datatype (default float32).
// MelWeightMatrix(num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz):
// a (dft_length / 2 + 1, num_mel_bins) matrix of triangular filters of peak 1 on the mel scale
// mel(f) = 2595 log10(1 + f / 700), computed as the ONNX reference implementation does (the
// num_mel_bins + 2 band edges spaced by (high_mel - low_mel) / (num_mel_bins + 2), then turned
// into spectrogram bins floor((dft_length + 1) * hz / sample_rate)).
#include <cmath>
#include <vector>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

enum class WindowKind { kHann, kHamming, kBlackman };

WindowKind windowKind(const LayerDesc& l) {
  if (l.op == "HannWindow") return WindowKind::kHann;
  if (l.op == "HammingWindow") return WindowKind::kHamming;
  return WindowKind::kBlackman;
}

// A scalar integer input: its value when known, -1 otherwise.
int64_t scalarInt(const LayerDesc& l, size_t i, const char* what) {
  const TensorDesc& t = l.inputs[i];
  if (t.type != DataType::kINT32 && t.type != DataType::kINT64) opError(l, std::string(what) + " must be int32 or int64");
  if (!t.dims.empty() && !(t.dims.size() == 1 && t.dims[0] == 1)) opError(l, std::string(what) + " must be a scalar, got " + toString(t.dims));
  if (!t.value.valid()) return -1;
  const int64_t v = t.value.getInt(0);
  if (v < 0) opError(l, std::string(what) + " must not be negative, got " + std::to_string(v));
  return v;
}

DataType outputDatatype(const LayerDesc& l) {
  const DataType t = fromOnnxType(l, l.attrs->getInt("output_datatype", 1));
  if (t == DataType::kBOOL || t == DataType::kHALF || t == DataType::kBF16)
    throw UnsupportedError(l.op + ": output_datatype " + toString(t) + " (float32, float64 and the integer types are supported)");
  return t;
}

void inferWindow(LayerDesc& l) {
  requireInputs(l, 1, 1);
  const int64_t periodic = l.attrs->getInt("periodic", 1);
  if (periodic != 0 && periodic != 1) opError(l, "periodic must be 0 or 1");
  setOutput(l, 0, outputDatatype(l), {scalarInt(l, 0, "size")});
}

// Writes values computed in double into y, converted to its type.
template <typename F>
void writeAs(const TensorView& y, F&& value) {
  dispatchNumeric(y.type, [&](auto tag) {
    using T = decltype(tag);
    T* out = y.as<T>();
    for (int64_t i = 0; i < y.count; ++i) out[i] = static_cast<T>(value(i));
  });
}

void refWindow(const LayerDesc& l, const KernelIO& io) {
  const WindowKind kind = windowKind(l);
  const int64_t size = io.out[0].count;
  const double n1 = static_cast<double>(l.attrs->getInt("periodic", 1) ? size : size - 1);
  const double pi = 3.14159265358979323846;
  writeAs(io.out[0], [&](int64_t i) {
    const double x = static_cast<double>(i) / n1;  // size 1, symmetric: 0 / 0 = NaN, as the reference
    switch (kind) {
      case WindowKind::kHann: {
        const double s = std::sin(pi * x);
        return s * s;
      }
      case WindowKind::kHamming: return 25.0 / 46.0 - (21.0 / 46.0) * std::cos(2 * pi * x);
      case WindowKind::kBlackman: return 0.42 - 0.5 * std::cos(2 * pi * x) + 0.08 * std::cos(4 * pi * x);
    }
    return 0.0;
  });
}

void inferMelWeightMatrix(LayerDesc& l) {
  requireInputs(l, 5, 5);
  const int64_t bins = scalarInt(l, 0, "num_mel_bins"), dft = scalarInt(l, 1, "dft_length");
  scalarInt(l, 2, "sample_rate");
  for (size_t i : {3, 4})
    if (!isFloat(l.inputs[i].type)) opError(l, "lower_edge_hertz and upper_edge_hertz must be float types");
  setOutput(l, 0, outputDatatype(l), {dft >= 0 ? dft / 2 + 1 : -1, bins});
}

double scalarAt(const TensorView& v) {
  return dispatchType<kHostTypes>(v.type, [&](auto tag) {
    using T = decltype(tag);
    return static_cast<double>(*v.as<const T>());
  }, "MelWeightMatrix");
}

void refMelWeightMatrix(const LayerDesc& l, const KernelIO& io) {
  const int64_t melBins = static_cast<int64_t>(scalarAt(io.in[0])), dftLength = static_cast<int64_t>(scalarAt(io.in[1]));
  const double sampleRate = scalarAt(io.in[2]);
  if (sampleRate <= 0) opError(l, "sample_rate must be positive");
  const int64_t spectrogramBins = dftLength / 2 + 1;
  // The band edges in hertz, the mel-scale spacing as the reference computes it.
  auto mel = [](double hz) { return 2595.0 * std::log1p(hz / 700.0) / std::log(10.0); };
  const double lowMel = mel(scalarAt(io.in[3])), highMel = mel(scalarAt(io.in[4]));
  const double step = (highMel - lowMel) / static_cast<double>(melBins + 2);
  std::vector<int64_t> edge(static_cast<size_t>(melBins + 2));
  for (int64_t i = 0; i < melBins + 2; ++i) {
    const double hz = 700.0 * std::expm1((static_cast<double>(i) * step + lowMel) / 2595.0 * std::log(10.0));
    edge[i] = static_cast<int64_t>(std::floor(static_cast<double>(dftLength + 1) * hz / sampleRate));
  }
  std::vector<double> w(static_cast<size_t>(spectrogramBins * melBins), 0.0);
  auto at = [&](int64_t row, int64_t col) -> double& {
    if (row < 0 || row >= spectrogramBins) opError(l, "a mel band edge falls outside the spectrogram bins (check the hertz range)");
    return w[row * melBins + col];
  };
  for (int64_t i = 0; i < melBins; ++i) {
    const int64_t lo = edge[i], mid = edge[i + 1], hi = edge[i + 2];
    if (mid == lo) at(mid, i) = 1.0;
    else
      for (int64_t j = lo; j <= mid; ++j) at(j, i) = static_cast<double>(j - lo) / static_cast<double>(mid - lo);
    if (hi > mid)
      for (int64_t j = mid; j < hi; ++j) at(j, i) = static_cast<double>(hi - j) / static_cast<double>(hi - mid);
  }
  writeAs(io.out[0], [&](int64_t i) { return w[i]; });
}

}  // namespace

void registerSignalWindowOps(OpRegistry& r) {
  for (const char* name : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    OpDef d;
    d.name = name;
    d.infer = inferWindow;
    d.ref = refWindow;
    d.valueInputs = {0};
    d.minOpset = 17;
    r.add(d);
  }
  OpDef mel;
  mel.name = "MelWeightMatrix";
  mel.infer = inferMelWeightMatrix;
  mel.ref = refMelWeightMatrix;
  mel.valueInputs = {0, 1};
  mel.minOpset = 17;
  r.add(mel);
}

}  // namespace kiln
