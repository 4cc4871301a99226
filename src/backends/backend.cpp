// Backend selection and the contract's default implementations.
#include "backends/backend.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "ops/op_registry.h"

namespace kiln {

namespace {
// The tactic "host" of ops whose outputs shape inference computes once their inputs are read back
// (OpDef::inferComputesValues: NonZero, NonMaxSuppression, Unique): the context evaluates such a
// layer while resolving its shapes, so its kernel never runs.
class HostComputedKernel : public Kernel {
 public:
  void execute(const KernelIO&, KernelState*) const override {
    throw Error("internal: a layer computed on the host (tactic 'host') was run as a kernel");
  }
};
}  // namespace

std::vector<Tactic> tacticsFromTable(const std::vector<TacticDef>& table, const LayerDesc& layer) {
  std::vector<Tactic> out;
  for (const auto& d : table) {
    if (d.op != layer.op || !d.kernel.supports(layer)) continue;
    auto create = d.kernel.create;
    out.push_back(Tactic{d.name, [create](const LayerDesc& l) { return create(l); }});
  }
  const OpDef* def = out.empty() ? OpRegistry::instance().find(layer.op) : nullptr;
  if (def && def->inferComputesValues)
    out.push_back(Tactic{"host", [](const LayerDesc&) { return std::make_unique<HostComputedKernel>(); }});
  return out;
}

void Backend::fill(void* p, int value, size_t bytes, void*) { std::memset(p, value, bytes); }

float Backend::timeMs(const std::function<void(void*)>& launch, int iterations) {
  launch(nullptr);  // warm-up
  std::vector<float> t;
  for (int i = 0; i < std::max(1, iterations); ++i) {
    auto t0 = std::chrono::steady_clock::now();
    launch(nullptr);
    synchronize(nullptr);
    t.push_back(std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void* Backend::allocateHost(size_t bytes) {
  void* p = std::aligned_alloc(64, std::max<size_t>(64, (bytes + 63) / 64 * 64));
  if (!p) throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
  return p;
}

void Backend::releaseHost(void* p) { std::free(p); }

bool gpuAvailable() {
#ifdef KILN_HAVE_CUDA
  return cudaDeviceCount() > 0;
#else
  return false;
#endif
}

std::shared_ptr<Backend> getBackend(DeviceType d, int threads, int deviceIndex) {
  // One backend per (device, thread count), shared while anyone holds it.
  static std::mutex mu;
  static std::map<std::pair<int, int>, std::weak_ptr<Backend>> cache;
  std::lock_guard<std::mutex> lk(mu);
  // Key: the thread count on the CPU, the device index on the GPU.
  int which = threads;
#ifdef KILN_HAVE_CUDA
  if (d == DeviceType::kGPU) {
    const int count = cudaDeviceCount();
    if (count == 0) throw Error("no CUDA device is available on this machine (use --device=cpu)");
    which = deviceIndex >= 0 ? deviceIndex : cudaCurrentDevice();
    if (which >= count)
      throw Error("CUDA device " + std::to_string(which) + " does not exist (this machine has " + std::to_string(count) + ")");
  }
#endif
  auto key = std::make_pair(static_cast<int>(d), which);
  auto& w = cache[key];
  if (auto s = w.lock()) return s;
  std::shared_ptr<Backend> s;
  if (d == DeviceType::kCPU) {
    s = makeCpuBackend(threads);
  } else {
#ifdef KILN_HAVE_CUDA
    s = makeCudaBackend(which);
#else
    throw Error("this build of kiln has no CUDA backend (use --device=cpu)");
#endif
  }
  w = s;
  return s;
}

}  // namespace kiln
