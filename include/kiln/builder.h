// Builder: optimizes a Network for one device and produces an Engine.
#pragma once
#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/logger.h"
#include "kiln/network.h"
#include "kiln/timing_cache.h"
#include "kiln/types.h"

namespace kiln {

class Engine;
class IInt8Calibrator;

enum class DeviceType : uint8_t { kCPU = 0, kGPU = 1 };
const char* toString(DeviceType d);
//! True when a usable CUDA device is present (and the CUDA backend was built).
bool gpuAvailable();

enum class BuilderFlag : int {
  kFP16 = 0,             //!< allow FP16 kernels
  kBF16 = 1,             //!< allow BF16 kernels
  kINT8 = 2,             //!< allow INT8 kernels
  kFP8 = 3,              //!< allow FP8 kernels (Hopper)
  kTF32 = 4,             //!< allow TF32 for FP32 matmul/conv (on by default)
  kSTRONGLY_TYPED = 5,   //!< keep exactly the types the network states
  kOBEY_PRECISION_CONSTRAINTS = 6,   //!< a layer's precision / output type it cannot get fails the build (naming it)
  kPREFER_PRECISION_CONSTRAINTS = 7, //!< ... falls back with a warning naming it
};

enum class OptProfileSelector : int { kMIN = 0, kOPT = 1, kMAX = 2 };

//! min/opt/max dimensions for each dynamic network input.
class OptimizationProfile {
 public:
  void setDimensions(const std::string& input, OptProfileSelector s, const Dims& dims);
  bool hasInput(const std::string& input) const { return dims_.count(input) != 0; }
  const Dims& getDimensions(const std::string& input, OptProfileSelector s) const;
  const std::map<std::string, std::array<Dims, 3>>& all() const { return dims_; }

