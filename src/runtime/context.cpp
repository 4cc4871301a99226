// ExecutionContext: per-caller state. Shape work (resolution, memory plan, kernel reshape)
// happens once per shape change; enqueue only patches I/O pointers and runs kernels. The plans of
// the last kMaxCachedPlans shapes are kept with their kernel states and CUDA graphs, so a server
// that alternates between request shapes re-plans nothing and keeps replaying graphs (engines
// whose shapes resolve from the input shapes alone; data-dependent ones re-plan every run anyway).
//
// Data-dependent shapes (NonZero, NonMaxSuppression, Unique, Compress of a computed condition, a
// Reshape or TopK whose shape or k is computed from data): shapes resolved from the input shapes
// ("round 0") leave such a layer and what depends on it unresolved. enqueue runs the layers in
// engine order up to the first unresolved one, waits for the streams, reads the data that layer's
// shape depends on back to the host (missingValueInputs), resolves again with it (the layer is
// inferred, and for NonZero/NMS/Unique computed, on the host), plans the arena of the newly
// resolved tensors (a separate arena per round, so earlier tensors keep their bytes), reshapes
// their kernels, and goes on. Outputs resolved that way get their memory from the output's
// IOutputAllocator. Layers keep their engine order, so every round's memory plan holds.
#include <algorithm>
#include <chrono>
#include <utility>
#include <cstring>

#include "core/thread_pool.h"
#include "ops/op_cost.h"
#include "runtime/engine_impl.h"

namespace kiln {

struct ContextImpl {
  const Engine* engine = nullptr;
  const EngineImpl* e = nullptr;
  int profile = 0;  // the optimization profile in use
  std::map<int, Dims> inputDims;
  std::map<int, HostTensor> inputValues;  // host copies of inputs that shapes depend on
  std::vector<int> valueInputs;
  bool dirty = true;
  std::vector<void*> addr;  // per tensor index (I/O only)
  ResolvedShapes shapes;
  MemoryPlan mem;
  void* arena = nullptr;
  size_t arenaCap = 0;
  std::vector<int> arenaValues;  // host-computed tensors read from the arena by runtime layers
  bool userManaged = false;  // the arena is the application's (setDeviceMemory): never allocated or freed here
  void* userArena = nullptr;
  size_t userArenaBytes = 0;
  void* workspace = nullptr;
  size_t workspaceCap = 0;
  std::vector<std::unique_ptr<KernelState>> states;
  std::vector<const Kernel*> kernels;  // per layer: the kernel of these shapes' size bucket
  std::vector<KernelIO> ios;
  struct Patch { int layer; bool output; int slot; int tensor; };
  std::vector<Patch> patches;
  std::vector<int> hostOutputs;  // outputs whose values are known on the host after resolution
  std::vector<IOutputAllocator*> allocators;  // per tensor (outputs only): set by setOutputAllocator
  std::vector<void*> allocated;               // per tensor: the allocator's memory of the last run
  std::vector<void*> bound;                   // per tensor (I/O): this run's address
  size_t firstUnresolved = 0;  // round 0: the first layer whose shape depends on run-time data (== #layers: none)
  std::vector<std::pair<void*, size_t>> roundArenas;  // data-dependent rounds' arenas (grown, kept)
  IProfiler* profiler = nullptr;
  std::vector<void*> profileEvents;  // GPU profiling: a start and an end timing event per layer
  bool poisonFreed = false;  // debugging aid: arena regions are overwritten after their last access

  // Auxiliary streams (GPU): created with the context, joined to the enqueue stream by events.
  std::vector<void*> auxStreams;
  void* startEvent = nullptr;
  std::vector<void*> auxDoneEvents;
  std::vector<void*> layerEvents;                 // per layer with consumers on other streams
  std::vector<std::vector<int>> waits;            // per layer: producer layers on other streams
  void* graphExec = nullptr;                      // captured CUDA graph of one enqueue
  std::vector<void*> graphAddr;                   // the I/O addresses it was captured with

  // The plan of one set of input shapes (and shape-deciding input values, and profile): what
  // reshape() computes, kept while other shapes run. Plans point into the arena and workspace, so
  // reallocating either drops them all.
  struct Plan {
    std::vector<int64_t> key;
    ResolvedShapes shapes;
    MemoryPlan mem;
    std::vector<std::unique_ptr<KernelState>> states;
    std::vector<const Kernel*> kernels;
    std::vector<KernelIO> ios;
    std::vector<Patch> patches;
    std::vector<int> hostOutputs, arenaValues;
    void* graphExec = nullptr;
    std::vector<void*> graphAddr;
    uint64_t lastUse = 0;
  };
  static constexpr size_t kMaxCachedPlans = 8;
  std::vector<int64_t> planKey;  // the current plan's key (empty: none)
  std::vector<Plan> planCache;   // other shapes' plans, least recently used evicted
  uint64_t useClock = 0;

