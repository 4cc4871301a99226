// Running an engine from the CLI: I/O buffers per execution context and trtexec's timing loop.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/device.h"
#include "kiln/runtime.h"
#include "reporting.h"

namespace kiln::cli {

//! One execution context with its own input/output buffers. On the CPU the context reads and
//! writes the host buffers directly; on the GPU it uses device copies.
class InferenceSlot {
 public:
  //! `inputs` holds a host tensor (with its runtime dims) for every engine input.
  //! On the GPU, `useCudaGraph` captures one enqueue into a graph and replays it (falling back to
  //! plain enqueue, with a warning, when capture is not possible).
  //! `profile`: the optimization profile the context runs with; `gpu`: the engine's CUDA device.
  //! `poisonFreed`: ExecutionContext::setPoisonFreedMemory (a debugging aid).
  InferenceSlot(const Engine& engine, const std::map<std::string, HostTensor>& inputs, bool useCudaGraph = false,
                int profile = 0, int gpu = 0, bool poisonFreed = false);
  ~InferenceSlot();
  InferenceSlot(const InferenceSlot&) = delete;
  //! Whether enqueue replays a captured CUDA graph (--useCudaGraph and the capture succeeded).
  bool usesGraph() const { return graph_; }
  InferenceSlot& operator=(const InferenceSlot&) = delete;

  //! One inference: inputs to the device (unless !transfers), enqueue, wait, outputs back.
  //! Times are relative to `epochMs` (ms on the steady clock). On the GPU, H2D, compute and D2H
  //! are measured with events on the slot's stream and the latency is their sum (as trtexec).
  IterationTimes run(bool transfers, double epochMs);
  //! Runs with plain enqueue (no graph), e.g. for per-layer profiling.
  void runPlain(bool transfers);
  //! Copies the outputs to the host (if needed) and returns them in engine order.
  std::vector<NamedTensor> outputs();
  ExecutionContext& context() { return *context_; }
  //! Makes the slot's device current on the calling thread (before running it from a new thread).
  void bindThread() {
    if (gpu_) gpu_->makeCurrent();
  }

 private:
  struct Binding {
    std::string name;
    bool isInput = false;
    HostTensor host;
    void* device = nullptr;  //!< == host.data() on the CPU (data-dependent outputs: their own buffer)
    void* pinned = nullptr;  //!< page-locked staging buffer (GPU)
    //! An output whose shape is known only during the run: its buffers grow through the slot's
    //! output allocator, and `dims` is the shape the engine reported for the last run.
    bool dataDependent = false;
    size_t capacity = 0;
    Dims dims;
    size_t bytes() const { return dataDependent ? static_cast<size_t>(volume(dims)) * elementSize(host.type()) : host.bytes(); }
  };
  class OutputAllocator;
  friend class OutputAllocator;
  void copyInputs();
  void copyOutputs();
  float elapsed(void* a, void* b) const;
  std::unique_ptr<ExecutionContext> context_;
  std::unique_ptr<Device> gpu_;  //!< null on the CPU (the context reads the host buffers)
  std::vector<Binding> bindings_;
  std::unique_ptr<IOutputAllocator> allocator_;  //!< for data-dependent outputs
  void* stream_ = nullptr;                   //!< GPU: this slot's stream
  void* events_[4] = {nullptr, nullptr, nullptr, nullptr};  //!< start, after H2D, after compute, end
  bool graph_ = false;                       //!< a CUDA graph was captured
};

//! Now on the steady clock, in ms.
double nowMs();

struct TimingSettings {
  double warmUpMs = 200;
  double durationS = 3;
  int iterations = 10;
  bool transfers = true;
};

//! trtexec's loop on every slot concurrently (one thread per slot when several): warm up for
//! warmUpMs, then run until both `iterations` runs and `durationS` seconds are done. Returns
//! the timed iterations of all slots, sorted by start time, relative to the first start.
std::vector<IterationTimes> runTimingLoop(std::vector<std::unique_ptr<InferenceSlot>>& slots,
                                          const TimingSettings& settings, int& warmUpRuns);

}  // namespace kiln::cli