 private:
  std::map<std::string, std::array<Dims, 3>> dims_;
};

//! Memory pools a build can limit (TensorRT's MemoryPoolType).
enum class MemoryPoolType : int { kWORKSPACE = 0 };

//! Build progress callback: (phase name, step, total steps).
using ProgressCallback = std::function<void(const std::string& phase, int step, int total)>;

class BuilderConfig {
 public:
  BuilderConfig();
  void setFlag(BuilderFlag f, bool on = true);
  bool getFlag(BuilderFlag f) const;
  void setDevice(DeviceType d) { device_ = d; }
  DeviceType device() const { return device_; }
  //! CPU worker threads used by the engine's kernels (0 = all hardware threads).
  void setThreads(int n) { threads_ = n; }
  int threads() const { return threads_; }
  //! 0..5: 0 times no tactics (the backend's first choice); level L times the backend's first
  //! 2^L candidates (1: two, 3 (default): eight, 5: all).
  void setBuilderOptimizationLevel(int level) { optLevel_ = level; }
  int builderOptimizationLevel() const { return optLevel_; }
  //! Shapes of a dynamic profile that tactics are timed at: 1 = its opt shapes only (TensorRT's
  //! way), 3 (default) = min, opt and max, 5 = also halfway (geometrically) between them. Where
  //! another tactic beats the opt shapes' one by more than 5% at a shape, the layer gets size
  //! buckets, each with its own kernel, chosen when a context plans a set of shapes.
  void setTacticShapePoints(int n) { shapePoints_ = n; }
  int tacticShapePoints() const { return shapePoints_; }
  void setMaxAuxStreams(int n) { maxAuxStreams_ = n; }
  int maxAuxStreams() const { return maxAuxStreams_; }
  //! Adds an optimization profile; every profile must cover every dynamic input. Profile k gets
  //! its own tactics, timed at its opt dims; contexts select one (setOptimizationProfile).
  void addOptimizationProfile(const OptimizationProfile& p) { profiles_.push_back(p); }
  const std::vector<OptimizationProfile>& profiles() const { return profiles_; }
  void setProgressCallback(ProgressCallback cb) { progress_ = std::move(cb); }
  const ProgressCallback& progressCallback() const { return progress_; }
  //! Number of timed runs per tactic (the fastest run is kept: other work only adds time).
  void setAvgTiming(int n) { avgTiming_ = n; }
  int avgTiming() const { return avgTiming_; }
  //! A timing cache the builder reads (skipping tactics it has timings for) and adds to.
  //! Not owned; must outlive build(). Null: time everything.
  void setTimingCache(TimingCache* cache) { timingCache_ = cache; }
  TimingCache* timingCache() const { return timingCache_; }
  //! GPU: the CUDA device to build for (default 0); the engine runs there too.
  void setDeviceIndex(int index) { deviceIndex_ = index; }
  int deviceIndex() const { return deviceIndex_; }
  //! Tactics that one of these patterns selects are not offered (passes and timing alike): a
  //! pattern selects a name it starts or a run of whole words in it ("avx2", "onednn", "cudnn",
  //! "conv_fp_cudnn"; names are <op>_<type>_<variant>). Build time only: a plan loads whatever
  //! tactics it names.
  void setDisabledTactics(std::vector<std::string> prefixes) { disabledTactics_ = std::move(prefixes); }
  const std::vector<std::string>& disabledTactics() const { return disabledTactics_; }
  //! Debugging aid: builder passes whose name contains one of these words are skipped (a
  //! verbose build names every pass that changed the network).
  void setSkippedPasses(std::vector<std::string> words) { skippedPasses_ = std::move(words); }
  const std::vector<std::string>& skippedPasses() const { return skippedPasses_; }
  //! GPU: float16/bfloat16 conv/pool chains exchange channels-last (nhwc) tensors (default on).
  void setChannelsLast(bool on) { channelsLast_ = on; }
  bool channelsLast() const { return channelsLast_; }
  //! GPU: the smallest batch (at the opt shape) whose conv/pool chains go channels-last (default 1:
  //! every batch; smaller batches keep NCHW).
  void setChannelsLastMinBatch(int64_t batch) { channelsLastMinBatch_ = batch < 1 ? 1 : batch; }
  int64_t channelsLastMinBatch() const { return channelsLastMinBatch_; }
  //! Testing aid: the GPU-only fusions (attention, skip LayerNorm) also in a CPU build, where the
  //! fused layers run on the reference kernels (GPU builds always run them).
  void setGpuFusions(bool on) { gpuFusions_ = on; }
  bool gpuFusions() const { return gpuFusions_; }
  //! Largest workspace (kernel scratch memory) one layer's tactic may use; tactics that need more
  //! at the opt shapes are not chosen (the build warns when that costs time). 0: no limit.
  void setMemoryPoolLimit(MemoryPoolType pool, size_t bytes) {
    if (pool == MemoryPoolType::kWORKSPACE) workspaceLimit_ = bytes;
  }
  size_t getMemoryPoolLimit(MemoryPoolType pool) const { return pool == MemoryPoolType::kWORKSPACE ? workspaceLimit_ : 0; }
  //! Implicit INT8 (with kINT8): the builder runs the float32 network on the CPU over the
  //! calibrator's batches (or takes its cache), and quantizes Conv / MatMul / Gemm layers with
  //! constant weights (README "INT8 calibration" says which). Not owned; must outlive build().
  void setInt8Calibrator(IInt8Calibrator* c) { calibrator_ = c; }
  IInt8Calibrator* getInt8Calibrator() const { return calibrator_; }

 private:
  uint32_t flags_ = 0;
  DeviceType device_ = DeviceType::kCPU;
  int threads_ = 0;
  int optLevel_ = 3;
  int shapePoints_ = 3;
  int maxAuxStreams_ = -1;
  int avgTiming_ = 3;
  std::vector<OptimizationProfile> profiles_;
  ProgressCallback progress_;
  TimingCache* timingCache_ = nullptr;
  int deviceIndex_ = 0;
  std::vector<std::string> disabledTactics_;
  std::vector<std::string> skippedPasses_;
  bool channelsLast_ = true;
  int64_t channelsLastMinBatch_ = 1;
  bool gpuFusions_ = false;
  size_t workspaceLimit_ = 0;
  IInt8Calibrator* calibrator_ = nullptr;
};

class Builder {
 public:
  explicit Builder(ILogger& logger = defaultLogger());
  //! Optimizes `network` (which it may modify) and returns an engine. Throws kiln::Error.
  std::unique_ptr<Engine> build(Network& network, const BuilderConfig& config);

 private:
  ILogger& logger_;
};

}  // namespace kiln
