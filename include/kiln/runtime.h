// Engine (immutable, shareable across threads) and ExecutionContext (one per concurrent caller).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kiln/builder.h"
#include "kiln/logger.h"
#include "kiln/profiler.h"
#include "kiln/types.h"

namespace kiln {

class ExecutionContext;
struct EngineImpl;

//! A context's device memory at its current shapes.
struct MemoryUsage {
  size_t arenaBytes = 0;       //!< activation arena (intermediate tensors)
  size_t arenaLowerBound = 0;  //!< the most tensor bytes live at once in this execution (streams included): no arena is smaller
  size_t workspaceBytes = 0;   //!< scratch memory of the kernels (one region per stream)
  std::vector<size_t> liveBytes;  //!< per layer (engine order): arena bytes live while it runs
};
struct ContextImpl;

enum class TensorIOMode : int { kNONE = 0, kINPUT = 1, kOUTPUT = 2 };

//! Memory for outputs whose size is known only during execution (TensorRT's IOutputAllocator):
//! NonZero, NonMaxSuppression, Unique, Compress of a computed condition, and everything sized
//! from them. Set one per output with ExecutionContext::setOutputAllocator; the context calls it
//! from inside enqueue, on the enqueuing thread, once the output's size is known.
class IOutputAllocator {
 public:
  virtual ~IOutputAllocator() = default;
  //! Returns memory of at least `size` bytes aligned to `alignment` (device memory on the GPU, host
  //! memory on the CPU) for output `name`; `currentMemory` is what this output was given last time
  //! (null the first time), which may be returned again when it is large enough. Returning null for
  //! a non-zero size fails the enqueue with an error naming the output. The memory must stay valid
  //! until the enqueue's work has completed.
  virtual void* reallocateOutput(const std::string& name, void* currentMemory, uint64_t size, uint64_t alignment) = 0;
  //! The output's dims in this execution; called after reallocateOutput, before enqueue returns.
  //! The data is there once the enqueue's work has completed (on the GPU: synchronize the stream).
  virtual void notifyShape(const std::string& name, const Dims& dims) = 0;
};

//! Who provides a context's activation arena (TensorRT's ExecutionContextAllocationStrategy).
enum class ExecutionContextAllocationStrategy : int {
  kSTATIC = 0,        //!< the context allocates (and grows) its own arena
  kUSER_MANAGED = 1,  //!< the application provides it (setDeviceMemory): contexts run one at a time can share one
};

class Engine {
 public:
  ~Engine();
  //! Loads a plan; throws kiln::Error with a clear message on any malformed or incompatible plan.
  //! `threads` overrides the CPU thread count stored in the plan (-1: keep it).
  static std::unique_ptr<Engine> deserialize(const void* data, size_t size,
                                             ILogger& logger = defaultLogger(), int threads = -1);
  //! Loads a plan for CUDA device `deviceIndex` (made current on the calling thread, as
  //! BuilderConfig::setDeviceIndex does for a build; -1: the calling thread's current device, as
  //! above). A CPU plan ignores it.
  static std::unique_ptr<Engine> deserialize(const void* data, size_t size, int deviceIndex,
                                             ILogger& logger = defaultLogger(), int threads = -1);
  std::vector<uint8_t> serialize() const;

  int getNbIOTensors() const;
  std::string getIOTensorName(int index) const;
  TensorIOMode getTensorIOMode(const std::string& name) const;
  DataType getTensorDataType(const std::string& name) const;
  //! Build-time shape (-1 for dynamic dims).
  Dims getTensorShape(const std::string& name) const;
  //! min/opt/max of a dynamic input in profile 0 (empty when the input is static).
  Dims getProfileShape(const std::string& input, OptProfileSelector s) const;
  //! min/opt/max of a dynamic input in optimization profile `profile` (throws for a profile the
  //! engine does not have).
  Dims getProfileShape(const std::string& input, int profile, OptProfileSelector s) const;
  //! Optimization profiles in the engine (1 for a static network or a single profile). Each has
  //! its own tactics, timed at its opt shapes; a context runs one at a time.
  int getNbOptimizationProfiles() const;
  DeviceType device() const;
  //! The CUDA device the engine runs on (its contexts and buffers belong there); -1 on the CPU.
  int getDeviceIndex() const;
  int getNbLayers() const;
  //! Activation arena bytes for the opt/static shapes (the largest over the profiles).
  size_t getDeviceMemorySize() const;
  //! Arena bytes that cover every shape of optimization profile `profile` (planned at its max and
  //! opt shapes): what setDeviceMemory needs for a user-managed context running that profile.
  size_t getDeviceMemorySizeForProfile(int profile) const;
  //! Bytes of the engine's constants (weights) as its plan stores them.
  size_t getWeightBytes() const;
  //! Number of auxiliary streams the engine uses.
  int getNbAuxStreams() const;
  //! Layer information as JSON: name, op, fused ops, inputs/outputs, precision, tactic, time.
  std::string getLayerInformation() const;
  //! The peak rates of the device the engine runs on (for rooflines; specification values).
  DevicePeak getDevicePeak() const;

