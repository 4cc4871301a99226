// ExecutionContext: per-caller state. Shape work (resolution, memory plan, kernel reshape)
// happens once per shape change; enqueue only patches I/O pointers and runs kernels.
#include <chrono>
#include <cstring>

#include "core/thread_pool.h"
#include "runtime/engine_impl.h"

namespace kiln {

struct ContextImpl {
  const Engine* engine = nullptr;
  const EngineImpl* e = nullptr;
  std::map<int, Dims> inputDims;
  std::map<int, HostTensor> inputValues;  // host copies of inputs that shapes depend on
  std::vector<int> valueInputs;
  bool dirty = true;
  std::vector<void*> addr;  // per tensor index (I/O only)
  ResolvedShapes shapes;
  MemoryPlan mem;
  void* arena = nullptr;
  size_t arenaCap = 0;
  void* workspace = nullptr;
  size_t workspaceCap = 0;
  std::vector<std::unique_ptr<KernelState>> states;
  std::vector<KernelIO> ios;
  struct Patch { int layer; bool output; int slot; int tensor; };
  std::vector<Patch> patches;
  std::vector<int> hostOutputs;  // outputs whose values are known on the host after resolution
  IProfiler* profiler = nullptr;

  ~ContextImpl() {
    if (arena) e->backend->release(arena);
    if (workspace) e->backend->release(workspace);
  }

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
      std::memcpy(v.data(), addr[t], v.bytes());
      auto it = inputValues.find(t);
      if (it == inputValues.end() || it->second.dims() != d || std::memcmp(it->second.data(), v.data(), v.bytes()) != 0) {
        inputValues[t] = v;
        dirty = true;
      }
    }
  }

  void reshape() {
    const EngineGraph& g = e->graph;
    for (int in : g.inputs)
      if (!isStatic(g.tensors[in].dims) && !inputDims.count(in))
        throw Error("input '" + g.tensors[in].name + "' has dynamic dims " + toString(g.tensors[in].dims) +
                    ": call setInputShape first");
    refreshInputValues();
    shapes = resolveShapes(g, inputDims, &inputValues);
    mem = planMemory(g, shapes);
    if (mem.arenaBytes > arenaCap) {
      if (arena) e->backend->release(arena);
      arena = e->backend->allocate(mem.arenaBytes);
      arenaCap = mem.arenaBytes;
    }
    // Host-computed values read by runtime layers are materialized in the arena now.
    for (size_t t = 0; t < g.tensors.size(); ++t)
      if (mem.offsets[t] >= 0 && shapes.tensors[t].value.valid() && !g.tensors[t].value.valid()) {
        const HostTensor& v = shapes.tensors[t].value;
        e->backend->copyToDevice(static_cast<char*>(arena) + mem.offsets[t], v.data(), v.bytes(), nullptr);
      }
    states.clear();
    states.resize(g.layers.size());
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
      if (shapes.skipped(i)) continue;
      const EngineLayer& l = g.layers[i];
      size_t w = e->kernels[i]->reshape(shapes.layers[i], states[i]);
      ws = std::max(ws, w);
      KernelIO& io = ios[i];
      for (size_t k = 0; k < l.inputs.size(); ++k) io.in.push_back(view(l.inputs[k], int(i), false, int(k)));
      for (size_t k = 0; k < l.outputs.size(); ++k) io.out.push_back(view(l.outputs[k], int(i), true, int(k)));
      io.pool = e->backend->pool();
    }
    if (ws > workspaceCap) {
      if (workspace) e->backend->release(workspace);
      workspace = e->backend->allocate(ws);
      workspaceCap = ws;
    }
    for (auto& io : ios) {
      io.workspace = workspace;
      io.workspaceSize = workspaceCap;
    }
    hostOutputs.clear();
    for (int o : g.outputs)
      if (shapes.tensors[o].value.valid()) hostOutputs.push_back(o);
    dirty = false;
  }
};

ExecutionContext::ExecutionContext(std::unique_ptr<ContextImpl> i) : impl(std::move(i)) {}
ExecutionContext::~ExecutionContext() = default;

std::unique_ptr<ExecutionContext> Engine::createExecutionContext() const {
  auto c = std::make_unique<ContextImpl>();
  c->engine = this;
  c->e = impl.get();
  c->addr.assign(impl->graph.tensors.size(), nullptr);
  c->valueInputs = hostValueInputs(impl->graph);
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
  if (impl->dirty) impl->reshape();
  return impl->shapes.tensors[t].dims;
}

void ExecutionContext::setTensorAddress(const std::string& name, void* data) { impl->addr[ioTensor(*impl, name)] = data; }

void ExecutionContext::setProfiler(IProfiler* p) { impl->profiler = p; }

void ExecutionContext::enqueue(void* stream) {
  ContextImpl& c = *impl;
  if (!c.valueInputs.empty()) c.refreshInputValues();
  if (c.dirty) c.reshape();
  const EngineGraph& g = c.e->graph;
  for (int t : g.inputs)
    if (!c.addr[t] && volume(c.shapes.tensors[t].dims) > 0) throw Error("input '" + g.tensors[t].name + "' has no address (setTensorAddress)");
  for (int t : g.outputs)
    if (!c.addr[t] && volume(c.shapes.tensors[t].dims) > 0) throw Error("output '" + g.tensors[t].name + "' has no address (setTensorAddress)");
  for (const auto& p : c.patches) {
    KernelIO& io = c.ios[p.layer];
    (p.output ? io.out : io.in)[p.slot].data = c.addr[p.tensor];
  }
  for (int o : c.hostOutputs) {
    const HostTensor& v = c.shapes.tensors[o].value;
    c.e->backend->copyToDevice(c.addr[o], v.data(), v.bytes(), stream);
  }
  for (size_t i = 0; i < g.layers.size(); ++i) {
    if (c.shapes.skipped(i)) continue;
    KernelIO& io = c.ios[i];
    io.stream = stream;
    if (c.profiler) {
      auto t0 = std::chrono::steady_clock::now();
      c.e->kernels[i]->execute(io, c.states[i].get());
      c.e->backend->synchronize(stream);
      auto t1 = std::chrono::steady_clock::now();
      c.profiler->reportLayerTime(g.layers[i].name, std::chrono::duration<float, std::milli>(t1 - t0).count());
    } else {
      c.e->kernels[i]->execute(io, c.states[i].get());
    }
  }
}

}  // namespace kiln
