#include "load_and_run.h"

#include <map>
#include <memory>
#include <vector>

#include "kiln/kiln.h"
#include "runtime/engine_graph.h"
#include "runtime/engine_impl.h"

namespace kiln::fuzz {

namespace {

constexpr int64_t kMaxElements = int64_t(1) << 20;  // larger mutant shapes are loaded, not run
constexpr int kMaxProfilesRun = 2;
constexpr int kMaxLayersBuilt = 256;  // larger fuzzed ONNX graphs are imported, not built

class SilentLogger : public ILogger {
 public:
  void log(Severity, const std::string&) noexcept override {}
};
SilentLogger gSilent;

// Deterministic inputs: floats in [-1, 1), integers 1 (a valid index and a non-zero dim), bools 0.
HostTensor makeInput(DataType type, const Dims& dims) {
  HostTensor t(type, dims);
  const int64_t n = t.count();
  for (int64_t i = 0; i < n; ++i) {
    const float f = static_cast<float>((i * 7919) % 2000) / 1000.f - 1.f;
    switch (type) {
      case DataType::kFLOAT: t.as<float>()[i] = f; break;
      case DataType::kDOUBLE: t.as<double>()[i] = f; break;
      case DataType::kHALF: t.as<uint16_t>()[i] = floatToHalf(f); break;
      case DataType::kBF16: t.as<uint16_t>()[i] = floatToBf16(f); break;
      case DataType::kINT64: t.as<int64_t>()[i] = 1; break;
      case DataType::kINT32: t.as<int32_t>()[i] = 1; break;
      default: break;  // zeros
    }
  }
  return t;
}

bool small(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) {
    if (x < 0 || x > kMaxElements) return false;
    n *= x;
    if (n > kMaxElements) return false;
  }
  return true;
}

// Runs profile p at its min shapes; false when the shapes are too large to run here.
bool runProfile(const Engine& engine, int p) {
  auto ctx = engine.createExecutionContext();
  ctx->setOptimizationProfile(p);
  std::map<std::string, HostTensor> buffers;
  std::vector<std::string> outputs;
  for (int i = 0; i < engine.getNbIOTensors(); ++i) {
    const std::string name = engine.getIOTensorName(i);
    if (engine.getTensorIOMode(name) != TensorIOMode::kINPUT) {
      outputs.push_back(name);
      continue;
    }
    Dims d = engine.getTensorShape(name);
    if (!isStatic(d)) {
      d = engine.getProfileShape(name, p, OptProfileSelector::kMIN);
      ctx->setInputShape(name, d);
    }
    if (!small(d)) return false;
    HostTensor& t = buffers[name] = makeInput(engine.getTensorDataType(name), d);
    ctx->setTensorAddress(name, t.data());
  }
  for (const std::string& name : outputs) {
    if (engine.getTensorIOMode(name) == TensorIOMode::kINPUT) continue;
    Dims d = ctx->getTensorShape(name);
    if (!small(d)) return false;
    HostTensor& t = buffers[name + "\x1f out"] = HostTensor(engine.getTensorDataType(name), d);
    ctx->setTensorAddress(name, t.data());
  }
  ctx->enqueue();
  return true;
}

template <typename Outcome, typename Fn>
void guarded(Outcome& o, Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    o.error = e.what();
    if (o.error.empty()) o.violation = "kiln::Error with an empty message";
  } catch (const std::exception& e) {
    o.violation = std::string("not a kiln::Error: ") + typeid(e).name() + ": " + e.what();
  } catch (...) {
    o.violation = "a non-std exception";
  }
}

}  // namespace

PlanOutcome loadAndRunPlan(const uint8_t* data, size_t size, bool verifyChecksum) {
  PlanOutcome o;
  guarded(o, [&] {
    EngineGraph g = deserializePlan(data, size, verifyChecksum);
    Engine engine(instantiateEngine(std::move(g), gSilent, 1));
    o.loaded = true;
    bool all = true;
    for (int p = 0; p < std::min(engine.getNbOptimizationProfiles(), kMaxProfilesRun); ++p) all = runProfile(engine, p) && all;
    o.ran = all;
  });
  return o;
}

CacheOutcome loadAndUseTimingCache(const uint8_t* data, size_t size) {
  CacheOutcome o;
  guarded(o, [&] {
    TimingCache cache = TimingCache::deserialize(data, size);
    o.loaded = true;
    Network net;
    Tensor* x = net.addInput("x", DataType::kFLOAT, {2, 4});
    HostTensor w(DataType::kFLOAT, {4, 3});
    Layer* mm = net.addMatMul(x, net.addConstant("w", w));
    net.markOutput(net.addActivation(mm->outputs[0], "Relu")->outputs[0]);
    BuilderConfig cfg;
    cfg.setThreads(1);
    cfg.setTimingCache(&cache);
    Builder(gSilent).build(net, cfg);
    cache.serialize();
  });
  return o;
}

ImportOutcome importBuildAndRunOnnx(const uint8_t* data, size_t size) {
  ImportOutcome o;
  guarded(o, [&] {
    Network net;
    parseOnnxBuffer(data, size, net, "", gSilent);
    o.imported = true;
    // Large graphs and dynamic inputs are imported only: a build per input must stay fast.
    if (net.nbLayers() > kMaxLayersBuilt) return;
    OptimizationProfile profile;
    bool dynamic = false;
    for (const Tensor* in : net.inputs()) {
      if (!small(in->dims) && isStatic(in->dims)) return;
      if (isStatic(in->dims)) continue;
      Dims d = in->dims;
      for (int64_t& x : d) x = x < 0 ? 1 : x;  // dynamic dims run at 1
      if (!small(d)) return;
      for (auto sel : {OptProfileSelector::kMIN, OptProfileSelector::kOPT, OptProfileSelector::kMAX}) profile.setDimensions(in->name, sel, d);
      dynamic = true;
    }
    BuilderConfig cfg;
    cfg.setThreads(1);
    cfg.setBuilderOptimizationLevel(0);
    if (dynamic) cfg.addOptimizationProfile(profile);
    std::unique_ptr<Engine> engine = Builder(gSilent).build(net, cfg);
    o.built = true;
    o.ran = runProfile(*engine, 0);
  });
  return o;
}

}  // namespace kiln::fuzz