  std::unique_ptr<ExecutionContext> createExecutionContext(
      ExecutionContextAllocationStrategy strategy = ExecutionContextAllocationStrategy::kSTATIC) const;

  std::unique_ptr<EngineImpl> impl;  // internal
  explicit Engine(std::unique_ptr<EngineImpl> i);
};

class ExecutionContext {
 public:
  ~ExecutionContext();
  //! Selects the optimization profile the next enqueue runs with (default 0): its tactics, and
  //! its ranges for the input shapes. Shapes are re-planned once, on the next enqueue or query;
  //! a captured CUDA graph is dropped. Throws for a profile the engine does not have.
  void setOptimizationProfile(int profile);
  int getOptimizationProfile() const;
  //! Sets a dynamic input's shape; shapes are resolved (once) on the next enqueue or query.
  void setInputShape(const std::string& name, const Dims& dims);
  //! Resolved shape of any I/O tensor (resolves shapes if needed).
  Dims getTensorShape(const std::string& name);
  void setTensorAddress(const std::string& name, void* data);
  //! Gives output `name` its memory through `allocator` on every enqueue (null: back to the
  //! address set with setTensorAddress). Required for outputs whose shape depends on the data
  //! (getTensorShape reports -1 for their data-dependent dims); allowed for any output. The
  //! allocator is not owned and must outlive its use.
  void setOutputAllocator(const std::string& name, IOutputAllocator* allocator);
  IOutputAllocator* getOutputAllocator(const std::string& name) const;
  //! Runs inference. For the CPU, `stream` is ignored and the call returns when done; for the
  //! GPU it is a cudaStream_t and the call is asynchronous. Throws kiln::Error.
  void enqueue(void* stream = nullptr);
  void setProfiler(IProfiler* p);
  //! Per layer, in execution order: the FLOPs and bytes it computes and moves at the current
  //! input shapes (resolves shapes if needed). With a profiler's times, a per-layer roofline.
  std::vector<LayerCost> getLayerCosts();
  //! Debugging aid: overwrites every arena region with 0xFF bytes right after its last planned
  //! access, so a layer reading memory the planner considered free reads garbage (NaN) instead
  //! of a stale value (single-stream engines). Slower.
  void setPoisonFreedMemory(bool on);
  //! Activation memory at the current shapes (resolves shapes if needed).
  MemoryUsage getMemoryUsage();
  //! A user-managed context's arena: `bytes` of device memory (host memory on the CPU) at `memory`,
  //! 256-byte aligned, owned by the caller and untouched by other work while this context runs.
  //! Enqueue throws when the current shapes need more (getMemoryUsage().arenaBytes).
  void setDeviceMemory(void* memory, size_t bytes);
  //! Captures one enqueue on `stream` into a CUDA graph kept by the context (GPU). Returns false,
  //! with a warning, when the model or backend cannot be captured; enqueue still works then.
  bool captureGraph(void* stream);
  //! Replays the captured graph on `stream`; runs a plain enqueue when there is no valid graph
  //! (e.g. after input shapes or tensor addresses changed).
  void launchGraph(void* stream);
  const Engine& engine() const;

  std::unique_ptr<ContextImpl> impl;  // internal
  explicit ExecutionContext(std::unique_ptr<ContextImpl> i);
};

}  // namespace kiln