  ~ContextImpl() {
    Backend& b = *e->backend;
    if (graphExec) b.destroyGraph(graphExec);
    for (Plan& p : planCache)
      if (p.graphExec) b.destroyGraph(p.graphExec);
    for (void* ev : layerEvents) b.destroyEvent(ev);
    for (void* ev : profileEvents) b.destroyEvent(ev);
    for (void* ev : auxDoneEvents) b.destroyEvent(ev);
    b.destroyEvent(startEvent);
    for (void* s : auxStreams) b.destroyStream(s);
    if (arena && !userManaged) b.release(arena);
    for (auto& [p, bytes] : roundArenas)
      if (p) b.release(p);
    if (workspace) b.release(workspace);
  }

  void createStreams() {
    const EngineGraph& g = e->graph;
    Backend& b = *e->backend;
    layerEvents.assign(g.layers.size(), nullptr);
    waits.assign(g.layers.size(), {});
    if (g.auxStreams == 0) return;
    for (int i = 0; i < g.auxStreams; ++i) {
      auxStreams.push_back(b.createStream());
      auxDoneEvents.push_back(b.createEvent(false));
    }
    startEvent = b.createEvent(false);
    std::vector<int> producer(g.tensors.size(), -1);
    for (size_t i = 0; i < g.layers.size(); ++i)
      for (int t : g.layers[i].outputs) producer[t] = static_cast<int>(i);
    for (size_t i = 0; i < g.layers.size(); ++i)
      for (int t : g.layers[i].inputs) {
        int p = t >= 0 ? producer[t] : -1;
        if (p < 0 || g.layers[p].stream == g.layers[i].stream) continue;
        if (!layerEvents[p]) layerEvents[p] = b.createEvent(false);
        waits[i].push_back(p);
      }
  }

  void* streamOf(int layerStream, void* main) const { return layerStream == 0 ? main : auxStreams[layerStream - 1]; }

  Dims inputDimsOf(int t) const {
    auto it = inputDims.find(t);
    return it != inputDims.end() ? it->second : e->graph.tensors[t].dims;
  }

  // Reads the inputs whose values shapes depend on (host memory on the CPU; on the GPU these
  // inputs must be host buffers, as TensorRT's shape tensors). Marks the context dirty if any
  // value changed. Only engines with such inputs pay for this per call.
  void refreshInputValues() {
    for (int t : valueInputs) {
      const EngineTensor& et = e->graph.tensors[t];
      if (!addr[t]) throw Error("input '" + et.name + "' determines shapes: set its address before running or querying shapes");
      Dims d = inputDimsOf(t);
      HostTensor v(et.type, d);
      // Host or device memory alike (a synchronous copy on the GPU: only engines with such
      // inputs pay for it; TensorRT requires these "shape tensors" in host memory instead).
      e->backend->copyToHost(v.data(), addr[t], v.bytes(), nullptr);
      auto it = inputValues.find(t);
      if (it == inputValues.end() || it->second.dims() != d || std::memcmp(it->second.data(), v.data(), v.bytes()) != 0) {
        inputValues[t] = v;
        dirty = true;
      }
    }
  }

  void materializeValues(void* stream) {
    for (int t : arenaValues) {
      const HostTensor& v = shapes.tensors[t].value;
      e->backend->copyToDevice(static_cast<char*>(arena) + mem.offsets[t], v.data(), v.bytes(), stream);
    }
  }

  // What a plan depends on: the profile, every input's dims, the shape-deciding inputs' values.
  std::vector<int64_t> shapeKey() const {
    std::vector<int64_t> k{profile};
    for (int in : e->graph.inputs) {
      const Dims d = inputDimsOf(in);
      k.push_back(static_cast<int64_t>(d.size()));
      k.insert(k.end(), d.begin(), d.end());
    }
    for (const auto& [t, v] : inputValues) {
      const auto* bytes = static_cast<const unsigned char*>(v.data());
      k.push_back(-1 - t);
      for (size_t i = 0; i < v.bytes(); ++i) k.push_back(bytes[i]);
    }
    return k;
  }

  void swapPlan(Plan& p) {
    std::swap(planKey, p.key);
    std::swap(shapes, p.shapes);
    std::swap(mem, p.mem);
    std::swap(states, p.states);
    std::swap(kernels, p.kernels);
    std::swap(ios, p.ios);
    std::swap(patches, p.patches);
    std::swap(hostOutputs, p.hostOutputs);
    std::swap(arenaValues, p.arenaValues);
    std::swap(graphExec, p.graphExec);
    std::swap(graphAddr, p.graphAddr);
  }

