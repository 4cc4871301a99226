#include "inference.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <thread>

#include "kiln/device.h"

namespace kiln::cli {

namespace {

// Output buffers start as quiet NaN (floats) or 0xA5 bytes (integers, bool: neither 0 nor 1), so
// that an output the engine never writes shows in --exportOutput instead of reading as zeros (the
// model tests compare those outputs with ONNX Runtime's).
void poisonOutput(HostTensor& t) {
  const DataType type = t.type();
  for (int64_t i = 0; i < t.count(); ++i) {
    switch (type) {
      case DataType::kFLOAT: t.as<float>()[i] = std::numeric_limits<float>::quiet_NaN(); break;
      case DataType::kDOUBLE: t.as<double>()[i] = std::numeric_limits<double>::quiet_NaN(); break;
      case DataType::kHALF: t.as<uint16_t>()[i] = 0x7E00; break;
      case DataType::kBF16: t.as<uint16_t>()[i] = 0x7FC0; break;
      default: std::memset(t.data(), 0xA5, t.bytes()); return;
    }
  }
}

}  // namespace

// Grows a data-dependent output's buffers (device and page-locked staging on the GPU, host memory
// on the CPU) to the size the engine asks for; keeps them when they are large enough.
class InferenceSlot::OutputAllocator : public IOutputAllocator {
 public:
  explicit OutputAllocator(InferenceSlot& slot) : slot_(slot) {}
  void* reallocateOutput(const std::string& name, void*, uint64_t size, uint64_t) override {
    Binding& b = find(name);
    if (size <= b.capacity && b.device) return b.device;
    const size_t bytes = std::max<size_t>(static_cast<size_t>(size), 64);
    if (slot_.gpu_) {
      slot_.gpu_->synchronize(slot_.stream_);  // the previous run's copies may still read the old buffers
      if (b.device) slot_.gpu_->release(b.device);
      if (b.pinned) slot_.gpu_->releaseHost(b.pinned);
      b.device = nullptr;
      b.pinned = nullptr;
      b.device = slot_.gpu_->allocate(bytes);
      b.pinned = slot_.gpu_->allocateHost(bytes);
    } else {
      std::free(b.device);
      b.device = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
      if (!b.device) throw Error("out of host memory for output '" + name + "' (" + std::to_string(bytes) + " bytes)");
    }
    b.capacity = bytes;
    return b.device;
  }
  void notifyShape(const std::string& name, const Dims& dims) override { find(name).dims = dims; }

