// Op definitions (shape inference + naive reference kernels + ONNX normalization): normalization family.
// BatchNormalization, InstanceNormalization, LayerNormalization, GroupNormalization,
// RMSNormalization, Softmax, LogSoftmax, Hardmax.
//
// Legacy forms are rewritten by `normalize` into the newest opset plus kiln marker attributes:
//  - kiln_coerce_2d (Softmax/LogSoftmax/Hardmax, opset < 13): the op works on the input flattened
//    to 2-D at `axis`, i.e. over all dims from `axis` to the end at once.
//  - kiln_per_activation (BatchNormalization, opset < 9 with spatial = 0): scale/B/mean/var have
//    the shape of X without its batch dim (one statistic per activation, not per channel).
//  - kiln_per_group_affine (GroupNormalization, opset 18): scale/bias have one value per group
//    instead of one per channel.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/network.h"
#include "ops/fp8_matmul.h"
#include "ops/fused_attrs.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

[[noreturn]] void unsupported(const LayerDesc& l, const std::string& msg) {
  throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): " + msg);
}

void requireFloatInput(const LayerDesc& l, size_t i, const char* what) {
  if (!isFloat(l.inputs[i].type))
    opError(l, std::string(what) + " must be a floating-point tensor, got " + toString(l.inputs[i].type));
}

float epsilonAttr(const LayerDesc& l, float dflt) {
  float eps = l.attrs->getFloat("epsilon", dflt);
  if (!std::isfinite(eps) || eps < 0.f) opError(l, "epsilon must be a finite value >= 0, got " + std::to_string(eps));
  return eps;
}

//! Rejects inputs whose element count overflows (absurd dims) as soon as the dims are known.
void checkSizes(const LayerDesc& l) {
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (l.present(i) && isStatic(l.inputs[i].dims)) volume(l.inputs[i].dims);
}

int64_t rankOf(const LayerDesc& l, size_t i) { return static_cast<int64_t>(l.inputs[i].dims.size()); }


//! Checks that input `i` has exactly `expected` dims (unknown dims match anything).
void requireShape(const LayerDesc& l, size_t i, const Dims& expected, const char* what) {
  const Dims& d = l.inputs[i].dims;
  bool ok = d.size() == expected.size();
  for (size_t k = 0; ok && k < d.size(); ++k) ok = dimsAgree(d[k], expected[k]);
  if (!ok) opError(l, std::string(what) + " has shape " + toString(d) + ", expected " + toString(expected));
}

//! Checks that input `i` can be broadcast to `target` without changing it (ONNX unidirectional).
void requireUnidirectional(const LayerDesc& l, size_t i, const Dims& target, const char* what) {
  const Dims& d = l.inputs[i].dims;
  bool ok = d.size() <= target.size();
  for (size_t k = 0; ok && k < d.size(); ++k) {
    int64_t t = target[target.size() - d.size() + k];
    ok = d[k] == 1 || dimsAgree(d[k], t);
  }
  if (!ok) opError(l, std::string(what) + " of shape " + toString(d) + " cannot be broadcast to " + toString(target));
}

int64_t product(const Dims& d, size_t from, size_t to) { return volume(Dims(d.begin() + from, d.begin() + to)); }

//! Calls f(T{}) for float32/float64 tensors (half/bf16 are computed in float32 by the builder).
template <typename F>
void dispatchFloat(const LayerDesc& l, DataType t, F&& f) {
  if (t == DataType::kFLOAT) f(float{});
  else if (t == DataType::kDOUBLE) f(double{});
  else unsupported(l, std::string("no CPU kernel for data type ") + toString(t));
}

//! Reads element i of a float32/float64 view as double.
double loadAsDouble(const TensorView& v, int64_t i) {
  return v.type == DataType::kDOUBLE ? v.as<double>()[i] : static_cast<double>(v.as<float>()[i]);
}
void storeFromDouble(const TensorView& v, int64_t i, double x) {
  if (v.type == DataType::kDOUBLE) v.as<double>()[i] = x;
  else v.as<float>()[i] = static_cast<float>(x);
}

