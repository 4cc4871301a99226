// The backend contract: what kiln needs from a device (CPU, CUDA) to run layers.
// Lifecycle of a layer's kernel: create (build/load time: pack weights) -> reshape (per input
// shape, in the context; may allocate state) -> execute (per enqueue: no allocation, no shape work).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/layer_desc.h"
#include "kiln/builder.h"
#include "kiln/network.h"
#include "kiln/profiler.h"
#include "kiln/types.h"

namespace kiln {

//! Per-context, per-shape state of a kernel (e.g. primitives created for concrete shapes).
class KernelState {
 public:
  virtual ~KernelState() = default;
};

//! One implementation of one layer. Immutable after creation; shared by all contexts.
class Kernel {
 public:
  virtual ~Kernel() = default;
  //! Called when the concrete shapes of the layer are known (never inside enqueue). May create
  //! state; returns the workspace bytes the layer needs.
  virtual size_t reshape(const LayerDesc& concrete, std::unique_ptr<KernelState>& state) const {
    (void)concrete; (void)state; return 0;
  }
  //! Runs the layer. Must not allocate or synchronize the host (on the GPU).
  virtual void execute(const KernelIO& io, KernelState* state) const = 0;
  //! Whether the kernel keeps its own device copy of constant input `i` (e.g. repacked weights)
  //! and never reads io.in[i].data: an engine whose every reader of a constant holds it this way
  //! does not upload the constant itself (io.in[i].data is then null).
  virtual bool holdsInput(size_t i) const { (void)i; return false; }
};

//! What a kernel family exports for one implementation: whether it can run a layer, and how to
//! make its kernel. The backend's tactic table (cpu/ and cuda/ tactic_table.cpp) names it.
struct KernelFactory {
  //! Whether this implementation can run the layer (types, attributes, build-time dims).
  bool (*supports)(const LayerDesc& layer) = nullptr;
  //! Creates the kernel (packs weights). Throws kiln::Error on failure.
  std::unique_ptr<Kernel> (*create)(const LayerDesc& layer) = nullptr;
};

//! An entry of a backend's tactic table: one optimized implementation of one op. `name` is unique
//! in the table and says op, type and variant (`conv_f32_im2col_gemm`; docs/internals.md).
struct TacticDef {
  std::string op;    //!< op name this tactic implements
  std::string name;  //!< stored in plans and timing caches; matched by BuilderConfig's tactic filter
  KernelFactory kernel;
};

//! A named implementation choice ("tactic") for a layer.
struct Tactic {
  std::string name;
  //! Creates the kernel for the layer (build-time desc: dims may be -1; constant inputs carry
  //! their values). Throws kiln::Error if it cannot.
  std::function<std::unique_ptr<Kernel>(const LayerDesc&)> create;
};

//! The tactics of a table that implement `layer`'s op and support it, in table order.
std::vector<Tactic> tacticsFromTable(const std::vector<TacticDef>& table, const LayerDesc& layer);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceType device() const = 0;
  //! Identifies the device for plan compatibility (e.g. "cpu:x86_64-avx2").
  virtual std::string fingerprint() const = 0;
  //! Every tactic that can run `layer`, best guess first. Empty: the backend cannot run it.
  virtual std::vector<Tactic> tactics(const LayerDesc& layer) const = 0;
  //! Tactics of last resort for a layer that tactics() leaves empty (CUDA: the reference kernel on
  //! the host between copies). Only the tactic selection (with a warning naming the layer) and the
  //! plan loader take them: passes that ask tactics() whether a kernel exists are not misled.
  virtual std::vector<Tactic> fallbackTactics(const LayerDesc& layer) const {
    (void)layer;
    return {};
  }
  //! Device memory (host memory on the CPU). 64-byte aligned at least.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p) = 0;
  //! Copies; `stream` may be null (synchronous).
  virtual void copyToDevice(void* dst, const void* src, size_t bytes, void* stream) = 0;
  virtual void copyToHost(void* dst, const void* src, size_t bytes, void* stream) = 0;
  virtual void synchronize(void* stream) = 0;
  //! Sets `bytes` bytes at device address `p` to `value` (asynchronous on `stream`; the CPU's is
  //! synchronous). Debugging aid (poisoned freed memory); the default is the host's memset.
  virtual void fill(void* p, int value, size_t bytes, void* stream);
  //! The thread pool kernels run on (CPU backend) or nullptr.
  virtual ThreadPool* pool() { return nullptr; }
  //! Makes this backend's device the calling thread's current one (CUDA: cudaSetDevice), so that
  //! kernels enqueued from this thread run there. Optional (the CPU has nothing to do).
  virtual void makeCurrent() {}
  //! The CUDA device index of this backend; -1 for the CPU.
  virtual int deviceIndex() const { return -1; }
  //! The channel block (8, 16) this backend's conv tactics prefer for blocked NCHW tensors
  //! (ops/conv_layout.h); 0 when none handles blocked layouts. Optional.
  virtual int64_t preferredChannelBlock() const { return 0; }
  //! The largest |w| of the int8 weights this backend's integer kernels compute exactly: 127, or 63
  //! on a CPU whose int8 instructions sum u8 x s8 pairs in saturating int16 (AVX2 without VNNI).
  //! Implicit INT8 quantizes weights to [-limit, limit]. Optional.
  virtual int int8WeightLimit() const { return 127; }
  //! The device's peak rates for rooflines (0 where unknown). Optional.
  virtual DevicePeak peak() const { return {}; }

