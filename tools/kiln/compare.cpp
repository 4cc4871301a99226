// --compareWith=fp32 (compare.h). Marking a tensor as an output keeps it from being fused away,
// so both engines lose the same fusions (an activation into its conv); BatchNorm folding and the
// quantized layers themselves are kept, since only inputs of Conv/MatMul/Gemm are marked.
#include "compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "engine_io.h"
#include "inference.h"

namespace kiln::cli {

namespace {

struct Compared {
  std::string tensor, layer;  //!< layer: the model's node that produces the tensor
};

struct Metrics {
  double maxAbs = 0, rel = 0, cosine = 1;
};

Metrics measure(const HostTensor& a, const HostTensor& ref) {
  Metrics m;
  double refMax = 0, dot = 0, na = 0, nr = 0;
  const float* x = a.as<float>();
  const float* y = ref.as<float>();
  for (int64_t i = 0; i < ref.count(); ++i) {
    m.maxAbs = std::max(m.maxAbs, std::fabs(double(x[i]) - y[i]));
    refMax = std::max(refMax, std::fabs(double(y[i])));
    dot += double(x[i]) * y[i], na += double(x[i]) * x[i], nr += double(y[i]) * y[i];
  }
  if (std::isnan(m.maxAbs)) m.maxAbs = INFINITY;
  m.rel = refMax > 0 ? m.maxAbs / refMax : (m.maxAbs > 0 ? INFINITY : 0);
  m.cosine = na > 0 && nr > 0 ? dot / std::sqrt(na * nr) : (na == nr ? 1 : 0);
  return m;
}

}  // namespace

int compareWithFp32(const Options& o, const EngineBuilder& build, ILogger& logger) {
  std::vector<Compared> compared;
  auto instrument = [&compared](Network& net) {
    const bool first = compared.empty();
    auto note = [&](Tensor* t) {
      if (first && std::none_of(compared.begin(), compared.end(), [t](const Compared& c) { return c.tensor == t->name; }))
        compared.push_back({t->name, t->producer ? t->producer->name : std::string("(input)")});
    };
    for (const auto& l : net.layers()) {
      if (l->op != "Conv" && l->op != "MatMul" && l->op != "Gemm") continue;
      Tensor* x = l->inputs.empty() ? nullptr : l->inputs[0];
      if (!x || x->type != DataType::kFLOAT || x->isConstant() || x->isInput) continue;
      net.markOutput(x);
      note(x);
    }
    for (Tensor* out : std::vector<Tensor*>(net.outputs()))
      if (out->type == DataType::kFLOAT) note(out);
  };
  logger.log(ILogger::Severity::kINFO, "--compareWith=fp32: building the engine under test");
  std::unique_ptr<Engine> tested = build(o, instrument);
  Options fp32 = o;
  fp32.int8 = fp32.fp16 = fp32.bf16 = false;
  fp32.calibData.clear(), fp32.calibCache.clear();
  fp32.layerPrecisions.clear(), fp32.layerOutputTypes.clear();
  fp32.precisionConstraints = "none";
  logger.log(ILogger::Severity::kINFO, "--compareWith=fp32: building the float32 reference engine");
  std::unique_ptr<Engine> reference = build(fp32, instrument);

  const std::map<std::string, HostTensor> inputs = prepareInputs(*tested, o, logger);
  std::map<std::string, HostTensor> got, want;
  for (auto [engine, into] : {std::pair{tested.get(), &got}, std::pair{reference.get(), &want}}) {
    InferenceSlot slot(*engine, inputs, false, o.useProfile, o.gpu);
    slot.runPlain(true);
    for (auto& [name, t] : slot.outputs()) (*into)[name] = t;
  }
  std::printf("[I] Accuracy against FP32 (%zu tensors; a tensor fails when max|a-b| / max|fp32| > %g):\n", compared.size(),
              o.compareTolerance);
  std::printf("[I]   %-12s %-12s %-9s  %-40s %s\n", "max_abs", "rel_error", "cosine", "tensor", "produced by");
  const Compared* firstBad = nullptr;
  Metrics bad;
  for (const Compared& c : compared) {
    auto a = got.find(c.tensor), b = want.find(c.tensor);
    if (a == got.end() || b == want.end() || a->second.type() != DataType::kFLOAT || b->second.type() != DataType::kFLOAT ||
        a->second.count() != b->second.count())
      continue;
    const Metrics m = measure(a->second, b->second);
    const bool over = !(m.rel <= o.compareTolerance);
    std::printf("[I]   %-12.5g %-12.5g %-9.6f  %-40s %s%s\n", m.maxAbs, m.rel, m.cosine, c.tensor.c_str(), c.layer.c_str(),
                over ? "  <-- over tolerance" : "");
    if (over && !firstBad) firstBad = &c, bad = m;
  }
  std::fflush(stdout);
  if (firstBad)
    throw Error("--compareWith=fp32: the first tensor over --compareTolerance=" + std::to_string(o.compareTolerance) + " is '" +
                firstBad->tensor + "', produced by layer '" + firstBad->layer + "' (relative error " + std::to_string(bad.rel) +
                ", cosine " + std::to_string(bad.cosine) + ")");
  std::printf("[I] Every compared tensor is within the tolerance\n");
  return 0;
}

}  // namespace kiln::cli
