// The engine's graph: an index-based, immutable form of the optimized network, with the chosen
// tactic per layer. This is what plan files hold.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "kiln/builder.h"
#include "kiln/network.h"
#include "plan/plan_io.h"

namespace kiln {

struct EngineTensor {
  std::string name;
  DataType type = DataType::kFLOAT;
  Dims dims;          //!< build-time dims (-1 dynamic)
  HostTensor value;   //!< constants
  bool isInput = false, isOutput = false;
};

//! The tactic of one size range of a layer inside a profile: used while the layer's size
//! (tacticBucketSize) is at most `maxSize`.
struct TacticBucket {
  int64_t maxSize = 0;
  std::string tactic;
  float timeMs = -1.f;  //!< its time at the shapes it was timed at
};

//! The tactic a layer runs with in one optimization profile, timed at that profile's opt shapes.
struct TacticChoice {
  std::string tactic;
  float timeMs = -1.f;  //!< measured time of the chosen tactic (-1: not timed)
  int considered = 1;   //!< tactics offered (or timed, at the optimization level)
  //! Where one kernel does not serve the profile's range well (timed at its min/opt/max shapes):
  //! the tactic per size range, ascending, the last one unbounded (INT64_MAX). Empty: `tactic`
  //! for every shape. Chosen when a context plans a set of shapes, never per enqueue.
  std::vector<TacticBucket> buckets;
  //! The tactic for a layer of size `size` (tacticBucketSize).
  const std::string& tacticFor(int64_t size) const {
    for (const TacticBucket& b : buckets)
      if (size <= b.maxSize) return b.tactic;
    return tactic;
  }
};
//! A layer's size for the tactic buckets: the elements of its non-constant inputs and outputs
//! at concrete shapes (the work of every op kiln has grows with it inside one profile).
int64_t tacticBucketSize(const LayerDesc& concrete);
//! The most size buckets one layer's choice may have (the builder makes at most 5; plans are checked).
constexpr size_t kMaxTacticBuckets = 16;

struct EngineLayer {
  std::string name, op, domain;
  Attributes attrs;
  std::vector<int> inputs;   //!< tensor indices, -1 for omitted optional inputs
  std::vector<int> outputs;
  std::vector<std::string> fusedOps;
  std::vector<TacticChoice> choices;  //!< per optimization profile (one entry per EngineGraph::profiles)
  DataType precision = DataType::kFLOAT;
  int stream = 0;  //!< 0: the enqueue stream; k > 0: auxiliary stream k-1
};

struct ProfileRange {
  Dims min, opt, max;
};
//! One optimization profile: the range of every dynamic input (by tensor index).
using ProfileRanges = std::map<int, ProfileRange>;
//! The most optimization profiles an engine may have (the builder and the plan loader both check).
constexpr size_t kMaxOptimizationProfiles = 4096;

struct EngineGraph {
  std::vector<EngineTensor> tensors;
  std::vector<EngineLayer> layers;
  std::vector<int> inputs, outputs;  //!< I/O tensor indices in binding order
  //! Optimization profiles (at least one; a static network's is empty). The layers, fusions and
  //! precisions are shared; each profile has its own tactic per layer (EngineLayer::choices).
  std::vector<ProfileRanges> profiles{ProfileRanges{}};
  DeviceType device = DeviceType::kCPU;
  int threads = 0;
  int auxStreams = 0;
  size_t arenaBytes = 0;  //!< the largest over the profiles' opt shapes
  std::string fingerprint;
};

//! Concrete shapes (and host values where computed on the host) of every tensor.
struct ResolvedShapes {
  std::vector<TensorDesc> tensors;
  std::vector<bool> hostEvaluated;  //!< per layer: computed on the host while resolving shapes
  std::vector<LayerDesc> layers;    //!< concrete desc per layer (attrs point into the graph)
  //! Per layer: a view op (Reshape, Squeeze, ...) whose output shares its input's memory, or a
  //! Concat whose inputs were written into its output (resolve.cpp), so it does not run at all.
  std::vector<bool> aliased;
  //! Per tensor: the tensor whose memory it shares (-1: its own), and where in it (bytes; a
  //! Concat's input lives at its offset in the Concat's output).
  std::vector<int> aliasOf;
  std::vector<int64_t> aliasOffset;
  bool skipped(size_t layer) const { return hostEvaluated[layer] || aliased[layer]; }
};

//! Resolves every tensor's dims for concrete input dims (and the values of inputs that shapes
//! depend on); validates them against `profile` (when given). `lenient` (build time) leaves dims
//! that depend on unknown input values at -1 instead of failing.
//! `fetched` (data-dependent execution, runtime/context.cpp): host copies of intermediate tensors
//! computed at run time; a layer left unresolved without them is inferred again with them as the
//! values of its value inputs (NonZero's data, NonMaxSuppression's boxes, ...).
ResolvedShapes resolveShapes(const EngineGraph& g, const std::map<int, Dims>& inputDims, const ProfileRanges* profile,
                             const std::map<int, HostTensor>* inputValues = nullptr, bool lenient = false,
                             const std::map<int, HostTensor>* fetched = nullptr);
//! Layer i's value inputs that are computed at run time and whose values it lacks in `r`: what the
//! context must read back before layer i can be resolved (empty when i is resolved).
std::vector<int> missingValueInputs(const EngineGraph& g, const ResolvedShapes& r, size_t i);
//! Whether every input and output of layer i has static dims in `r` (the layer can be set up).
bool layerResolved(const ResolvedShapes& r, size_t i);
//! The opt dims of every dynamic input in profile `p`.
std::map<int, Dims> optDims(const EngineGraph& g, size_t p);
//! Network inputs whose values (not only dims) shapes depend on — e.g. Resize's scales fed as an
//! input. Their data is read on the host by the context before it resolves shapes.
std::vector<int> hostValueInputs(const EngineGraph& g);
//! The build-time desc of layer i (dims may be -1; constant inputs carry their values).
LayerDesc buildTimeDesc(const EngineGraph& g, size_t i);

//! Arena layout for one set of shapes: byte offset per tensor (-1: not in the arena).
//! Where each intermediate tensor lives in the activation arena (runtime/memory_plan.cpp).
struct MemoryPlan {
  std::vector<int64_t> offsets;  //!< per tensor; -1: not in the arena (I/O, constants, unknown dims)
  size_t arenaBytes = 0;
  //! No placement is smaller: the peak over the layers (index order) of the bytes live there, or
  //! with auxiliary streams a heavier set of blocks that concurrent branches may hold at once.
  size_t lowerBound = 0;
  std::vector<size_t> liveBytes;  //!< per layer: arena bytes live while it runs
  //! Per layer: the arena regions (offset, bytes) whose last access it is (poisoning freed memory).
  std::vector<std::vector<std::pair<size_t, size_t>>> freedAfter;
};
//! Plans the arena: exact lifetimes across streams (happens-before through events), in-place
//! layers where the op and the tactic chosen in `profile` allow it, greedy placement.
MemoryPlan planMemory(const EngineGraph& g, const ResolvedShapes& r, size_t profile = 0);

//! Places independent branches on up to `maxAux` auxiliary streams (GPU); sets layer.stream
//! and g.auxStreams (which may be fewer than allowed when the graph has fewer branches).
void planStreams(EngineGraph& g, int maxAux);

//! Plan (de)serialization. `fields`, when given, receives every field written (structure-aware
//! fuzzing and per-field tests: src/plan/plan_io.h).
std::vector<uint8_t> serializePlan(const EngineGraph& g, std::vector<PlanField>* fields = nullptr);
//! Throws kiln::Error on any malformed, truncated, tampered or incompatible plan.
EngineGraph deserializePlan(const void* data, size_t size, bool verifyChecksum = true);
//! Recomputes the header's checksum of a plan in place (tests and fuzzing: a tampered payload
//! then reaches the parser behind the checksum). Throws kiln::Error for a file that is no plan.
void rewritePlanChecksum(uint8_t* data, size_t size);
//! Re-derives every tensor's dims from the plan's own layers at each profile's opt shapes and
//! checks them against the stored dims, so kernels are never created for a layer whose
//! attributes, constants and tensors disagree (a tampered plan). Throws kiln::Error.
void checkPlanShapes(const EngineGraph& g);

}  // namespace kiln
