// Loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (ONNX opset 12+/13+), as exported
// training graphs and evaluation scripts carry them. input [N, C, d1..dk] (scores or
// log-probabilities), target [N, d1..dk] class indices, optional weight [C]; the per-element loss
// is -w[t] * logp[n, t, d], 0 where t == ignore_index; reduction none keeps [N, d1..dk], sum adds
// up, mean divides by the summed weights of the elements not ignored. SoftmaxCrossEntropyLoss is
// NLL over LogSoftmax(scores, axis 1) and may also output those log-probabilities.
#include <cmath>
#include <vector>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

enum class Reduction { kNone, kSum, kMean };

Reduction reductionOf(const LayerDesc& l) {
  const std::string r = l.attrs->getString("reduction", "mean");
  if (r == "none") return Reduction::kNone;
  if (r == "sum") return Reduction::kSum;
  if (r == "mean") return Reduction::kMean;
  opError(l, "reduction must be none, sum or mean, got '" + r + "'");
}

void inferLoss(LayerDesc& l) {
  requireInputs(l, 2, 3);
  const bool sce = l.op == "SoftmaxCrossEntropyLoss";
  if (l.outputs.size() < 1 || l.outputs.size() > (sce ? 2u : 1u)) opError(l, "has the wrong number of outputs");
  const TensorDesc& x = l.inputs[0];
  const TensorDesc& t = l.inputs[1];
  if (!isFloat(x.type) && x.type != DataType::kDOUBLE) opError(l, std::string("input must be a float type, got ") + toString(x.type));
  if (t.type != DataType::kINT64 && t.type != DataType::kINT32) opError(l, std::string("target must be int32 or int64, got ") + toString(t.type));
  if (x.dims.size() < 2) opError(l, "input must have rank >= 2 ([N, C, ...]), got " + toString(x.dims));
  if (t.dims.size() + 1 != x.dims.size()) opError(l, "target " + toString(t.dims) + " must be input " + toString(x.dims) + " without its class axis");
  Dims out{x.dims[0]};
  for (size_t i = 2; i < x.dims.size(); ++i) out.push_back(x.dims[i]);
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i] >= 0 && t.dims[i] >= 0 && out[i] != t.dims[i])
      opError(l, "target " + toString(t.dims) + " does not match input " + toString(x.dims));
  if (l.present(2)) {
    const TensorDesc& w = l.inputs[2];
    if (w.type != x.type) opError(l, "weight must have the input's type");
    if (w.dims.size() != 1 || (w.dims[0] >= 0 && x.dims[1] >= 0 && w.dims[0] != x.dims[1]))
      opError(l, "weight must be [C], got " + toString(w.dims));
  }
  setOutput(l, 0, x.type, reductionOf(l) == Reduction::kNone ? out : Dims{});
  if (l.outputs.size() > 1) setOutput(l, 1, x.type, x.dims);
}

template <typename T>
void lossKernel(const LayerDesc& l, const KernelIO& io) {
  const Dims& xd = io.in[0].dims;
  const int64_t n = xd[0], c = xd[1], inner = io.in[0].count / std::max<int64_t>(1, n * c);
  const bool sce = l.op == "SoftmaxCrossEntropyLoss";
  const T* x = io.in[0].as<T>();
  const T* w = io.in.size() > 2 && io.in[2].data ? io.in[2].as<T>() : nullptr;
  const bool hasIgnore = l.attrs->has("ignore_index");
  const int64_t ignore = l.attrs->getInt("ignore_index", 0);
  auto target = [&](int64_t i) {
    return io.in[1].type == DataType::kINT64 ? io.in[1].as<int64_t>()[i] : static_cast<int64_t>(io.in[1].as<int32_t>()[i]);
  };
  // Log-probabilities: the input itself (NLL) or LogSoftmax over the class axis (SCE).
  std::vector<double> logp;
  if (sce) {
    logp.resize(static_cast<size_t>(io.in[0].count));
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        const T* line = x + b * c * inner + i;
        double mx = -INFINITY, sum = 0;
        for (int64_t k = 0; k < c; ++k) mx = std::max(mx, static_cast<double>(line[k * inner]));
        for (int64_t k = 0; k < c; ++k) sum += std::exp(static_cast<double>(line[k * inner]) - mx);
        const double lse = mx + std::log(sum);
        for (int64_t k = 0; k < c; ++k) logp[static_cast<size_t>((b * c + k) * inner + i)] = static_cast<double>(line[k * inner]) - lse;
      }
    if (io.out.size() > 1 && io.out[1].data)
      for (int64_t i = 0; i < io.in[0].count; ++i) io.out[1].as<T>()[i] = static_cast<T>(logp[static_cast<size_t>(i)]);
  }
  auto logProb = [&](int64_t idx) { return sce ? logp[static_cast<size_t>(idx)] : static_cast<double>(x[idx]); };
  const Reduction red = reductionOf(l);
  T* out = io.out[0].as<T>();
  double total = 0, weights = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t e = b * inner + i, t = target(e);
      double loss = 0, wt = 0;
      if (!(hasIgnore && t == ignore)) {
        if (t < 0 || t >= c)
          opError(l, "target " + std::to_string(t) + " is out of range for " + std::to_string(c) + " classes");
        wt = w ? static_cast<double>(w[t]) : 1.0;
        loss = -wt * logProb((b * c + t) * inner + i);
      }
      if (red == Reduction::kNone) out[e] = static_cast<T>(loss);
      total += loss;
      weights += wt;
    }
  if (red == Reduction::kSum) out[0] = static_cast<T>(total);
  if (red == Reduction::kMean) out[0] = static_cast<T>(total / weights);
}

void refLoss(const LayerDesc& l, const KernelIO& io) {
  switch (io.in[0].type) {
    case DataType::kFLOAT: return lossKernel<float>(l, io);
    case DataType::kDOUBLE: return lossKernel<double>(l, io);
    default: opError(l, std::string("no CPU kernel for ") + toString(io.in[0].type));
  }
}

}  // namespace

void registerLossOps(OpRegistry& r) {
  for (const char* name : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) {
    OpDef d;
    d.name = name;
    d.infer = inferLoss;
    d.ref = refLoss;
    d.minOpset = 12;  // both were introduced in opset 12
    r.add(d);
  }
}

}  // namespace kiln