//! Maps a linear index of `outDims` to the linear index of a tensor broadcast to it.
class BroadcastIndex {
 public:
  BroadcastIndex(const Dims& from, const Dims& outDims)
      : outDims_(outDims), strides_(broadcastStrides(from, outDims)), direct_(from == outDims) {}
  int64_t operator()(int64_t linear) const {
    if (direct_) return linear;
    int64_t off = 0;
    for (size_t k = outDims_.size(); k-- > 0;) {
      int64_t idx = linear % outDims_[k];
      linear /= outDims_[k];
      off += idx * strides_[k];
    }
    return off;
  }

 private:
  Dims outDims_;
  std::vector<int64_t> strides_;
  bool direct_;
};

struct MeanVar {
  double mean = 0, var = 0;
};

//! Mean and biased variance of `count` elements read by `at(k)` (two passes for accuracy).
template <typename Get>
MeanVar meanVar(int64_t count, Get&& at) {
  MeanVar r;
  if (count == 0) return r;
  double s = 0;
  for (int64_t k = 0; k < count; ++k) s += at(k);
  r.mean = s / static_cast<double>(count);
  double q = 0;
  for (int64_t k = 0; k < count; ++k) {
    double d = at(k) - r.mean;
    q += d * d;
  }
  r.var = q / static_cast<double>(count);
  return r;
}

// ---------------------------------------------------------------------------------------------
// BatchNormalization

bool bnTraining(const LayerDesc& l) { return l.attrs->getInt("training_mode", 0) != 0; }
bool bnPerActivation(const LayerDesc& l) { return perActivationBatchNorm(*l.attrs); }

void inferBatchNorm(LayerDesc& l) {
  requireInputs(l, 5, 5);
  checkSizes(l);
  for (size_t i = 0; i < 5; ++i) requireFloatInput(l, i, i == 0 ? "X" : "scale/B/mean/var");
  const Dims& x = l.inputs[0].dims;
  if (x.size() < 2) opError(l, "X must have rank >= 2 (N, C, ...), got " + toString(x));
  int64_t training = l.attrs->getInt("training_mode", 0);
  if (training != 0 && training != 1) opError(l, "training_mode must be 0 or 1");
  epsilonAttr(l, 1e-5f);
  Dims paramDims = bnPerActivation(l) ? Dims(x.begin() + 1, x.end()) : Dims{x[1]};
  static const char* names[] = {"", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) requireShape(l, i, paramDims, names[i]);
  size_t nOut = std::max<size_t>(l.outputs.size(), 1);
  if (!training && nOut > 1) opError(l, "inference mode has one output, the layer has " + std::to_string(nOut));
  if (training && bnPerActivation(l)) unsupported(l, "training mode with spatial = 0 is not supported");
  if (nOut > 3) unsupported(l, "only the outputs Y, running_mean and running_var are supported");
  setOutput(l, 0, l.inputs[0].type, x);
  for (size_t o = 1; o < nOut; ++o) setOutput(l, o, l.inputs[2 + o].type, paramDims);
}

template <typename T>
void batchNormInference(const LayerDesc& l, const KernelIO& io) {
  const Dims& x = io.in[0].dims;
  const int64_t n = x[0], c = x[1], spatial = product(x, 2, x.size());
  const int64_t perN = c * spatial;
  const bool perAct = bnPerActivation(l);
  const double eps = l.attrs->getFloat("epsilon", 1e-5f);
  const T* in = io.in[0].as<T>();
  T* out = io.out[0].as<T>();
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < perN; ++k) {
      int64_t p = perAct ? k : k / spatial;
      double scale = loadAsDouble(io.in[1], p), bias = loadAsDouble(io.in[2], p);
      double mean = loadAsDouble(io.in[3], p), var = loadAsDouble(io.in[4], p);
      double v = static_cast<double>(in[b * perN + k]);
      out[b * perN + k] = static_cast<T>(scale * (v - mean) / std::sqrt(var + eps) + bias);
    }
}

