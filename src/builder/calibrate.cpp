// Calibration run (calibrate.h): the tensors to calibrate become outputs of a float32 CPU engine
// of a copy of the network (built untimed: only its values matter), which runs each batch once;
// each tensor's values go into a TensorHistogram (one pass, no batch is kept).
#include "builder/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "builder/calib_histogram.h"
#include "builder/passes/quantize_calibrated.h"
#include "ir/network_clone.h"
#include "kiln/runtime.h"

namespace kiln {

namespace {

using Sev = ILogger::Severity;

//! The calibration engine's own build messages are details of this build: INFO becomes VERBOSE.
class DemotingLogger : public ILogger {
 public:
  explicit DemotingLogger(ILogger& to) : to_(to) {}
  void log(Severity s, const std::string& msg) noexcept override {
    to_.log(s == Severity::kINFO ? Severity::kVERBOSE : s, "calibration engine: " + msg);
  }

 private:
  ILogger& to_;
};

//! Outputs whose size is known only once the data is (data-dependent shapes) grow a host buffer.
class HostAllocator : public IOutputAllocator {
 public:
  void* reallocateOutput(const std::string& name, void*, uint64_t size, uint64_t) override {
    auto& b = buffers[name];
    if (b.size() < size) b.resize(size);
    return b.empty() ? nullptr : b.data();
  }
  void notifyShape(const std::string& name, const Dims& dims) override { shapes[name] = dims; }
  std::map<std::string, std::vector<uint8_t>> buffers;
  std::map<std::string, Dims> shapes;
};

std::string algorithmName(const IInt8Calibrator& c) {
  std::string s = toString(c.getAlgorithm());
  if (c.getAlgorithm() == CalibrationAlgoType::kPERCENTILE) {
    char p[32];
    std::snprintf(p, sizeof p, ":%g", c.getPercentile());
    s += p;
  }
  return s;
}

void checkBatch(const Engine& engine, const std::map<std::string, HostTensor>& batch, int index) {
  const std::string where = "calibration batch " + std::to_string(index);
  for (const auto& [name, t] : batch) {
    if (engine.getTensorIOMode(name) != TensorIOMode::kINPUT) throw Error(where + " gives '" + name + "', which is not a network input");
    const DataType want = engine.getTensorDataType(name);
    if (t.type() != want)
      throw Error(where + ": input '" + name + "' is " + toString(t.type()) + ", the network's input is " + toString(want));
    const Dims net = engine.getTensorShape(name);
    bool fits = net.size() == t.dims().size();
    for (size_t k = 0; fits && k < net.size(); ++k) fits = net[k] < 0 || net[k] == t.dims()[k];
    if (!fits)
      throw Error(where + ": input '" + name + "' has dims " + toString(t.dims()) + ", the network's input is " + toString(net));
  }
  for (int i = 0; i < engine.getNbIOTensors(); ++i) {
    const std::string name = engine.getIOTensorName(i);
    if (engine.getTensorIOMode(name) == TensorIOMode::kINPUT && !batch.count(name))
      throw Error(where + " has no tensor for input '" + name + "'");
  }
}

}  // namespace

CalibrationTable calibrate(const Network& net, const BuilderConfig& cfg, IInt8Calibrator& calibrator, ILogger& log) {
  const std::string algorithm = algorithmName(calibrator);
  if (calibrator.getAlgorithm() == CalibrationAlgoType::kPERCENTILE && !(calibrator.getPercentile() > 0 && calibrator.getPercentile() <= 100))
    throw Error("calibration percentile must be in (0, 100], got " + std::to_string(calibrator.getPercentile()));
  const std::vector<uint8_t> cached = calibrator.readCalibrationCache();
  if (!cached.empty()) {
    CalibrationTable t = parseCalibrationTable(cached);
    log.log(Sev::kINFO, "INT8 calibration: using the cache (" + std::to_string(t.scales.size()) + " tensors, " + t.algorithm + ")");
    if (t.algorithm != algorithm)
      log.log(Sev::kWARNING, "the calibration cache was made with '" + t.algorithm + "', not the requested '" + algorithm +
                                 "'; its scales are used as they are (delete it to calibrate again)");
    return t;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Network> copy = cloneNetwork(net);
  std::vector<std::string> names;
  for (const auto& l : copy->layers()) {
    if (!isQuantizable(*l)) continue;
    Tensor* x = l->inputs[0];
    if (!x->isInput) copy->markOutput(x);  // a network input is read from the batch itself
    if (std::find(names.begin(), names.end(), x->name) == names.end()) names.push_back(x->name);
  }
  // Residual Adds: an input a quantizable Conv computes (through a BatchNormalization the builder
  // folds into it) is observed too, and recorded under the name the folded conv's output keeps
  // (the conv's own: fold_batchnorm), so that implicit INT8 can quantize a downsample conv's output
  // and give it to the block's last conv as its int8 residual.
  std::map<std::string, std::string> tableName;  // observed tensor -> its name in the table
  for (const auto& l : copy->layers()) {
    if (l->op != "Add" || l->inputs.size() != 2) continue;
    for (Tensor* t : l->inputs) {
      if (!t || t->isInput || t->isConstant() || !t->producer) continue;
      Tensor* key = t;
      const Layer* p = t->producer;
      if (p->op == "BatchNormalization" && p->outputs.size() == 1 && p->inputs[0]->producer) key = p->inputs[0], p = key->producer;
      if (p->op != "Conv" || !isQuantizable(*p)) continue;
      copy->markOutput(t);
      if (std::find(names.begin(), names.end(), t->name) == names.end()) names.push_back(t->name);
      tableName[t->name] = key->name;
    }
  }
  CalibrationTable table;
  table.algorithm = algorithm;
  if (names.empty()) {
    log.log(Sev::kWARNING, "INT8 calibration: the network has no layer implicit quantization takes (Conv, MatMul / Gemm with constant weights)");
    return table;
  }
  BuilderConfig c;
  c.setDevice(DeviceType::kCPU);
  c.setThreads(cfg.threads());
  c.setBuilderOptimizationLevel(0);
  c.setDisabledTactics(cfg.disabledTactics());
  for (const OptimizationProfile& p : cfg.profiles()) c.addOptimizationProfile(p);
  DemotingLogger quiet(log);
  std::unique_ptr<Engine> engine = Builder(quiet).build(*copy, c);
  std::unique_ptr<ExecutionContext> ctx = engine->createExecutionContext();
  std::map<std::string, TensorHistogram> hist;
  int batches = 0;
  for (std::map<std::string, HostTensor> batch; batch.clear(), calibrator.getBatch(batch); ++batches) {
    checkBatch(*engine, batch, batches);
    for (auto& [name, t] : batch) {
      ctx->setInputShape(name, t.dims());
      ctx->setTensorAddress(name, t.data());
    }
    HostAllocator alloc;
    std::map<std::string, HostTensor> outs;
    for (int i = 0; i < engine->getNbIOTensors(); ++i) {
      const std::string name = engine->getIOTensorName(i);
      if (engine->getTensorIOMode(name) != TensorIOMode::kOUTPUT) continue;
      const Dims d = ctx->getTensorShape(name);
      bool known = true;
      for (int64_t v : d) known = known && v >= 0;
      if (known) {
        outs[name] = HostTensor(engine->getTensorDataType(name), d);
        ctx->setTensorAddress(name, outs[name].data());
      } else {
        ctx->setOutputAllocator(name, &alloc);
      }
    }
    ctx->enqueue();
    for (const std::string& name : names) {
      if (engine->getTensorDataType(name) != DataType::kFLOAT) continue;
      if (auto in = batch.find(name); in != batch.end()) {
        hist[name].add(in->second.as<float>(), in->second.count());
      } else if (auto it = outs.find(name); it != outs.end()) {
        hist[name].add(it->second.as<float>(), it->second.count());
      } else {
        auto& b = alloc.buffers[name];
        hist[name].add(reinterpret_cast<const float*>(b.data()), volume(alloc.shapes.at(name)));
      }
    }
    for (const auto& [name, _] : alloc.buffers) ctx->setOutputAllocator(name, nullptr);
  }
  if (batches == 0) throw Error("INT8 calibration: the calibrator gave no batch (getBatch returned false at once)");
  for (const auto& [name, h] : hist) {
    if (h.hasNonFinite()) log.log(Sev::kWARNING, "INT8 calibration: tensor '" + name + "' took NaN or infinite values; they were left out of its range");
    const bool isUnsigned = h.minValue() >= 0;
    const double amax = calibratedAmax(h, calibrator.getAlgorithm(), calibrator.getPercentile(), isUnsigned);
    ActivationScale a;
    a.isUnsigned = isUnsigned;
    a.scale = amax > 0 ? static_cast<float>(amax / (isUnsigned ? 255.0 : 127.0)) : 1.f;
    if (!(a.scale > 0) || !std::isfinite(a.scale)) a.scale = 1.f;  // a denormal range: any positive step quantizes it to 0
    auto alias = tableName.find(name);
    table.scales[alias == tableName.end() ? name : alias->second] = a;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log.log(Sev::kINFO, "INT8 calibration (" + algorithm + "): " + std::to_string(batches) + " batch(es), " +
                          std::to_string(table.scales.size()) + " tensors, " + std::to_string(secs) + " s");
  const std::vector<uint8_t> bytes = serializeCalibrationTable(table);
  calibrator.writeCalibrationCache(bytes.data(), bytes.size());
  return table;
}

}  // namespace kiln
