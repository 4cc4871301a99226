#include "builder/tactic_filter.h"

#include <algorithm>
#include <utility>

namespace kiln {

bool tacticMatches(const std::string& name, const std::string& pattern) {
  // Names start with the op (<op>_<type>_<variant>), so a library or instruction set is matched
  // as whole words anywhere in the name.
  return name.rfind(pattern, 0) == 0 || ("_" + name + "_").find("_" + pattern + "_") != std::string::npos;
}

namespace {

//! Forwards every call to the backend it wraps; tactics() leaves out the disabled ones.
class TacticFilter : public Backend {
 public:
  TacticFilter(std::shared_ptr<Backend> inner, std::vector<std::string> patterns)
      : inner_(std::move(inner)), patterns_(std::move(patterns)) {}
  std::vector<Tactic> tactics(const LayerDesc& layer) const override {
    std::vector<Tactic> all = inner_->tactics(layer), kept;
    for (Tactic& t : all)
      if (!disabled(t.name)) kept.push_back(std::move(t));
    // The CPU has no fallback the engine could load (its reference kernel is offered only when no
    // optimized tactic supports a layer): a layer whose every tactic is disabled keeps them.
    if (kept.empty() && inner_->device() == DeviceType::kCPU) return inner_->tactics(layer);
    return kept;
  }
  std::vector<Tactic> fallbackTactics(const LayerDesc& layer) const override { return inner_->fallbackTactics(layer); }
  DeviceType device() const override { return inner_->device(); }
  std::string fingerprint() const override { return inner_->fingerprint(); }
  void* allocate(size_t bytes) override { return inner_->allocate(bytes); }
  void release(void* p) override { inner_->release(p); }
  void copyToDevice(void* dst, const void* src, size_t bytes, void* stream) override {
    inner_->copyToDevice(dst, src, bytes, stream);
  }
  void copyToHost(void* dst, const void* src, size_t bytes, void* stream) override {
    inner_->copyToHost(dst, src, bytes, stream);
  }
  void synchronize(void* stream) override { inner_->synchronize(stream); }
  void fill(void* p, int value, size_t bytes, void* stream) override { inner_->fill(p, value, bytes, stream); }
  DevicePeak peak() const override { return inner_->peak(); }
  ThreadPool* pool() override { return inner_->pool(); }
  int64_t preferredChannelBlock() const override { return inner_->preferredChannelBlock(); }
  int int8WeightLimit() const override { return inner_->int8WeightLimit(); }
  void makeCurrent() override { inner_->makeCurrent(); }
  int deviceIndex() const override { return inner_->deviceIndex(); }
  void* createStream() override { return inner_->createStream(); }
  void destroyStream(void* stream) override { inner_->destroyStream(stream); }
  void* createEvent(bool timing) override { return inner_->createEvent(timing); }
  void destroyEvent(void* event) override { inner_->destroyEvent(event); }
  void recordEvent(void* event, void* stream) override { inner_->recordEvent(event, stream); }
  void streamWaitEvent(void* stream, void* event) override { inner_->streamWaitEvent(stream, event); }
  float timeBetween(void* start, void* end) override { return inner_->timeBetween(start, end); }
  float timeMs(const std::function<void(void*)>& launch, int iterations) override {
    return inner_->timeMs(launch, iterations);
  }
  void* captureGraph(void* stream, const std::function<void()>& body, std::string* why) override {
    return inner_->captureGraph(stream, body, why);
  }
  void launchGraph(void* graph, void* stream) override { inner_->launchGraph(graph, stream); }
  void destroyGraph(void* graph) override { inner_->destroyGraph(graph); }
  void* allocateHost(size_t bytes) override { return inner_->allocateHost(bytes); }
  void releaseHost(void* p) override { inner_->releaseHost(p); }

 private:
  bool disabled(const std::string& name) const {
    return std::any_of(patterns_.begin(), patterns_.end(), [&](const std::string& p) { return tacticMatches(name, p); });
  }
  std::shared_ptr<Backend> inner_;
  std::vector<std::string> patterns_;
};

}  // namespace

std::shared_ptr<Backend> withoutTactics(std::shared_ptr<Backend> backend, const std::vector<std::string>& patterns) {
  if (patterns.empty()) return backend;
  return std::make_shared<TacticFilter>(std::move(backend), patterns);
}

}  // namespace kiln
