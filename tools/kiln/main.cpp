// kiln: the command-line front end (trtexec's flags). It parses flags, builds or loads an engine
// through the public API, runs it with trtexec's timing loop and reports.
//
// Exit status: 0 success, 1 error, 2 bad command line, 3 valid but unsupported input/feature.
// Errors go to stderr as "[E] Error: <message>" (or "[E] Unsupported: <message>").
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <new>

#include "calib_data.h"
#include "compare.h"
#include "engine_io.h"
#include "inference.h"
#include "kiln/kiln.h"
#include "kiln/layer_precisions.h"
#include "mapped_file.h"
#include "options.h"
#include "reporting.h"
#include "trtexec_compat.h"

namespace kiln::cli {
namespace {

using Severity = ILogger::Severity;

//! Info/verbose to stdout, warnings/errors to stderr; library messages below `threshold` dropped.
//! Also owns the terminal's build progress line, which it clears before printing a message.
class CliLogger : public ILogger {
 public:
  explicit CliLogger(bool verbose) : threshold_(verbose ? Severity::kVERBOSE : Severity::kINFO) {}
  void log(Severity s, const std::string& msg) noexcept override {
    if (static_cast<int>(s) > static_cast<int>(threshold_)) return;
    std::lock_guard<std::mutex> lock(mu_);
    clearProgressLocked();
    bool err = s == Severity::kERROR || s == Severity::kWARNING;
    const char* tag = s == Severity::kERROR     ? "[E] "
                      : s == Severity::kWARNING ? "[W] "
                      : s == Severity::kINFO    ? "[I] "
                                                : "[V] ";
    std::FILE* f = err ? stderr : stdout;
    if (err) std::fflush(stdout);  // keep the order readable when both go to one terminal
    std::fprintf(f, "%s%s\n", tag, msg.c_str());
    std::fflush(f);
  }
  //! Rewrites the single progress line on stderr (only call when stderr is a terminal).
  void showProgress(const std::string& text) {
    std::lock_guard<std::mutex> lock(mu_);
    std::fflush(stdout);
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    std::fflush(stderr);
    progressShown_ = true;
  }
  void clearProgress() {
    std::lock_guard<std::mutex> lock(mu_);
    clearProgressLocked();
  }

 private:
  void clearProgressLocked() {
    if (progressShown_) std::fprintf(stderr, "\r\033[K");
    progressShown_ = false;
  }
  Severity threshold_;
  std::mutex mu_;
  bool progressShown_ = false;
};

//! Builder progress: a single rewritten line on a terminal, verbose phase messages otherwise.
class ProgressReporter {
 public:
  explicit ProgressReporter(CliLogger& logger) : logger_(logger), tty_(isatty(STDERR_FILENO) == 1) {}
  ~ProgressReporter() { logger_.clearProgress(); }
  void update(const std::string& phase, int step, int total) {
    if (tty_)
      logger_.showProgress("[I] Building: " + phase + " [" + std::to_string(step) + "/" + std::to_string(total) + "]");
    else if (phase != lastPhase_)
      logger_.log(Severity::kVERBOSE, "Build phase: " + phase);
    lastPhase_ = phase;
  }