// Training mode: normalize with the batch statistics; optionally output updated running stats.
template <typename T>
void batchNormTraining(const LayerDesc& l, const KernelIO& io) {
  const Dims& x = io.in[0].dims;
  const int64_t n = x[0], c = x[1], spatial = product(x, 2, x.size());
  const double eps = l.attrs->getFloat("epsilon", 1e-5f);
  const double momentum = l.attrs->getFloat("momentum", 0.9f);
  const T* in = io.in[0].as<T>();
  T* out = io.out[0].as<T>();
  for (int64_t ch = 0; ch < c; ++ch) {
    auto at = [&](int64_t k) { return static_cast<double>(in[(k / spatial * c + ch) * spatial + k % spatial]); };
    MeanVar mv = meanVar(n * spatial, at);
    double scale = loadAsDouble(io.in[1], ch), bias = loadAsDouble(io.in[2], ch);
    double inv = 1.0 / std::sqrt(mv.var + eps);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t s = 0; s < spatial; ++s) {
        int64_t off = (b * c + ch) * spatial + s;
        out[off] = static_cast<T>(scale * (static_cast<double>(in[off]) - mv.mean) * inv + bias);
      }
    if (io.out.size() > 1 && io.out[1].data)
      storeFromDouble(io.out[1], ch, loadAsDouble(io.in[3], ch) * momentum + mv.mean * (1 - momentum));
    if (io.out.size() > 2 && io.out[2].data)
      storeFromDouble(io.out[2], ch, loadAsDouble(io.in[4], ch) * momentum + mv.var * (1 - momentum));
  }
}

void refBatchNorm(const LayerDesc& l, const KernelIO& io) {
  dispatchFloat(l, io.in[0].type, [&](auto t) {
    using T = decltype(t);
    if (bnTraining(l)) batchNormTraining<T>(l, io);
    else batchNormInference<T>(l, io);
  });
}

void normalizeBatchNorm(Network&, Layer& layer, int opset) {
  if (opset >= 14) return;
  // Before opset 14 the mode follows the outputs: Y alone is inference, more outputs is training.
  // (Opset < 7 also had is_test; models rely on the output count, as other runtimes do.)
  if (opset < 9 && layer.attrs.getInt("spatial", 1) == 0) setPerActivationBatchNorm(layer.attrs);
  layer.attrs.set("training_mode", int64_t(layer.outputs.size() > 1 ? 1 : 0));
  layer.attrs.erase("spatial");
  layer.attrs.erase("is_test");
  layer.attrs.erase("consumed_inputs");
}

// ---------------------------------------------------------------------------------------------
// InstanceNormalization and GroupNormalization: statistics per (n, channel group) over the
// group's channels and all spatial positions; affine per channel (or per group, opset 18).

//! The optional 4th input of GroupNormalization / InstanceNormalization, the residual that
//! fuse_residual.cpp moves in from the following Add: Y = act(norm(X) * scale + bias + R), R of
//! X's shape and type (no broadcast).
void checkNormResidual(LayerDesc& l) {
  if (l.inputs.size() < 4 || !l.present(3)) return;
  requireFloatInput(l, 3, "residual");
  if (l.inputs[3].type != l.inputs[0].type) opError(l, "residual type must be the input's");
  requireShape(l, 3, l.inputs[0].dims, "residual");
}

void inferInstanceNorm(LayerDesc& l) {
  requireInputs(l, 3, 4);
  checkSizes(l);
  for (size_t i = 0; i < 3; ++i) requireFloatInput(l, i, i == 0 ? "input" : "scale/B");
  const Dims& x = l.inputs[0].dims;
  if (x.size() < 3) opError(l, "input must have rank >= 3 (N, C, D1, ...), got " + toString(x));
  epsilonAttr(l, 1e-5f);
  requireShape(l, 1, {x[1]}, "scale");
  requireShape(l, 2, {x[1]}, "B");
  checkNormResidual(l);
  setOutput(l, 0, l.inputs[0].type, x);
}

bool groupAffinePerGroup(const LayerDesc& l) { return perGroupAffine(*l.attrs); }