  // Moves the current plan into the cache (evicting the least recently used beyond the bound).
  void stashPlan() {
    if (planKey.empty()) return;
    Plan p;
    swapPlan(p);
    p.lastUse = ++useClock;
    planCache.push_back(std::move(p));
    if (planCache.size() > kMaxCachedPlans) {
      auto lru = std::min_element(planCache.begin(), planCache.end(),
                                  [](const Plan& a, const Plan& b) { return a.lastUse < b.lastUse; });
      if (lru->graphExec) e->backend->destroyGraph(lru->graphExec);
      planCache.erase(lru);
    }
  }

  // Makes the cached plan of `key` current; false when there is none.
  bool restorePlan(const std::vector<int64_t>& key) {
    for (auto it = planCache.begin(); it != planCache.end(); ++it)
      if (it->key == key) {
        swapPlan(*it);
        planCache.erase(it);
        return true;
      }
    return false;
  }

  void dropCachedPlans() {
    for (Plan& p : planCache)
      if (p.graphExec) e->backend->destroyGraph(p.graphExec);
    planCache.clear();
  }

  std::vector<void*> ioAddresses() const {
    std::vector<void*> a;
    for (int t : e->graph.inputs) a.push_back(addr[t]);
    for (int t : e->graph.outputs) a.push_back(addr[t]);
    return a;
  }

  // Before a run or a query: re-reads the inputs that shapes depend on and re-plans if anything
  // changed since the last time.
  void ensureShapes() {
    if (!valueInputs.empty()) refreshInputValues();
    if (dirty) reshape();
  }

  void reshape() {
    const EngineGraph& g = e->graph;
    for (int in : g.inputs)
      if (!isStatic(g.tensors[in].dims) && !inputDims.count(in))
        throw Error("input '" + g.tensors[in].name + "' has dynamic dims " + toString(g.tensors[in].dims) +
                    ": call setInputShape first");
    refreshInputValues();
    std::vector<int64_t> key = shapeKey();
    if (planKey != key) {
      // Only plans resolved from the input shapes alone are kept (data-dependent rounds change
      // the plan during each run).
      if (firstUnresolved == g.layers.size()) stashPlan();
      if (restorePlan(key)) {  // planned before: its kernel states, memory plan and CUDA graph
        // Other shapes' runs reused the arena: host-computed values are written again.
        if (!userManaged) materializeValues(nullptr);
        dirty = false;
        return;
      }
    }
    // Lenient: layers whose shapes depend on run-time data stay unresolved until enqueue reads it.
    shapes = resolveShapes(g, inputDims, &g.profiles[profile], &inputValues, /*lenient=*/true);
    firstUnresolved = g.layers.size();
    for (size_t i = 0; i < g.layers.size(); ++i) {
      if (layerResolved(shapes, i)) continue;
      if (firstUnresolved == g.layers.size()) firstUnresolved = i;
      bool inputsKnown = true;
      for (size_t k = 0; k < shapes.layers[i].inputs.size(); ++k)
        inputsKnown = inputsKnown && (!shapes.layers[i].present(k) || isStatic(shapes.layers[i].inputs[k].dims));
      if (inputsKnown && missingValueInputs(g, shapes, i).empty())
        throw Error("layer '" + g.layers[i].name + "' (" + g.layers[i].op + "): output shape " +
                    toString(shapes.layers[i].outputs[0].dims) + " is unresolved");
    }
    mem = planMemory(g, shapes, static_cast<size_t>(profile));
    if (userManaged) {
      if (mem.arenaBytes > 0 && !userArena)
        throw Error("user-managed context: call setDeviceMemory before running or querying it (" +
                    std::to_string(mem.arenaBytes) + " bytes needed at these shapes)");
      if (mem.arenaBytes > userArenaBytes)
        throw Error("user-managed context: the device memory given (" + std::to_string(userArenaBytes) +
                    " bytes) is smaller than these shapes need (" + std::to_string(mem.arenaBytes) + " bytes)");
      arena = userArena;
      arenaCap = userArenaBytes;
    } else if (mem.arenaBytes > arenaCap) {
      dropCachedPlans();  // their views point into the old arena
      if (arena) e->backend->release(arena);
      arena = e->backend->allocate(mem.arenaBytes);
      arenaCap = mem.arenaBytes;
    }
    // Host-computed values read by runtime layers are materialized in the arena now (a
    // user-managed arena may be shared with other contexts between runs: there, every enqueue).
    arenaValues.clear();
    for (size_t t = 0; t < g.tensors.size(); ++t)
      if (mem.offsets[t] >= 0 && shapes.tensors[t].value.valid() && !g.tensors[t].value.valid())
        arenaValues.push_back(static_cast<int>(t));
    if (!userManaged) materializeValues(nullptr);
    states.clear();
    states.resize(g.layers.size());
    kernels.assign(g.layers.size(), nullptr);
    ios.assign(g.layers.size(), KernelIO{});
    patches.clear();
    size_t ws = 0;
    auto view = [&](int t, int layer, bool output, int slot) {
      TensorView v;
      if (t < 0) return v;
      v.type = shapes.tensors[t].type;
      v.dims = shapes.tensors[t].dims;
      v.count = volume(v.dims);
      if (e->constantData[t]) v.data = const_cast<void*>(e->constantData[t]);
      else if (mem.offsets[t] >= 0) v.data = static_cast<char*>(arena) + mem.offsets[t];
      else if (g.tensors[t].isInput || g.tensors[t].isOutput) patches.push_back({layer, output, slot, t});
      return v;
    };
    for (size_t i = 0; i < g.layers.size(); ++i) {
      if (shapes.skipped(i) || !layerResolved(shapes, i)) continue;
      const EngineLayer& l = g.layers[i];
      kernels[i] = e->kernelFor(profile, i, shapes.layers[i]);
      size_t w = kernels[i]->reshape(shapes.layers[i], states[i]);
      ws = std::max(ws, w);
      KernelIO& io = ios[i];
      for (size_t k = 0; k < l.inputs.size(); ++k) io.in.push_back(view(l.inputs[k], int(i), false, int(k)));
      for (size_t k = 0; k < l.outputs.size(); ++k) io.out.push_back(view(l.outputs[k], int(i), true, int(k)));
      io.pool = e->backend->pool();
    }
    // One workspace region per stream: layers on different streams may run at once.
    const size_t perStream = (ws + 255) / 256 * 256;
    const size_t total = perStream * (1 + auxStreams.size());
    if (total > workspaceCap) {
      dropCachedPlans();  // their kernels' workspace pointers are the old ones
      if (workspace) e->backend->release(workspace);
      workspace = e->backend->allocate(total);
      workspaceCap = total;
    }
    for (size_t i = 0; i < ios.size(); ++i) {
      ios[i].workspace = static_cast<char*>(workspace) + perStream * static_cast<size_t>(g.layers[i].stream);
      ios[i].workspaceSize = perStream;
    }
    if (graphExec) {  // shapes or buffers changed: the captured graph is stale
      e->backend->destroyGraph(graphExec);
      graphExec = nullptr;
    }
    hostOutputs.clear();
    for (int o : g.outputs)
      if (shapes.tensors[o].value.valid()) hostOutputs.push_back(o);
    planKey = std::move(key);
    dirty = false;
  }