 private:
  CliLogger& logger_;
  bool tty_;
  std::string lastPhase_;
};

DeviceType chooseDevice(const Options& o) {
  // --device=N (N > 0) names a GPU: without it there is nothing to fall back to.
  if (!o.device && o.gpuIndex.value_or(0) > 0 && !gpuAvailable())
    throw UnsupportedError("--device=" + std::to_string(*o.gpuIndex) + ": there is no GPU " + std::to_string(*o.gpuIndex) +
                           " (or this build of kiln has no CUDA backend); --backend=cpu runs on the CPU");
  if (!o.device) return gpuAvailable() ? DeviceType::kGPU : DeviceType::kCPU;
  if (*o.device == "cpu") return DeviceType::kCPU;
  if (!gpuAvailable())
    throw UnsupportedError("--device=gpu: no usable CUDA device, or this build of kiln has no CUDA backend");
  return DeviceType::kGPU;
}

//! Flags whose feature this build does not have fail; flags that cannot apply to the device warn.
void checkRuntimeFeatures(const Options& o, DeviceType device, ILogger& logger) {
  if (o.useCudaGraph && device == DeviceType::kCPU)
    logger.log(Severity::kWARNING, "--useCudaGraph: the CPU has no CUDA graphs; running plain enqueue");
  if (o.noDataTransfers && device == DeviceType::kCPU)
    logger.log(Severity::kVERBOSE, "--noDataTransfers: the CPU binds host buffers directly; there are no transfers");
}

BuilderConfig makeBuilderConfig(const Options& o, DeviceType device, ILogger& logger) {
  BuilderConfig cfg;
  cfg.setDevice(device);
  cfg.setThreads(o.threads.value_or(0));
  bool cpu = device == DeviceType::kCPU;
  auto precision = [&](bool requested, BuilderFlag flag, const char* name) {
    if (!requested) return;
    if (cpu)
      logger.log(Severity::kWARNING, std::string(name) + " is not supported on the CPU; building an FP32 engine");
    else
      cfg.setFlag(flag, true);
  };
  precision(o.fp16, BuilderFlag::kFP16, "FP16 (--fp16)");
  precision(o.bf16, BuilderFlag::kBF16, "BF16 (--bf16)");
  // INT8 on either device: the builder says whether it has an effect (Q/DQ models) or not.
  if (o.int8) cfg.setFlag(BuilderFlag::kINT8, true);
  if (o.fp8) cfg.setFlag(BuilderFlag::kFP8, true);
  if (o.noTF32) cfg.setFlag(BuilderFlag::kTF32, false);
  if (o.precisionConstraints == "obey") cfg.setFlag(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS, true);
  if (o.precisionConstraints == "prefer") cfg.setFlag(BuilderFlag::kPREFER_PRECISION_CONSTRAINTS, true);
  if (o.stronglyTyped) cfg.setFlag(BuilderFlag::kSTRONGLY_TYPED, true);
  if (o.builderOptimizationLevel) cfg.setBuilderOptimizationLevel(*o.builderOptimizationLevel);
  if (o.tacticShapePoints) cfg.setTacticShapePoints(*o.tacticShapePoints);
  cfg.setDeviceIndex(o.gpu);
  cfg.setDisabledTactics(o.disableTactics);
  cfg.setMemoryPoolLimit(MemoryPoolType::kWORKSPACE, o.workspaceLimit);
  cfg.setSkippedPasses(o.skipPasses);
  cfg.setChannelsLast(!o.noChannelsLast);
  if (o.channelsLastMinBatch) cfg.setChannelsLastMinBatch(*o.channelsLastMinBatch);
  cfg.setGpuFusions(o.gpuFusions);
  if (o.avgTiming) cfg.setAvgTiming(*o.avgTiming);
  if (o.maxAuxStreams) {
    if (cpu)
      logger.log(Severity::kWARNING, "--maxAuxStreams has no effect on the CPU (it has no streams)");
    else
      cfg.setMaxAuxStreams(*o.maxAuxStreams);
  }
  return cfg;
}

//! --layerPrecisions / --layerOutputTypes: each named (or '*'-matched) layer's constraint; an entry
//! that matches no layer is a command-line error. The builder checks them (obey / prefer).
void applyLayerConstraints(Network& net, const Options& o) {
  try {
    if (!o.layerPrecisions.empty()) setLayerPrecisions(net, o.layerPrecisions);
  } catch (const Error& e) {
    throw UsageError(std::string("--layerPrecisions: ") + e.what());
  }
  try {
    if (!o.layerOutputTypes.empty()) setLayerOutputTypes(net, o.layerOutputTypes);
  } catch (const Error& e) {
    throw UsageError(std::string("--layerOutputTypes: ") + e.what());
  }
}

//! --calibData / --calib: the calibrator of an implicit INT8 build, or null.
std::unique_ptr<DirectoryCalibrator> makeCalibrator(const Network& net, const Options& o) {
  if ((!o.int8 && !o.fp8) || (o.calibData.empty() && o.calibCache.empty())) return nullptr;
  if (o.calibData.empty() && !std::ifstream(o.calibCache))
    throw Error("--calib: '" + o.calibCache + "' does not exist and no --calibData was given to calibrate with");
  return std::make_unique<DirectoryCalibrator>(net, o.calibData, o.calibCache, parseCalibAlgo(o.calibAlgo), o.calibPercentile);
}

std::unique_ptr<Engine> buildEngine(const Options& o, DeviceType device, CliLogger& logger,
                                    const std::function<void(Network&)>& instrument) {
  Network network;
  double t0 = nowMs();
  OnnxParserOptions parserOptions;
  parserOptions.pluginOverride = o.enablePluginOverride;
  parseOnnxFile(o.onnx, network, logger, parserOptions);
  logger.log(Severity::kINFO, "Parsed '" + o.onnx + "': " + std::to_string(network.nbLayers()) + " layers in " +
                                  std::to_string((nowMs() - t0) / 1000.0) + " sec");
  applyLayerConstraints(network, o);
  if (instrument) instrument(network);
  BuilderConfig cfg = makeBuilderConfig(o, device, logger);
  std::unique_ptr<DirectoryCalibrator> calibrator = makeCalibrator(network, o);
  if (calibrator) cfg.setInt8Calibrator(calibrator.get());
  for (const OptimizationProfile& profile : makeProfiles(network, o, logger)) cfg.addOptimizationProfile(profile);
  TimingCache cache;
  if (!o.timingCacheFile.empty()) {
    cache = TimingCache::load(o.timingCacheFile);
    cfg.setTimingCache(&cache);
    logger.log(Severity::kINFO, "Timing cache '" + o.timingCacheFile + "': " + std::to_string(cache.size()) + " entries");
  }
  double t1 = nowMs();
  std::unique_ptr<Engine> engine;
  {
    ProgressReporter progress(logger);  // clears its line when the build ends, even by an error
    cfg.setProgressCallback(
        [&progress](const std::string& phase, int step, int total) { progress.update(phase, step, total); });
    engine = Builder(logger).build(network, cfg);
  }
  if (!engine) throw Error("the builder returned no engine");
  std::printf("[I] Engine built in %g sec.\n", (nowMs() - t1) / 1000.0);
  if (!o.timingCacheFile.empty()) {
    cache.save(o.timingCacheFile);
    logger.log(Severity::kINFO, "Timing cache: " + std::to_string(cache.hits()) + " hits, " + std::to_string(cache.misses()) +
                                    " misses; saved " + std::to_string(cache.size()) + " entries to '" + o.timingCacheFile + "'");
  }
  return engine;
}

std::unique_ptr<Engine> loadEngine(const Options& o, ILogger& logger) {
  bool buildFlags = o.fp16 || o.bf16 || o.int8 || o.fp8 || o.noTF32 || o.stronglyTyped || o.builderOptimizationLevel || o.tacticShapePoints || o.avgTiming ||
                    o.maxAuxStreams.has_value() || !o.timingCacheFile.empty() || !o.disableTactics.empty() ||
                    !o.skipPasses.empty() || o.noChannelsLast || o.channelsLastMinBatch || o.gpuFusions || o.workspaceLimit;
  if (buildFlags)
    logger.log(Severity::kWARNING,
               "build options (--fp16, --bf16, --int8, --fp8, --noTF32, --stronglyTyped, --builderOptimizationLevel, "
               "--tacticShapePoints, --maxAuxStreams, --timingCacheFile, --disableTactics, --skipPasses, --noChannelsLast, --channelsLastMinBatch, --gpuFusions, --memPoolSize) "
               "apply when building; they are ignored with --loadEngine");
  double t0 = nowMs();
  MappedFile plan(o.loadEngine, "engine file");  // mapped, not copied: one copy of the weights
  // --device=N / --gpu=N: the CUDA device the engine loads on (a CPU plan ignores it).
  std::unique_ptr<Engine> engine = Engine::deserialize(plan.data(), plan.size(), o.gpu, logger, o.threads.value_or(-1));
  if (!engine) throw Error("'" + o.loadEngine + "' could not be loaded");
  std::printf("[I] Engine loaded from '%s' (%zu bytes) in %g sec.\n", o.loadEngine.c_str(), plan.size(),
              (nowMs() - t0) / 1000.0);
  if (o.device && *o.device != toString(engine->device()))
    throw Error("--device=" + *o.device + " but the engine '" + o.loadEngine + "' was built for " +
                toString(engine->device()));
  return engine;
}

void saveEngine(const Engine& engine, const std::string& path) {
  std::vector<uint8_t> plan = engine.serialize();
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error("cannot write engine file '" + path + "': " + std::strerror(errno));
  f.write(reinterpret_cast<const char*>(plan.data()), static_cast<std::streamsize>(plan.size()));
  f.close();
  if (!f) throw Error("failed writing engine file '" + path + "'");
  std::printf("[I] Engine saved to '%s' (%zu bytes).\n", path.c_str(), plan.size());
}

void describeEngine(const Engine& engine) {
  size_t arena = engine.getDeviceMemorySize();
  std::printf("[I] Device: %s, layers: %d, aux streams: %d\n", toString(engine.device()), engine.getNbLayers(),
              engine.getNbAuxStreams());
  std::printf("[I] Activation memory (arena): %zu bytes (%.2f MiB)\n", arena, static_cast<double>(arena) / (1 << 20));
  printEngineIO(std::cout, engine);
  std::cout.flush();
}

void exportLayerInfo(const Engine& engine, const Options& o) {
  if (!o.dumpLayerInfo && o.exportLayerInfo.empty()) return;
  std::string info = engine.getLayerInformation();
  if (o.dumpLayerInfo) std::cout << "[I] Layer Information:\n" << info << '\n';
  if (!o.exportLayerInfo.empty()) writeTextFile(o.exportLayerInfo, addTrtexecLayerInfo(info, engine) + "\n");
}

void runInference(const Engine& engine, const Options& o, ILogger& logger) {
  std::map<std::string, HostTensor> inputs = prepareInputs(engine, o, logger);
  std::vector<std::unique_ptr<InferenceSlot>> slots;
  for (int i = 0; i < o.streams; ++i)
    slots.push_back(
        std::make_unique<InferenceSlot>(engine, inputs, o.useCudaGraph && engine.device() == DeviceType::kGPU, o.useProfile, o.gpu,
                                        o.poisonFreedMemory));
  {
    const MemoryUsage m = slots.front()->context().getMemoryUsage();
    const double mib = 1 << 20;
    std::printf("[I] Memory per context: arena %.2f MiB (lower bound %.2f MiB), workspace %.2f MiB; weights %.2f MiB per engine\n",
                m.arenaBytes / mib, m.arenaLowerBound / mib, m.workspaceBytes / mib, engine.getWeightBytes() / mib);
  }

  bool gpu = engine.device() == DeviceType::kGPU;
  if (gpu && o.useCudaGraph) {
    int captured = 0;
    for (auto& s : slots) captured += s->usesGraph();
    std::printf("[I] CUDA graphs: %d of %d stream(s) replay a captured graph%s\n", captured, o.streams,
                captured < o.streams ? " (the others enqueue; see the warning)" : "");
  }
  TimingSettings settings{o.warmUpMs, o.durationS, o.iterations, !o.noDataTransfers};
  std::cout << "[I] Starting inference" << std::endl;
  int warmUpRuns = 0;
  std::vector<IterationTimes> times = runTimingLoop(slots, settings, warmUpRuns);
  double span = times.empty() ? 0.0 : times.back().endMs;
  for (const auto& t : times) span = std::max(span, t.endMs);
  std::printf("[I] Warmup completed %d queries over %g ms\n", warmUpRuns, o.warmUpMs);
  std::printf("[I] Timing trace has %zu queries over %g s\n", times.size(), span / 1000.0);
  printPerformanceSummary(std::cout, times, o.avgRuns, o.percentiles, gpu);
  if (!o.exportTimes.empty()) writeTimesJson(o.exportTimes, times, gpu);

  if (o.dumpProfile || !o.exportProfile.empty()) {
    // A separate profiled run: per-layer timing slows enqueue, so it stays out of the summary.
    LayerProfiler profiler;
    InferenceSlot& slot = *slots.front();
    slot.context().setProfiler(&profiler);
    for (int i = 0; i < o.iterations; ++i) slot.runPlain(settings.transfers);
    slot.context().setProfiler(nullptr);
    profiler.setIterations(o.iterations);
    profiler.setRoofline(slot.context().getLayerCosts(), slot.context().engine().getDevicePeak(),
                         slot.context().getMemoryUsage().liveBytes);
    if (o.dumpProfile) profiler.print(std::cout);
    if (!o.exportProfile.empty()) profiler.writeJson(o.exportProfile);
  }

  std::vector<NamedTensor> outputs = slots.front()->outputs();
  if (o.dumpOutput) printOutputs(std::cout, outputs);
  if (!o.exportOutput.empty()) writeOutputsJson(o.exportOutput, outputs);
  std::cout.flush();
}

//! --getPlanVersionOnly: the kiln version in the plan's header, without deserializing the plan.
//! Header layout (src/plan/plan_file.cpp): 8-byte magic, u32 format version, u32 length + the
//! kiln version string.
int printPlanVersion(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open engine file '" + path + "': " + std::strerror(errno));
  char head[16];
  uint32_t format = 0, len = 0;
  if (!f.read(head, 16)) throw Error("'" + path + "' is too short to be a kiln plan");
  std::memcpy(&format, head + 8, 4);
  std::memcpy(&len, head + 12, 4);
  std::string version(std::min<uint32_t>(len, 64), '\0');
  if (std::memcmp(head, "KILNPLAN", 8) != 0 || len > 64 || !f.read(version.data(), len))
    throw Error("'" + path + "' is not a kiln plan file");
  std::printf("[I] Plan was created with kiln version: %s (plan format %u)\n", version.c_str(), format);
  return 0;
}

void listPlugins() {
  auto all = getPluginRegistry().list();
  std::printf("[I] Registered plugins: %zu\n", all.size());
  for (const auto& p : all)
    std::printf("[I]   %s%s version %s%s\n", p.pluginNamespace.empty() ? "" : (p.pluginNamespace + "::").c_str(),
                p.name.c_str(), p.version.c_str(), p.library.empty() ? "" : ("  (" + p.library + ")").c_str());
}

int run(const Options& o) {
  CliLogger logger(o.verbose);
  for (const std::string& w : o.compatWarnings) logger.log(Severity::kWARNING, w);
  if (o.getPlanVersionOnly) return printPlanVersion(o.loadEngine);
  for (const auto& lib : o.plugins) {
    loadPluginLibrary(lib);
    logger.log(Severity::kINFO, "Loaded plugin library '" + lib + "'");
  }
  if (o.listPlugins) {
    listPlugins();
    return 0;
  }
  std::unique_ptr<Engine> engine;
  if (!o.onnx.empty()) {
    DeviceType device = chooseDevice(o);
    checkRuntimeFeatures(o, device, logger);
    if (!o.compareWith.empty()) return compareWithFp32(o, [&](const Options& opts, const std::function<void(Network&)>& instrument) {
      return buildEngine(opts, device, logger, instrument);
    }, logger);
    engine = buildEngine(o, device, logger, {});
  } else {
    engine = loadEngine(o, logger);
    checkRuntimeFeatures(o, engine->device(), logger);
  }
  describeEngine(*engine);
  if (o.dumpOptimizationProfile) printOptimizationProfiles(std::cout, *engine);
  if (o.useProfile >= engine->getNbOptimizationProfiles())
    throw UsageError("--useProfile=" + std::to_string(o.useProfile) + ": the engine has " +
                     std::to_string(engine->getNbOptimizationProfiles()) + " optimization profile(s)");
  if (!o.saveEngine.empty()) saveEngine(*engine, o.saveEngine);
  exportLayerInfo(*engine, o);
  if (!o.skipInference) runInference(*engine, o, logger);
  return 0;
}

std::string commandLine(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) s += (i ? " " : "") + std::string(argv[i]);
  return s;
}

int fail(const std::string& cmd, const char* kind, const std::string& msg, int status) {
  std::fflush(stdout);
  // Continuation lines (e.g. a list of unsupported nodes) keep the "[E]" tag for grep-ability.
  std::string text = msg;
  for (size_t pos = text.find('\n'); pos != std::string::npos; pos = text.find('\n', pos + 1))
    text.replace(pos, 1, "\n[E]   ");
  std::fprintf(stderr, "[E] %s: %s\n", kind, text.c_str());
  std::printf("&&&& FAILED kiln [v%s] # %s\n", KILN_VERSION_STRING, cmd.c_str());
  return status;
}

}  // namespace
}  // namespace kiln::cli

int main(int argc, char** argv) {
  using namespace kiln::cli;
  std::string cmd = commandLine(argc, argv);
  try {
    Options opts;
    if (parseOptions(argc, argv, opts) == ParseOutcome::kExitSuccess) return 0;
    std::printf("&&&& RUNNING kiln [v%s] # %s\n", KILN_VERSION_STRING, cmd.c_str());
    run(opts);
    std::printf("&&&& PASSED kiln [v%s] # %s\n", KILN_VERSION_STRING, cmd.c_str());
    return 0;
  } catch (const UsageError& e) {
    return fail(cmd, "Error", e.what(), 2);
  } catch (const kiln::UnsupportedError& e) {
    return fail(cmd, "Unsupported", e.what(), 3);
  } catch (const kiln::Error& e) {
    return fail(cmd, "Error", e.what(), 1);
  } catch (const std::bad_alloc&) {
    return fail(cmd, "Error", "out of memory", 1);
  } catch (const std::exception& e) {
    return fail(cmd, "Error", std::string("internal error: ") + e.what(), 1);
  }
}