int64_t numGroups(const LayerDesc& l) {
  if (l.op == "InstanceNormalization") return -1;  // one group per channel
  if (!l.attrs->has("num_groups")) opError(l, "attribute num_groups is required");
  int64_t g = l.attrs->getInt("num_groups", 0);
  if (g <= 0) opError(l, "num_groups must be > 0, got " + std::to_string(g));
  return g;
}

void inferGroupNorm(LayerDesc& l) {
  requireInputs(l, 3, 4);
  checkSizes(l);
  for (size_t i = 0; i < 3; ++i) requireFloatInput(l, i, i == 0 ? "X" : "scale/bias");
  const Dims& x = l.inputs[0].dims;
  if (x.size() < 2) opError(l, "X must have rank >= 2 (N, C, ...), got " + toString(x));
  int64_t g = numGroups(l);
  epsilonAttr(l, 1e-5f);
  if (x[1] >= 0 && x[1] % g != 0)
    opError(l, "channels (" + std::to_string(x[1]) + ") must be divisible by num_groups (" + std::to_string(g) + ")");
  // Opset 18 specifies one scale/bias per group; some exporters still write one per channel.
  Dims affine = {x[1]};
  if (groupAffinePerGroup(l) && l.inputs[1].dims.size() == 1 && l.inputs[1].dims[0] == g) affine = {g};
  requireShape(l, 1, affine, "scale");
  requireShape(l, 2, affine, "bias");
  checkNormResidual(l);
  setOutput(l, 0, l.inputs[0].type, x);
}

template <typename T>
void groupNormKernel(const LayerDesc& l, const KernelIO& io) {
  const Dims& x = io.in[0].dims;
  const int64_t n = x[0], c = x[1], spatial = product(x, 2, x.size());
  int64_t g = numGroups(l);
  if (g < 0) g = c;
  if (c % g != 0) opError(l, "channels must be divisible by num_groups");
  const int64_t perGroup = c / g;
  const bool affinePerGroup = groupAffinePerGroup(l) && io.in[1].count == g;
  const double eps = l.attrs->getFloat("epsilon", 1e-5f);
  const Activation act = fusedActivation(*l.attrs);  // fuse_activation (GroupNorm -> SiLU, ...)
  const T* in = io.in[0].as<T>();
  const T* res = io.in.size() > 3 && io.in[3].data ? io.in[3].as<T>() : nullptr;  // fuse_residual
  T* out = io.out[0].as<T>();
  const int64_t groupSize = perGroup * spatial;  // contiguous in NCHW
  for (int64_t b = 0; b < n; ++b)
    for (int64_t grp = 0; grp < g; ++grp) {
      const int64_t base = (b * g + grp) * groupSize;
      MeanVar mv = meanVar(groupSize, [&](int64_t k) { return static_cast<double>(in[base + k]); });
      double inv = 1.0 / std::sqrt(mv.var + eps);
      for (int64_t k = 0; k < groupSize; ++k) {
        int64_t p = affinePerGroup ? grp : grp * perGroup + k / spatial;
        double y = (static_cast<double>(in[base + k]) - mv.mean) * inv;
        const double v = y * loadAsDouble(io.in[1], p) + loadAsDouble(io.in[2], p) +
                         (res ? static_cast<double>(res[base + k]) : 0.0);
        out[base + k] = static_cast<T>(act.kind == ActKind::kNone ? v : static_cast<double>(act(static_cast<float>(v))));
      }
    }
}

void refGroupNorm(const LayerDesc& l, const KernelIO& io) {
  dispatchFloat(l, io.in[0].type, [&](auto t) { groupNormKernel<decltype(t)>(l, io); });
}

void normalizeInstanceNorm(Network&, Layer& layer, int) { layer.attrs.erase("consumed_inputs"); }

void normalizeGroupNorm(Network&, Layer& layer, int opset) {
  if (opset < 21) setPerGroupAffine(layer.attrs);
}

// ---------------------------------------------------------------------------------------------
// LayerNormalization and RMSNormalization: statistics over dims [axis, rank) per leading index;
// scale (and bias) broadcast to X.

