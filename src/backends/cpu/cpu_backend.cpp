// The CPU backend: host memory, synchronous "streams", optimized tactics + reference kernels.
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "backends/backend.h"
#include "backends/cpu/conv_cpu_common.h"
#include "backends/cpu/cpu_tactics.h"
#include "backends/cpu/device_peak_cpu.h"
#include "backends/cpu/openmp_team.h"
#include "core/thread_pool.h"
#include "ops/op_registry.h"
#include "plugin/plugin_layer.h"

namespace kiln {

namespace {

//! Wraps an op's naive reference function as a kernel.
class RefKernel : public Kernel {
 public:
  explicit RefKernel(RefFn fn) : fn_(fn) {}
  struct State : KernelState {
    LayerDesc desc;
  };
  size_t reshape(const LayerDesc& concrete, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<State>();
    s->desc = concrete;
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    fn_(static_cast<State*>(state)->desc, io);
  }

 private:
  RefFn fn_;
};

class CpuBackend : public Backend {
 public:
  // The pool runs its loops on the OpenMP team oneDNN uses, when one is in the process (openmp_team.h).
  explicit CpuBackend(int threads) : pool_(threads, cpu::openMpTeam()) {}
  DeviceType device() const override { return DeviceType::kCPU; }
  std::string fingerprint() const override {
    std::string f = "cpu:x86_64";
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) f += "-avx2";
    if (__builtin_cpu_supports("fma")) f += "-fma";
    return f;
  }
  std::vector<Tactic> tactics(const LayerDesc& layer) const override {
    if (layer.op == kPluginOp) return pluginTactics(layer, DeviceType::kCPU);
    std::vector<Tactic> out = tacticsFromTable(cpuTacticTable(), layer);
    if (out.empty()) {
      const OpDef* def = OpRegistry::instance().find(layer.op);
      if (def && def->ref) {
        RefFn fn = def->ref;
        out.push_back(Tactic{"ref", [fn](const LayerDesc&) { return std::make_unique<RefKernel>(fn); }});
      }
    }
    return out;
  }
  void* allocate(size_t bytes) override {
    size_t n = (bytes + 63) / 64 * 64;
    void* p = std::aligned_alloc(64, n ? n : 64);
    if (!p) throw Error("out of host memory allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void release(void* p) override { std::free(p); }
  // Zero bytes may come with null pointers (empty tensors): memcpy must not see those.
  void copyToDevice(void* dst, const void* src, size_t bytes, void*) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void copyToHost(void* dst, const void* src, size_t bytes, void*) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void synchronize(void*) override {}
  ThreadPool* pool() override { return &pool_; }
  int64_t preferredChannelBlock() const override { return cpu::preferredChannelBlock(); }
  int int8WeightLimit() const override { return cpu::int8WeightLimit(); }
  DevicePeak peak() const override { return cpu::devicePeak(pool_.size()); }

 private:
  ThreadPool pool_;
};

}  // namespace

//! Reference-kernel tactic for any op (used by tests to compare optimized tactics).
Tactic referenceTactic(const std::string& op) {
  const OpDef* def = OpRegistry::instance().find(op);
  if (!def || !def->ref) throw Error("no reference kernel for op " + op);
  RefFn fn = def->ref;
  return Tactic{"ref", [fn](const LayerDesc&) { return std::make_unique<RefKernel>(fn); }};
}

std::shared_ptr<Backend> makeCpuBackend(int threads) { return std::make_shared<CpuBackend>(threads); }

}  // namespace kiln