  bool dataDependent() const { return firstUnresolved < e->graph.layers.size(); }

  //! Output t's memory for this run from its allocator (dims known now); tells it the shape.
  void allocateOutput(int t, const Dims& dims) {
    const EngineTensor& et = e->graph.tensors[t];
    const uint64_t bytes = static_cast<uint64_t>(volume(dims)) * elementSize(et.type);
    void* p = allocators[t]->reallocateOutput(et.name, allocated[t], bytes, 256);
    if (!p && bytes > 0)
      throw Error("output '" + et.name + "': the output allocator returned null for " + std::to_string(bytes) + " bytes");
    if (reinterpret_cast<uintptr_t>(p) % elementSize(et.type) != 0)
      throw Error("output '" + et.name + "': the output allocator returned memory not aligned to its " +
                  std::to_string(elementSize(et.type)) + "-byte elements");
    allocated[t] = p;
    bound[t] = p;
    allocators[t]->notifyShape(et.name, dims);
  }

  //! Runs layers [from, to) in engine order with the shapes `r`.
  void runLayers(size_t from, size_t to, const ResolvedShapes& r, void* stream, bool gpuProfile,
                 const std::vector<std::pair<char*, const MemoryPlan*>>& plans);

  //! Data-dependent execution after round 0 (see the file's comment).
  void runDataDependent(void* stream, bool gpuProfile);