 private:
  Binding& find(const std::string& name) {
    for (Binding& b : slot_.bindings_)
      if (b.name == name && b.dataDependent) return b;
    throw Error("internal: no data-dependent output '" + name + "'");
  }
  InferenceSlot& slot_;
};

double nowMs() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

InferenceSlot::InferenceSlot(const Engine& engine, const std::map<std::string, HostTensor>& inputs, bool useCudaGraph,
                             int profile, int gpu, bool poisonFreed)
    : context_(engine.createExecutionContext()) {
  context_->setOptimizationProfile(profile);
  context_->setPoisonFreedMemory(poisonFreed);
  if (engine.device() == DeviceType::kGPU) {
    gpu_ = std::make_unique<Device>(DeviceType::kGPU, gpu);
    stream_ = gpu_->createStream();
    for (void*& e : events_) e = gpu_->createEvent();
  }
  int n = engine.getNbIOTensors();
  auto bind = [&](Binding& b) {
    if (gpu_) {
      size_t bytes = std::max<size_t>(b.host.bytes(), 64);
      b.device = gpu_->allocate(bytes);
      b.pinned = gpu_->allocateHost(bytes);  // page-locked: copies are truly asynchronous
      std::memcpy(b.pinned, b.host.data(), b.host.bytes());
      // An input's data (inputs whose values determine shapes are read when output shapes are
      // queried below), an output's poison.
      gpu_->copyToDevice(b.device, b.pinned, b.host.bytes(), stream_);
    } else {
      b.device = b.host.data();
    }
    context_->setTensorAddress(b.name, b.device);
  };
  // Inputs first, bound with their data: output shapes depend on the input shapes and, for shape
  // tensors (an Expand's shape as a graph input), on their values.
  for (int i = 0; i < n; ++i) {
    std::string name = engine.getIOTensorName(i);
    if (engine.getTensorIOMode(name) != TensorIOMode::kINPUT) continue;
    auto it = inputs.find(name);
    if (it == inputs.end()) throw Error("no data for input '" + name + "'");
    if (!isStatic(engine.getTensorShape(name))) context_->setInputShape(name, it->second.dims());
    bindings_.push_back(Binding{name, true, it->second, nullptr, nullptr});
  }
  for (Binding& b : bindings_) bind(b);
  if (gpu_) gpu_->synchronize(stream_);
  const size_t nbInputs = bindings_.size();
  for (int i = 0; i < n; ++i) {
    std::string name = engine.getIOTensorName(i);
    if (engine.getTensorIOMode(name) != TensorIOMode::kOUTPUT) continue;
    Dims dims = context_->getTensorShape(name);
    if (!isStatic(dims)) {  // known only during the run: memory from the output allocator
      Binding b{name, false, HostTensor(engine.getTensorDataType(name), Dims{0}), nullptr, nullptr};
      b.dataDependent = true;
      b.dims = dims;
      bindings_.push_back(b);
      continue;
    }
    HostTensor host(engine.getTensorDataType(name), dims);
    poisonOutput(host);
    bindings_.push_back(Binding{name, false, host, nullptr, nullptr});
  }
  for (size_t k = nbInputs; k < bindings_.size(); ++k) {
    if (!bindings_[k].dataDependent) {
      bind(bindings_[k]);
      continue;
    }
    if (!allocator_) allocator_ = std::make_unique<OutputAllocator>(*this);
    context_->setOutputAllocator(bindings_[k].name, allocator_.get());
  }
  copyInputs();  // so that runs without transfers still read the real inputs
  if (gpu_) {
    gpu_->synchronize(stream_);
    if (useCudaGraph) graph_ = context_->captureGraph(stream_);
  }
}

InferenceSlot::~InferenceSlot() {
  if (!gpu_) {
    for (Binding& b : bindings_)
      if (b.dataDependent) std::free(b.device);
    return;
  }
  gpu_->synchronize(stream_);
  for (Binding& b : bindings_) {
    if (b.device) gpu_->release(b.device);
    if (b.pinned) gpu_->releaseHost(b.pinned);
  }
  for (void* e : events_) gpu_->destroyEvent(e);
  gpu_->destroyStream(stream_);
}

void InferenceSlot::copyInputs() {
  if (!gpu_) return;
  for (Binding& b : bindings_)
    if (b.isInput) gpu_->copyToDevice(b.device, b.pinned, b.host.bytes(), stream_);
}

void InferenceSlot::copyOutputs() {
  if (!gpu_) return;
  for (Binding& b : bindings_)
    if (!b.isInput && b.bytes()) gpu_->copyToHost(b.pinned, b.device, b.bytes(), stream_);
}

float InferenceSlot::elapsed(void* a, void* b) const {
  return gpu_->elapsedMs(a, b);
}

void InferenceSlot::runPlain(bool transfers) {
  if (transfers) copyInputs();
  context_->enqueue(stream_);
  if (transfers) copyOutputs();
  if (gpu_) gpu_->synchronize(stream_);
}

IterationTimes InferenceSlot::run(bool transfers, double epochMs) {
  IterationTimes t;
  double start = nowMs();
  if (!gpu_) {
    context_->enqueue(nullptr);
    double end = nowMs();
    t.startMs = start - epochMs;
    t.endMs = end - epochMs;
    t.enqueueMs = t.computeMs = end - start;
    return t;
  }
  gpu_->recordEvent(events_[0], stream_);
  if (transfers) copyInputs();
  gpu_->recordEvent(events_[1], stream_);
  double enqueueStart = nowMs();
  if (graph_) context_->launchGraph(stream_);
  else context_->enqueue(stream_);
  double enqueueEnd = nowMs();
  gpu_->recordEvent(events_[2], stream_);
  if (transfers) copyOutputs();
  gpu_->recordEvent(events_[3], stream_);
  gpu_->synchronize(stream_);
  t.h2dMs = elapsed(events_[0], events_[1]);
  t.computeMs = elapsed(events_[1], events_[2]);
  t.d2hMs = elapsed(events_[2], events_[3]);
  t.enqueueMs = enqueueEnd - enqueueStart;
  t.startMs = start - epochMs;
  t.endMs = t.startMs + t.h2dMs + t.computeMs + t.d2hMs;
  return t;
}

std::vector<NamedTensor> InferenceSlot::outputs() {
  for (const Binding& b : bindings_)
    if (b.dataDependent && !isStatic(b.dims)) throw Error("output '" + b.name + "' has no data yet: the engine has not run");
  if (gpu_) {
    copyOutputs();
    gpu_->synchronize(stream_);
    for (Binding& b : bindings_) {
      if (b.isInput) continue;
      if (b.dataDependent) b.host = HostTensor(b.host.type(), b.dims);
      if (b.bytes()) std::memcpy(b.host.data(), b.pinned, b.bytes());
    }
  }
  std::vector<NamedTensor> out;
  for (Binding& b : bindings_) {
    if (b.isInput) continue;
    if (b.dataDependent && !gpu_) {  // with the shape of the last run
      b.host = HostTensor(b.host.type(), b.dims);
      if (b.bytes()) std::memcpy(b.host.data(), b.device, b.bytes());
    }
    out.emplace_back(b.name, b.host);
  }
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
    slot.bindThread();
    double warmStart = nowMs();
    while (nowMs() - warmStart < s.warmUpMs) {
      slot.run(s.transfers, 0.0);
      ++r.warmUpRuns;
    }
    // --duration spans the first timed query's start to the last one's end (the reported
    // walltime), whatever the scheduler does between a query's end and this check.
    const double durationMs = s.durationS * 1000.0;
    while (static_cast<int>(r.times.size()) < s.iterations || r.times.back().endMs < r.times.front().startMs + durationMs)
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