int64_t normAxis(const LayerDesc& l) { return normalizeAxis(l, l.attrs->getInt("axis", -1), rankOf(l, 0)); }

DataType stashType(const LayerDesc& l) {
  int64_t s = l.attrs->getInt("stash_type", 1);
  if (s == 1) return DataType::kFLOAT;
  if (s == 11) return DataType::kDOUBLE;
  if (s == 10 || s == 16) unsupported(l, "stash_type " + std::to_string(s) + " (half precision statistics) is not supported");
  opError(l, "stash_type must be an ONNX floating-point type id, got " + std::to_string(s));
}

//! kiln's skip LayerNormalization (from the GPU builder's fusion, `kiln_skip` = 1): a 4th input R
//! of X's shape and type is added first, Y = LN(X + R), the sum rounded to X's type as the Add it
//! replaces did (BERT's residual Add before each LayerNorm: one pass over the activations less).
//! Its optional second output is that sum (pre-LN blocks, GPT-2 / ViT, read it again as the next
//! residual); Mean and InvStdDev are not available from a skip LayerNorm.
//! RMSNormalization takes it the same way (X, scale, no bias, R: LLaMA / Qwen's residual Add
//! before each RMSNorm).
bool skipNorm(const LayerDesc& l) { return (l.op == "LayerNormalization" || l.op == "RMSNormalization") && hasSkipInput(*l.attrs); }

void inferLayerNorm(LayerDesc& l) {
  bool rms = l.op == "RMSNormalization";
  const bool skip = skipNorm(l);
  requireInputs(l, skip && !rms ? 4 : 2, skip ? 4 : (rms ? 2 : 3));
  if (rms && l.present(2)) opError(l, "RMSNormalization has no bias input (a skip RMSNorm leaves input 2 empty)");
  if (skip && !l.present(3)) opError(l, "a skip normalization needs its input 3 (R)");
  // Dims agree where both are known: a dynamic export may know a dim on one side only (BEiT's
  // residual [-1, -1, E] beside X [-1, 197, E]); at run time both are concrete and must be equal.
  if (skip) {
    const Dims &r = l.inputs[3].dims, &xd = l.inputs[0].dims;
    bool same = l.inputs[3].type == l.inputs[0].type && r.size() == xd.size();
    for (size_t k = 0; same && k < r.size(); ++k) same = dimsAgree(r[k], xd[k]);
    if (!same) opError(l, "the skip input must have X's type and dims, got " + toString(r) + " for X " + toString(xd));
  }
  checkSizes(l);
  requireFloatInput(l, 0, "X");
  requireFloatInput(l, 1, "scale");
  const Dims& x = l.inputs[0].dims;
  if (x.empty()) opError(l, "X must have rank >= 1");
  int64_t axis = normAxis(l);
  epsilonAttr(l, 1e-5f);
  DataType stash = stashType(l);
  requireUnidirectional(l, 1, x, "scale");
  if (l.present(2)) {
    requireFloatInput(l, 2, "B");
    requireUnidirectional(l, 2, x, "B");
  }
  size_t nOut = std::max<size_t>(l.outputs.size(), 1);
  // float8e4m3fn codes when fuse_fp8_quantize moved the following quantization in: as Y, or as a
  // second output beside Y.
  const int codesAt = fp8CodesOutput(*l.attrs);
  if (codesAt >= 0) {
    requireFp8Scale(l, kFp8OutScaleAttr);
    if (codesAt > 1 || (codesAt == 1 && nOut != 2)) opError(l, "float8 codes as output " + std::to_string(codesAt) + " of " + std::to_string(nOut));
  }
  if (codesAt == 1) {
    setOutput(l, 0, l.inputs[0].type, x);
    setOutput(l, 1, DataType::kFP8E4M3FN, x);
    return;
  }
  if (nOut > (skip ? 2u : (rms ? 1u : 3u))) opError(l, "too many outputs (" + std::to_string(nOut) + ")");
  setOutput(l, 0, codesAt == 0 ? DataType::kFP8E4M3FN : l.inputs[0].type, x);
  if (skip) {
    if (nOut > 1) setOutput(l, 1, l.inputs[0].type, x);  // the sum X + R
    return;
  }
  Dims stats(x.begin(), x.begin() + axis);
  stats.resize(x.size(), 1);
  for (size_t o = 1; o < nOut; ++o) setOutput(l, o, stash, stats);
}