  //! Waits for the enqueue stream and every auxiliary stream (the host reads data back).
  void synchronizeAll(void* stream) {
    for (void* s : auxStreams) e->backend->synchronize(s);
    e->backend->synchronize(stream);
  }
};

ExecutionContext::ExecutionContext(std::unique_ptr<ContextImpl> i) : impl(std::move(i)) {}
ExecutionContext::~ExecutionContext() = default;

std::unique_ptr<ExecutionContext> Engine::createExecutionContext(ExecutionContextAllocationStrategy strategy) const {
  auto c = std::make_unique<ContextImpl>();
  c->userManaged = strategy == ExecutionContextAllocationStrategy::kUSER_MANAGED;
  c->engine = this;
  c->e = impl.get();
  c->addr.assign(impl->graph.tensors.size(), nullptr);
  c->allocators.assign(impl->graph.tensors.size(), nullptr);
  c->allocated.assign(impl->graph.tensors.size(), nullptr);
  c->bound.assign(impl->graph.tensors.size(), nullptr);
  c->valueInputs = hostValueInputs(impl->graph);
  c->createStreams();
  return std::make_unique<ExecutionContext>(std::move(c));
}

const Engine& ExecutionContext::engine() const { return *impl->engine; }

namespace {
int ioTensor(const ContextImpl& c, const std::string& name) {
  auto it = c.e->ioByName.find(name);
  if (it == c.e->ioByName.end()) throw Error("'" + name + "' is not an input or output of the engine");
  return it->second;
}
}  // namespace

void ExecutionContext::setOptimizationProfile(int profile) {
  const size_t n = impl->e->graph.profiles.size();
  if (profile < 0 || static_cast<size_t>(profile) >= n)
    throw Error("optimization profile " + std::to_string(profile) + " does not exist (the engine has " + std::to_string(n) + ")");
  if (profile == impl->profile) return;
  impl->profile = profile;
  impl->dirty = true;  // other kernels, other ranges: re-planned once; reshape() drops a captured graph
}

int ExecutionContext::getOptimizationProfile() const { return impl->profile; }

void ExecutionContext::setInputShape(const std::string& name, const Dims& dims) {
  int t = ioTensor(*impl, name);
  if (!impl->e->graph.tensors[t].isInput) throw Error("'" + name + "' is not an input");
  auto it = impl->inputDims.find(t);
  if (it != impl->inputDims.end() && it->second == dims) return;
  const Dims& net = impl->e->graph.tensors[t].dims;
  if (dims.size() != net.size())
    throw Error("input '" + name + "': shape " + toString(dims) + " has the wrong rank (network: " + toString(net) + ")");
  impl->inputDims[t] = dims;
  impl->dirty = true;
}

Dims ExecutionContext::getTensorShape(const std::string& name) {
  int t = ioTensor(*impl, name);
  // Output shapes may depend on input values (Expand's shape, Resize's sizes fed as inputs): read
  // them again, as enqueue does, so that a caller sizing buffers from this gets the right shape.
  impl->ensureShapes();
  return impl->shapes.tensors[t].dims;
}

void ExecutionContext::setTensorAddress(const std::string& name, void* data) {
  // A captured graph holds the addresses it was captured with: launchGraph compares them.
  impl->addr[ioTensor(*impl, name)] = data;
}

void ExecutionContext::setOutputAllocator(const std::string& name, IOutputAllocator* allocator) {
  const int t = ioTensor(*impl, name);
  if (!impl->e->graph.tensors[t].isOutput) throw Error("setOutputAllocator: '" + name + "' is not an output");
  if (impl->allocators[t] != allocator) {  // captured graphs hold the old addresses
    if (impl->graphExec) impl->e->backend->destroyGraph(impl->graphExec);
    impl->graphExec = nullptr;
    for (auto& p : impl->planCache)
      if (p.graphExec) impl->e->backend->destroyGraph(std::exchange(p.graphExec, nullptr));
  }
  impl->allocators[t] = allocator;
  impl->allocated[t] = nullptr;
}

IOutputAllocator* ExecutionContext::getOutputAllocator(const std::string& name) const {
  const int t = ioTensor(*impl, name);
  if (!impl->e->graph.tensors[t].isOutput) throw Error("getOutputAllocator: '" + name + "' is not an output");
  return impl->allocators[t];
}

void ExecutionContext::setProfiler(IProfiler* p) { impl->profiler = p; }

void ExecutionContext::setDeviceMemory(void* memory, size_t bytes) {
  ContextImpl& c = *impl;
  if (!c.userManaged) throw Error("setDeviceMemory: the context was not created with kUSER_MANAGED");
  if (!memory && bytes) throw Error("setDeviceMemory: null memory of " + std::to_string(bytes) + " bytes");
  if (reinterpret_cast<uintptr_t>(memory) % 256 != 0) throw Error("setDeviceMemory: the memory must be 256-byte aligned");
  if (memory == c.userArena && bytes == c.userArenaBytes) return;
  c.userArena = memory;
  c.userArenaBytes = bytes;
  c.dropCachedPlans();  // every plan's views point into the old arena
  c.planKey.clear();
  c.dirty = true;  // kernels' views point into the arena: re-planned (and a captured graph dropped) on the next run
}

void ExecutionContext::setPoisonFreedMemory(bool on) {
  if (on && !impl->auxStreams.empty())
    impl->e->logger->log(ILogger::Severity::kWARNING,
                         "poisoning freed memory needs a single stream: the engine uses auxiliary streams, nothing is poisoned");
  impl->poisonFreed = on;
}

MemoryUsage ExecutionContext::getMemoryUsage() {
  ContextImpl& c = *impl;
  c.ensureShapes();
  MemoryUsage m;
  m.arenaBytes = c.mem.arenaBytes;
  m.arenaLowerBound = c.mem.lowerBound;
  m.workspaceBytes = c.workspaceCap;
  m.liveBytes = c.mem.liveBytes;
  return m;
}

std::vector<LayerCost> ExecutionContext::getLayerCosts() {
  ContextImpl& c = *impl;
  c.ensureShapes();
  const EngineGraph& g = c.e->graph;
  std::vector<LayerCost> costs;
  costs.reserve(g.layers.size());
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const EngineLayer& l = g.layers[i];
    LayerCost lc;
    lc.name = l.name;
    lc.op = l.op;
    lc.type = l.precision;
    lc.runs = !c.shapes.skipped(i) && layerResolved(c.shapes, i);  // data-dependent: unknown before the run
    if (lc.runs) {
      lc.tactic = l.choices.at(c.profile).tacticFor(tacticBucketSize(c.shapes.layers[i]));
      const OpCost oc = opCost(c.shapes.layers[i]);
      lc.flops = oc.flops;
      lc.bytes = oc.bytes;
      lc.matrix = oc.matrix;
    }
    costs.push_back(std::move(lc));
  }
  return costs;
}