  // Streams and events (the CPU has none: its streams are null and its work is synchronous).
  //! A new stream (nullptr on the CPU). Owned by the caller: destroyStream.
  virtual void* createStream() { return nullptr; }
  virtual void destroyStream(void* stream) { (void)stream; }
  //! A new event; `timing` enables elapsedMs. Owned by the caller: destroyEvent.
  virtual void* createEvent(bool timing) { (void)timing; return nullptr; }
  virtual void destroyEvent(void* event) { (void)event; }
  //! Records `event` on `stream` (asynchronous).
  virtual void recordEvent(void* event, void* stream) { (void)event; (void)stream; }
  //! Makes `stream` wait for `event` (asynchronous; the host does not block).
  virtual void streamWaitEvent(void* stream, void* event) { (void)stream; (void)event; }
  //! Milliseconds between two completed timing events (0 on the CPU).
  virtual float timeBetween(void* start, void* end) { (void)start; (void)end; return 0.f; }
  //! Median time in ms of `iterations` runs of `launch(stream)` (blocks the host).
  virtual float timeMs(const std::function<void(void* stream)>& launch, int iterations);
  //! Captures the work `body` enqueues on `stream` into an executable graph (nullptr, with the
  //! reason in `why`, when the backend cannot capture). Owned by the caller: destroyGraph.
  virtual void* captureGraph(void* stream, const std::function<void()>& body, std::string* why) {
    (void)stream; (void)body;
    if (why) *why = "the " + std::string(device() == DeviceType::kCPU ? "CPU" : "device") + " backend has no graphs";
    return nullptr;
  }
  virtual void launchGraph(void* graph, void* stream) { (void)graph; (void)stream; }
  virtual void destroyGraph(void* graph) { (void)graph; }
  //! Page-locked host memory for fast asynchronous copies (plain memory on the CPU).
  virtual void* allocateHost(size_t bytes);
  virtual void releaseHost(void* p);
};

//! The backend for a device, configured with `threads` CPU threads (0 = hardware threads); for
//! the GPU, CUDA device `deviceIndex` (-1: the calling thread's current device).
//! Throws kiln::Error when the device is not available in this build or machine.
std::shared_ptr<Backend> getBackend(DeviceType d, int threads, int deviceIndex = -1);
std::shared_ptr<Backend> makeCpuBackend(int threads);
#ifdef KILN_HAVE_CUDA
std::shared_ptr<Backend> makeCudaBackend(int deviceIndex);
int cudaDeviceCount();    //!< 0 when the driver reports no device (never throws)
int cudaCurrentDevice();  //!< the calling thread's current CUDA device
#endif
//! A tactic wrapping the naive reference kernel of `op` (for tests and fallbacks).
Tactic referenceTactic(const std::string& op);

}  // namespace kiln
