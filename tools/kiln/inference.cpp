#include "inference.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>

// Device buffers for GPU engines: the public API has no allocation or copy entry points, so the
// CLI uses the backend contract for them (CPU engines never touch it).
#include "backends/backend.h"

namespace kiln::cli {

double nowMs() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

InferenceSlot::InferenceSlot(const Engine& engine, const std::map<std::string, HostTensor>& inputs)
    : context_(engine.createExecutionContext()) {
  if (engine.device() == DeviceType::kGPU) gpu_ = getBackend(DeviceType::kGPU, 0);
  int n = engine.getNbIOTensors();
  // Inputs first: output shapes depend on the input shapes.
  for (int i = 0; i < n; ++i) {
    std::string name = engine.getIOTensorName(i);
    if (engine.getTensorIOMode(name) != TensorIOMode::kINPUT) continue;
    auto it = inputs.find(name);
    if (it == inputs.end()) throw Error("no data for input '" + name + "'");
    if (!isStatic(engine.getTensorShape(name))) context_->setInputShape(name, it->second.dims());
    bindings_.push_back(Binding{name, true, it->second, nullptr});
  }
  for (int i = 0; i < n; ++i) {
    std::string name = engine.getIOTensorName(i);
    if (engine.getTensorIOMode(name) != TensorIOMode::kOUTPUT) continue;
    Dims dims = context_->getTensorShape(name);
    if (!isStatic(dims))
      throw UnsupportedError("output '" + name + "' has a data-dependent shape " + toString(dims) +
                             " that is only known after inference; the CLI cannot allocate it");
    bindings_.push_back(Binding{name, false, HostTensor(engine.getTensorDataType(name), dims), nullptr});
  }
  for (Binding& b : bindings_) {
    b.device = gpu_ ? gpu_->allocate(std::max<size_t>(b.host.bytes(), 64)) : b.host.data();
    if (!b.device) throw Error("out of device memory for tensor '" + b.name + "'");
    context_->setTensorAddress(b.name, b.device);
  }
  copyInputs();  // so that runs without transfers still read the real inputs
}

InferenceSlot::~InferenceSlot() {
  if (!gpu_) return;
  for (Binding& b : bindings_)
    if (b.device) gpu_->release(b.device);
}

void InferenceSlot::copyInputs() {
  if (!gpu_) return;
  for (Binding& b : bindings_)
    if (b.isInput) gpu_->copyToDevice(b.device, b.host.data(), b.host.bytes(), nullptr);
}

void InferenceSlot::copyOutputs() {
  if (!gpu_) return;
  for (Binding& b : bindings_)
    if (!b.isInput) gpu_->copyToHost(b.host.data(), b.device, b.host.bytes(), nullptr);
}

IterationTimes InferenceSlot::run(bool transfers, double epochMs) {
  double start = nowMs();
  if (transfers) copyInputs();
  double enqueueStart = nowMs();
  context_->enqueue(nullptr);
  double enqueueEnd = nowMs();
  if (gpu_) gpu_->synchronize(nullptr);
  double computeEnd = nowMs();
  if (transfers) copyOutputs();
  double end = nowMs();
  IterationTimes t;
  t.startMs = start - epochMs;
  t.endMs = end - epochMs;
  t.h2dMs = enqueueStart - start;
  t.enqueueMs = enqueueEnd - enqueueStart;
  t.computeMs = computeEnd - enqueueStart;
  t.d2hMs = end - computeEnd;
  return t;
}

std::vector<NamedTensor> InferenceSlot::outputs() {
  copyOutputs();
  std::vector<NamedTensor> out;
  for (const Binding& b : bindings_)
    if (!b.isInput) out.emplace_back(b.name, b.host);
  return out;
}

namespace {

struct SlotResult {
  std::vector<IterationTimes> times;
  int warmUpRuns = 0;
  std::exception_ptr error;
};

void runSlot(InferenceSlot& slot, const TimingSettings& s, SlotResult& r) {
  try {
    double warmStart = nowMs();
    while (nowMs() - warmStart < s.warmUpMs) {
      slot.run(s.transfers, 0.0);
      ++r.warmUpRuns;
    }
    double endBy = nowMs() + s.durationS * 1000.0;
    while (static_cast<int>(r.times.size()) < s.iterations || nowMs() < endBy)
      r.times.push_back(slot.run(s.transfers, 0.0));
  } catch (...) {
    r.error = std::current_exception();
  }
}

}  // namespace

std::vector<IterationTimes> runTimingLoop(std::vector<std::unique_ptr<InferenceSlot>>& slots,
                                          const TimingSettings& settings, int& warmUpRuns) {
  std::vector<SlotResult> results(slots.size());
  if (slots.size() == 1) {
    runSlot(*slots[0], settings, results[0]);
  } else {
    std::vector<std::thread> threads;
    for (size_t i = 0; i < slots.size(); ++i)
      threads.emplace_back(runSlot, std::ref(*slots[i]), std::cref(settings), std::ref(results[i]));
    for (auto& t : threads) t.join();
  }
  std::vector<IterationTimes> all;
  warmUpRuns = 0;
  for (auto& r : results) {
    if (r.error) std::rethrow_exception(r.error);
    warmUpRuns += r.warmUpRuns;
    all.insert(all.end(), r.times.begin(), r.times.end());
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.startMs < b.startMs; });
  double origin = all.empty() ? 0.0 : all.front().startMs;
  for (auto& t : all) {
    t.startMs -= origin;
    t.endMs -= origin;
  }
  return all;
}

}  // namespace kiln::cli