void ContextImpl::runLayers(size_t from, size_t to, const ResolvedShapes& r, void* stream, bool gpuProfile,
                            const std::vector<std::pair<char*, const MemoryPlan*>>& plans) {
  const EngineGraph& g = e->graph;
  Backend& b = *e->backend;
  // Poisoning needs one order of the layers: with auxiliary streams, two readers of a region may
  // run at once (setPoisonFreedMemory warns).
  const bool poison = poisonFreed && auxStreams.empty();
  for (size_t i = from; i < to; ++i) {
    void* s = streamOf(g.layers[i].stream, stream);
    for (int p : waits[i]) b.streamWaitEvent(s, layerEvents[p]);
    if (r.skipped(i)) {
      // A layer with nothing to run (a view aliasing its input, a host-computed value) still
      // passes its inputs' readiness on: its readers on other streams wait on its event.
      if (layerEvents[i]) b.recordEvent(layerEvents[i], s);
      continue;
    }
    KernelIO& io = ios[i];
    io.stream = s;
    const Kernel* k = kernels[i];
    if (gpuProfile) {
      b.recordEvent(profileEvents[2 * i], s);
      k->execute(io, states[i].get());
      b.recordEvent(profileEvents[2 * i + 1], s);
    } else if (profiler) {
      auto t0 = std::chrono::steady_clock::now();
      k->execute(io, states[i].get());
      auto t1 = std::chrono::steady_clock::now();
      profiler->reportLayerTime(g.layers[i].name, std::chrono::duration<float, std::milli>(t1 - t0).count());
    } else {
      k->execute(io, states[i].get());
    }
    if (poison)
      for (const auto& [base, plan] : plans)
        for (const auto& [off, bytes] : plan->freedAfter[i]) b.fill(base + off, 0xFF, bytes, s);
    if (layerEvents[i]) b.recordEvent(layerEvents[i], s);
  }
}