template <typename T>
void layerNormKernel(const LayerDesc& l, const KernelIO& io) {
  const bool rms = l.op == "RMSNormalization";
  const Dims& x = io.in[0].dims;
  const int64_t axis = normAxis(l);
  const int64_t rows = product(x, 0, axis), cols = product(x, axis, x.size());
  const double eps = l.attrs->getFloat("epsilon", 1e-5f);
  const bool hasBias = io.in.size() > 2 && io.in[2].data;
  BroadcastIndex scaleAt(io.in[1].dims, x);
  BroadcastIndex biasAt(hasBias ? io.in[2].dims : Dims{}, x);
  const T* in = io.in[0].as<T>();
  const T* skip = skipNorm(l) ? io.in[3].as<T>() : nullptr;
  const int codesAt = fp8CodesOutput(*l.attrs);
  T* out = codesAt == 0 ? nullptr : io.out[0].as<T>();
  uint8_t* codes = codesAt >= 0 ? io.out[static_cast<size_t>(codesAt)].as<uint8_t>() : nullptr;
  const float codeScale = l.attrs->getFloat(kFp8OutScaleAttr, 1.f);
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = in + r * cols;
    const T* add = skip ? skip + r * cols : nullptr;
    auto at = [&](int64_t k) {
      return add ? static_cast<double>(static_cast<T>(static_cast<double>(row[k]) + static_cast<double>(add[k])))
                 : static_cast<double>(row[k]);
    };
    double mean = 0, meanSquare = 0;
    if (rms) {
      for (int64_t k = 0; k < cols; ++k) meanSquare += at(k) * at(k);
      meanSquare /= static_cast<double>(cols);
    } else {
      MeanVar mv = meanVar(cols, at);
      mean = mv.mean;
      meanSquare = mv.var;
    }
    double inv = 1.0 / std::sqrt(meanSquare + eps);
    for (int64_t k = 0; k < cols; ++k) {
      int64_t e = r * cols + k;
      double y = (at(k) - mean) * inv * loadAsDouble(io.in[1], scaleAt(e));
      if (hasBias) y += loadAsDouble(io.in[2], biasAt(e));
      if (out) out[e] = static_cast<T>(y);
      if (codes) codes[e] = fp8Code(static_cast<float>(y), codeScale);
    }
    if (codesAt == 1) continue;  // output 1 holds the codes
    if (skip) {
      if (io.out.size() > 1 && io.out[1].data)
        for (int64_t k = 0; k < cols; ++k) io.out[1].as<T>()[r * cols + k] = static_cast<T>(at(k));
      continue;
    }
    if (io.out.size() > 1 && io.out[1].data) storeFromDouble(io.out[1], r, mean);
    if (io.out.size() > 2 && io.out[2].data) storeFromDouble(io.out[2], r, inv);
  }
}

void refLayerNorm(const LayerDesc& l, const KernelIO& io) {
  dispatchFloat(l, io.in[0].type, [&](auto t) { layerNormKernel<decltype(t)>(l, io); });
}

// ---------------------------------------------------------------------------------------------
// Softmax, LogSoftmax, Hardmax: along one axis (opset 13), or along the dims [axis, rank)
// flattened together (opset < 13, marked kiln_coerce_2d).

void inferSoftmax(LayerDesc& l) {
  requireInputs(l, 1, 1);
  checkSizes(l);
  requireFloatInput(l, 0, "input");
  const Dims& x = l.inputs[0].dims;
  bool coerce = coercedTo2d(*l.attrs);
  // A legacy (coerced) op accepts axis == rank (an empty normalized block) and a scalar input.
  int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = l.attrs->getInt("axis", -1);
  if (!(coerce && axis == rank)) normalizeAxis(l, axis, rank);
  if (!coerce && rank == 0) opError(l, "input must have rank >= 1");
  setOutput(l, 0, l.inputs[0].type, x);
}

