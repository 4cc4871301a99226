// Internal state behind Engine and ExecutionContext.
#pragma once
#include <map>
#include <memory>
#include <vector>

#include "backends/backend.h"
#include "kiln/runtime.h"
#include "runtime/engine_graph.h"

namespace kiln {

struct EngineImpl {
  EngineGraph graph;
  std::shared_ptr<Backend> backend;
  //! [profile][layer]: the kernel of the profile's tactic. Profiles that chose the same tactic
  //! for a layer share one kernel (kernels are made from the build-time desc and the tactic only,
  //! and keep per-shape state in the context's KernelState), so a second profile costs nothing
  //! where its tactics agree.
  std::vector<std::vector<const Kernel*>> kernels;
  //! [profile][layer]: the kernels of the choice's size buckets (TacticChoice::buckets), by
  //! ascending size bound; empty where kernels[profile][layer] serves every size.
  std::vector<std::vector<std::vector<std::pair<int64_t, const Kernel*>>>> bucketKernels;
  //! The kernel layer `layer` runs with in profile `profile` at the concrete shapes `d`.
  const Kernel* kernelFor(int profile, size_t layer, const LayerDesc& d) const {
    const auto& buckets = bucketKernels[profile][layer];
    if (buckets.empty()) return kernels[profile][layer];
    const int64_t size = tacticBucketSize(d);
    for (const auto& [maxSize, k] : buckets)
      if (size <= maxSize) return k;
    return kernels[profile][layer];
  }
  std::vector<std::unique_ptr<Kernel>> ownedKernels;
  std::vector<const void*> constantData;         //!< per tensor: device copy of constants (or null)
  std::vector<void*> ownedDeviceConstants;
  std::map<std::string, int> ioByName;           //!< I/O tensor name -> tensor index
  ILogger* logger = nullptr;
  ~EngineImpl();
};

//! Creates the kernels and device constants of a graph (build and load share this) on GPU
//! `deviceIndex` (made current on the calling thread), or the calling thread's current device (-1).
std::unique_ptr<EngineImpl> instantiateEngine(EngineGraph graph, ILogger& logger, int threads, int deviceIndex = -1);

}  // namespace kiln