void ContextImpl::runDataDependent(void* stream, bool gpuProfile) {
  const EngineGraph& g = e->graph;
  Backend& b = *e->backend;
  const size_t n = g.layers.size();
  // Where every tensor lives in this run (round 0's arena, then each round's own).
  std::vector<void*> ptr(g.tensors.size(), nullptr);
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    if (e->constantData[t]) ptr[t] = const_cast<void*>(e->constantData[t]);
    else if (g.tensors[t].isInput || g.tensors[t].isOutput) ptr[t] = bound[t];
    else if (mem.offsets[t] >= 0) ptr[t] = static_cast<char*>(arena) + mem.offsets[t];
  }
  std::vector<MemoryPlan> roundPlans;
  roundPlans.reserve(n);  // plans are referenced by pointer below
  std::vector<std::pair<char*, const MemoryPlan*>> plans{{static_cast<char*>(arena), &mem}};
  std::vector<bool> ready(n, false);
  for (size_t i = 0; i < n; ++i) ready[i] = shapes.skipped(i) || layerResolved(shapes, i);
  ResolvedShapes cur = shapes;
  std::map<int, HostTensor> fetched;
  size_t j = firstUnresolved;
  while (j < n) {
    const std::vector<int> missing = missingValueInputs(g, cur, j);
    if (missing.empty())
      throw Error("layer '" + g.layers[j].name + "' (" + g.layers[j].op + "): output shape " +
                  toString(cur.layers[j].outputs[0].dims) + " is unresolved");
    synchronizeAll(stream);
    for (int t : missing) {
      HostTensor v(cur.tensors[t].type, cur.tensors[t].dims);
      if (v.bytes() && !ptr[t]) throw Error("internal: tensor '" + g.tensors[t].name + "' has no memory to read back");
      b.copyToHost(v.data(), ptr[t], v.bytes(), nullptr);
      fetched[t] = std::move(v);
    }
    ResolvedShapes next = resolveShapes(g, inputDims, &g.profiles[profile], &inputValues, /*lenient=*/true, &fetched);
    if (!layerResolved(next, j))
      throw Error("layer '" + g.layers[j].name + "' (" + g.layers[j].op + "): output shape " +
                  toString(next.layers[j].outputs[0].dims) + " is unresolved although its inputs were read");
    // The tensors resolved in this round get an arena of their own: earlier ones are hidden from
    // the planner (their bytes are taken), their readers still extend the new tensors' lifetimes.
    std::vector<int> fresh;
    ResolvedShapes masked = next;
    for (size_t t = 0; t < g.tensors.size(); ++t) {
      if (isStatic(cur.tensors[t].dims)) masked.tensors[t].dims = Dims{-1};
      else if (isStatic(next.tensors[t].dims)) fresh.push_back(static_cast<int>(t));
    }
    roundPlans.push_back(planMemory(g, masked, static_cast<size_t>(profile)));
    const MemoryPlan& rp = roundPlans.back();
    const size_t round = roundPlans.size() - 1;
    if (roundArenas.size() <= round) roundArenas.resize(round + 1, {nullptr, 0});
    auto& [ra, raBytes] = roundArenas[round];
    if (rp.arenaBytes > raBytes) {
      if (ra) b.release(ra);
      ra = nullptr;
      ra = b.allocate(rp.arenaBytes);
      raBytes = rp.arenaBytes;
    }
    plans.emplace_back(static_cast<char*>(ra), &rp);
    for (int t : fresh) {
      const EngineTensor& et = g.tensors[t];
      if (et.isOutput) {
        if (!allocators[t])
          throw Error("output '" + et.name + "' has a data-dependent shape: set an output allocator (setOutputAllocator)");
        allocateOutput(t, next.tensors[t].dims);
        ptr[t] = bound[t];
      } else if (rp.offsets[t] >= 0) {
        ptr[t] = static_cast<char*>(ra) + rp.offsets[t];
      }
    }
    for (int t : fresh)  // views of tensors of earlier rounds
      if (!ptr[t] && next.aliasOf[t] >= 0) ptr[t] = ptr[next.aliasOf[t]];
    // Values computed on the host (NonZero's indices, ...) go where runtime layers and outputs read
    // them; that includes tensors whose dims were known before their value (Unique's inverse indices).
    for (size_t t = 0; t < g.tensors.size(); ++t)
      if (next.tensors[t].value.valid() && !cur.tensors[t].value.valid() && !g.tensors[t].value.valid() && ptr[t])
        b.copyToDevice(ptr[t], next.tensors[t].value.data(), next.tensors[t].value.bytes(), stream);
    size_t ws = 0;
    for (size_t i = j; i < n; ++i) {
      if (ready[i] || !layerResolved(next, i)) continue;
      ready[i] = true;
      if (next.skipped(i)) continue;
      const EngineLayer& l = g.layers[i];
      kernels[i] = e->kernelFor(profile, i, next.layers[i]);
      ws = std::max(ws, kernels[i]->reshape(next.layers[i], states[i]));
      KernelIO& io = ios[i];
      io = KernelIO{};
      auto view = [&](int t) {
        TensorView v;
        if (t < 0) return v;
        v.type = next.tensors[t].type;
        v.dims = next.tensors[t].dims;
        v.count = volume(v.dims);
        v.data = ptr[t];
        return v;
      };
      for (int t : l.inputs) io.in.push_back(view(t));
      for (int t : l.outputs) io.out.push_back(view(t));
      io.pool = b.pool();
    }
    const size_t streams = 1 + auxStreams.size(), perStream = (ws + 255) / 256 * 256;
    if (perStream * streams > workspaceCap) {  // grown: every layer's view moves (earlier ones have finished)
      synchronizeAll(stream);
      if (workspace) b.release(workspace);
      workspace = nullptr;
      workspace = b.allocate(perStream * streams);
      workspaceCap = perStream * streams;
    }
    for (size_t i = 0; i < n; ++i) {
      ios[i].workspace = static_cast<char*>(workspace) + workspaceCap / streams * static_cast<size_t>(g.layers[i].stream);
      ios[i].workspaceSize = workspaceCap / streams;
    }
    cur = std::move(next);
    size_t to = j + 1;
    while (to < n && layerResolved(cur, to)) ++to;
    runLayers(j, to, cur, stream, gpuProfile, plans);
    j = to;
  }
  for (size_t k = 0; k < auxStreams.size(); ++k) {  // the enqueue stream ends after every aux stream
    b.recordEvent(auxDoneEvents[k], auxStreams[k]);
    b.streamWaitEvent(stream, auxDoneEvents[k]);
  }
  if (gpuProfile) {
    b.synchronize(stream);
    for (size_t i = 0; i < n; ++i)
      if (!cur.skipped(i)) profiler->reportLayerTime(g.layers[i].name, b.timeBetween(profileEvents[2 * i], profileEvents[2 * i + 1]));
  }
}