template <typename T>
void softmaxKernel(const LayerDesc& l, const KernelIO& io) {
  const AxisSplit s = softmaxSplit(l, io.in[0].dims);
  const T* in = io.in[0].as<T>();
  T* out = io.out[0].as<T>();
  const bool isLog = l.op == "LogSoftmax", isHard = l.op == "Hardmax";
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      const int64_t base = o * s.length * s.inner + i;
      auto at = [&](int64_t k) { return in[base + k * s.inner]; };
      auto put = [&](int64_t k, T v) { out[base + k * s.inner] = v; };
      if (isHard) {  // one-hot at the first maximum
        int64_t best = 0;
        for (int64_t k = 1; k < s.length; ++k)
          if (at(k) > at(best)) best = k;
        for (int64_t k = 0; k < s.length; ++k) put(k, k == best ? T(1) : T(0));
        continue;
      }
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < s.length; ++k) mx = std::max(mx, static_cast<double>(at(k)));
      double sum = 0;
      for (int64_t k = 0; k < s.length; ++k) sum += std::exp(static_cast<double>(at(k)) - mx);
      double logSum = std::log(sum);
      for (int64_t k = 0; k < s.length; ++k) {
        double shifted = static_cast<double>(at(k)) - mx;
        put(k, static_cast<T>(isLog ? shifted - logSum : std::exp(shifted) / sum));
      }
    }
}

void refSoftmax(const LayerDesc& l, const KernelIO& io) {
  dispatchFloat(l, io.in[0].type, [&](auto t) { softmaxKernel<decltype(t)>(l, io); });
}

void normalizeSoftmax(Network&, Layer& layer, int opset) {
  if (opset >= 13) return;
  layer.attrs.set("axis", layer.attrs.getInt("axis", 1));  // the legacy default axis is 1
  setCoercedTo2d(layer.attrs);
}

OpDef makeOp(const std::string& name, InferFn infer, RefFn ref, int minOpset,
             void (*normalize)(Network&, Layer&, int) = nullptr) {
  OpDef d;
  d.name = name;
  d.infer = infer;
  d.ref = ref;
  d.minOpset = minOpset;
  d.normalize = normalize;
  return d;
}

}  // namespace

AxisSplit softmaxSplit(const LayerDesc& l, const Dims& x) {
  const int64_t rank = static_cast<int64_t>(x.size());
  const bool coerce = coercedTo2d(*l.attrs);
  AxisSplit s;
  if (coerce && l.attrs->getInt("axis", -1) == rank) {  // an empty normalized block: each element alone
    s.outer = volume(x);
    return s;
  }
  const size_t axis = static_cast<size_t>(normalizeAxis(l, l.attrs->getInt("axis", -1), rank));
  s.outer = volume(Dims(x.begin(), x.begin() + axis));
  if (coerce) {
    s.length = volume(Dims(x.begin() + axis, x.end()));
  } else {
    s.length = x[axis];
    s.inner = volume(Dims(x.begin() + axis + 1, x.end()));
  }
  return s;
}

void registerNormalizationOps(OpRegistry& r) {
  r.add(makeOp("BatchNormalization", inferBatchNorm, refBatchNorm, 1, normalizeBatchNorm));
  r.add(makeOp("InstanceNormalization", inferInstanceNorm, refGroupNorm, 1, normalizeInstanceNorm));
  r.add(makeOp("GroupNormalization", inferGroupNorm, refGroupNorm, 18, normalizeGroupNorm));
  // From opset 1: ONNX Runtime's LayerNormalization (default domain since opset 1, the same inputs,
  // attributes and outputs as ONNX's of opset 17) is in the models its transformer optimizer wrote
  // at opsets 13-16.
  r.add(makeOp("LayerNormalization", inferLayerNorm, refLayerNorm, 1));
  r.add(makeOp("RMSNormalization", inferLayerNorm, refLayerNorm, 23));
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"})
    r.add(makeOp(op, inferSoftmax, refSoftmax, 1, normalizeSoftmax));
}

}  // namespace kiln
