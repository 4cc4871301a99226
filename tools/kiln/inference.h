// Running an engine from the CLI: I/O buffers per execution context and trtexec's timing loop.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/runtime.h"
#include "reporting.h"

namespace kiln {
class Backend;
}

namespace kiln::cli {

//! One execution context with its own input/output buffers. On the CPU the context reads and
//! writes the host buffers directly; on the GPU it uses device copies.
class InferenceSlot {
 public:
  //! `inputs` holds a host tensor (with its runtime dims) for every engine input.
  InferenceSlot(const Engine& engine, const std::map<std::string, HostTensor>& inputs);
  ~InferenceSlot();
  InferenceSlot(const InferenceSlot&) = delete;
  InferenceSlot& operator=(const InferenceSlot&) = delete;

  //! One inference: inputs to the device (unless !transfers), enqueue, wait, outputs back.
  //! Times are relative to `epochMs` (ms on the steady clock).
  IterationTimes run(bool transfers, double epochMs);
  //! Copies the outputs to the host (if needed) and returns them in engine order.
  std::vector<NamedTensor> outputs();
  ExecutionContext& context() { return *context_; }

 private:
  struct Binding {
    std::string name;
    bool isInput = false;
    HostTensor host;
    void* device = nullptr;  //!< == host.data() on the CPU
  };
  void copyInputs();
  void copyOutputs();
  std::unique_ptr<ExecutionContext> context_;
  std::shared_ptr<Backend> gpu_;  //!< null on the CPU
  std::vector<Binding> bindings_;
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