void ExecutionContext::enqueue(void* stream) {
  ContextImpl& c = *impl;
  c.ensureShapes();
  const EngineGraph& g = c.e->graph;
  for (int t : g.inputs) {
    if (!c.addr[t] && volume(c.shapes.tensors[t].dims) > 0) throw Error("input '" + g.tensors[t].name + "' has no address (setTensorAddress)");
    c.bound[t] = c.addr[t];
  }
  for (int t : g.outputs) {
    const Dims& d = c.shapes.tensors[t].dims;
    if (!isStatic(d) && !c.allocators[t])
      throw Error("output '" + g.tensors[t].name + "' has a data-dependent shape " + toString(d) +
                  ": set an output allocator (setOutputAllocator) to receive it");
    if (c.allocators[t] && isStatic(d)) c.allocateOutput(t, d);
    else if (!c.allocators[t]) c.bound[t] = c.addr[t];
    if (!c.allocators[t] && !c.addr[t] && volume(d) > 0) throw Error("output '" + g.tensors[t].name + "' has no address (setTensorAddress)");
  }
  for (const auto& p : c.patches) {
    KernelIO& io = c.ios[p.layer];
    (p.output ? io.out : io.in)[p.slot].data = c.bound[p.tensor];
  }
  for (int o : c.hostOutputs) {
    const HostTensor& v = c.shapes.tensors[o].value;
    c.e->backend->copyToDevice(c.bound[o], v.data(), v.bytes(), stream);
  }
  if (c.userManaged) c.materializeValues(stream);
  Backend& b = *c.e->backend;
  // Profiling on the GPU times each layer between two events; on the CPU, work is synchronous.
  const bool gpuProfile = c.profiler && b.device() == DeviceType::kGPU;
  if (gpuProfile && c.profileEvents.empty())
    for (size_t i = 0; i < 2 * g.layers.size(); ++i) c.profileEvents.push_back(b.createEvent(true));
  if (!c.auxStreams.empty()) {  // every aux stream starts after the work already on `stream`
    b.recordEvent(c.startEvent, stream);
    for (void* s : c.auxStreams) b.streamWaitEvent(s, c.startEvent);
  }
  c.runLayers(0, c.firstUnresolved, c.shapes, stream, gpuProfile, {{static_cast<char*>(c.arena), &c.mem}});
  if (c.dataDependent()) {
    c.runDataDependent(stream, gpuProfile);
    return;
  }
  for (size_t k = 0; k < c.auxStreams.size(); ++k) {  // the enqueue stream ends after every aux stream
    b.recordEvent(c.auxDoneEvents[k], c.auxStreams[k]);
    b.streamWaitEvent(stream, c.auxDoneEvents[k]);
  }
  if (gpuProfile) {  // the kernels' own times, without the host's launch overhead
    b.synchronize(stream);
    for (size_t i = 0; i < g.layers.size(); ++i)
      if (!c.shapes.skipped(i))
        c.profiler->reportLayerTime(g.layers[i].name, b.timeBetween(c.profileEvents[2 * i], c.profileEvents[2 * i + 1]));
  }
}

bool ExecutionContext::captureGraph(void* stream) {
  ContextImpl& c = *impl;
  c.ensureShapes();
  bool allocators = false;
  for (IOutputAllocator* a : c.allocators) allocators = allocators || a;
  if (c.dataDependent() || allocators) {
    c.e->logger->log(ILogger::Severity::kWARNING, std::string("CUDA graph capture is not possible: ") +
                                                      (c.dataDependent() ? "the engine has data-dependent shapes (the host reads values back during the run)"
                                                                         : "outputs get their memory from output allocators at every enqueue") +
                                                      "; enqueue runs without a graph");
    return false;
  }
  if (c.graphExec) {
    c.e->backend->destroyGraph(c.graphExec);
    c.graphExec = nullptr;
  }
  std::string why;
  c.graphAddr = c.ioAddresses();
  c.graphExec = c.e->backend->captureGraph(stream, [&] { enqueue(stream); }, &why);
  if (!c.graphExec)
    c.e->logger->log(ILogger::Severity::kWARNING, "CUDA graph capture is not possible (" + why + "); enqueue runs without a graph");
  return c.graphExec != nullptr;
}

void ExecutionContext::launchGraph(void* stream) {
  ContextImpl& c = *impl;
  c.ensureShapes();  // new shapes: their cached plan, with the graph captured for them, if any
  if (c.graphExec && c.graphAddr != c.ioAddresses()) {  // captured with other buffers
    c.e->backend->destroyGraph(c.graphExec);
    c.graphExec = nullptr;
  }
  if (!c.graphExec) {
    enqueue(stream);  // no graph for these shapes and buffers: plain enqueue; the caller may capture again
    return;
  }
  c.e->backend->launchGraph(c.graphExec, stream);
}

}  // namespace kiln
