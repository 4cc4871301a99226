// BuilderConfig (every option the CLI's build flags set), OptimizationProfile and build_engine.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>

#include "bindings.h"
#include "kiln/kiln.h"
#include "kiln/timing_cache.h"
#include "py_calibrator.h"
#include "py_callbacks.h"

namespace kiln::python {

namespace {

namespace py = pybind11;

Dims toDims(const std::vector<int64_t>& v) { return Dims(v.begin(), v.end()); }

//! The Python face of BuilderConfig: plain fields (settable after construction), turned into a
//! kiln::BuilderConfig when a build starts. Names follow trtexec's flags in snake case.
struct PyBuilderConfig {
  std::string device = "auto";  // the CLI's default: the GPU when there is one
  int deviceIndex = 0;
  bool fp16 = false, bf16 = false, int8 = false, fp8 = false, tf32 = true, stronglyTyped = false;
  std::string precisionConstraints = "none";
  std::map<std::string, std::string> layerPrecisions;
  int optimizationLevel = 3;
  int tacticShapePoints = 3;
  std::optional<int> avgTiming;
  int maxAuxStreams = -1;
  int threads = 0;
  std::string timingCache;
  size_t workspaceLimit = 0;
  std::vector<std::string> disabledTactics, skippedPasses;
  bool channelsLast = true, gpuFusions = false, pluginOverride = false;
  std::vector<OptimizationProfile> profiles;
  std::shared_ptr<PyCallable> progress;
  std::map<std::string, std::string> layerOutputTypes;
  std::shared_ptr<PyCallable> calibrator;  //!< implicit INT8 (py_calibrator.h)
  std::string calibrationAlgorithm = "entropy";
  double calibrationPercentile = 99.99;
};

void warnNow(const std::string& msg) {
  if (PyErr_WarnEx(PyExc_RuntimeWarning, msg.c_str(), 2) != 0) throw py::error_already_set();  // warnings as errors
}

DataType precisionOf(const std::string& layer, const std::string& name) {
  if (name == "fp32") return DataType::kFLOAT;
  if (name == "fp16") return DataType::kHALF;
  if (name == "bf16") return DataType::kBF16;
  if (name == "int8") return DataType::kINT8;
  throw Error("layer_precisions: '" + name + "' for '" + layer + "' is not fp32, fp16, bf16 or int8");
}

//! What one build needs, checked and prepared with the GIL held.
struct BuildPlan {
  BuilderConfig cfg;
  std::map<std::string, DataType> layerPrecisions, layerOutputTypes;
  std::string timingCache;
  OnnxParserOptions parser;
  std::unique_ptr<PyCalibrator> calibrator;
};

//! `warnings`: options that cannot apply to the device warn (at build time, not construction).
BuildPlan plan(const PyBuilderConfig& c, bool warnings) {
  auto warn = [warnings](const std::string& msg) {
    if (warnings) warnNow(msg);
  };
  if (c.device != "auto" && c.device != "cpu" && c.device != "gpu")
    throw Error("device must be 'auto', 'cpu' or 'gpu', not '" + c.device + "'");
  if (c.optimizationLevel < 0 || c.optimizationLevel > 5) throw Error("optimization_level must be 0..5");
  if (c.tacticShapePoints != 1 && c.tacticShapePoints != 3 && c.tacticShapePoints != 5)
    throw Error("tactic_shape_points must be 1, 3 or 5");
  if (c.precisionConstraints != "none" && c.precisionConstraints != "prefer" && c.precisionConstraints != "obey")
    throw Error("precision_constraints must be 'none', 'prefer' or 'obey', not '" + c.precisionConstraints + "'");
  if (c.stronglyTyped && (c.fp16 || c.bf16 || c.int8 || c.fp8)) throw Error("fp16/bf16/int8/fp8 conflict with strongly_typed (types come from the network)");
  if (!c.layerPrecisions.empty() && c.precisionConstraints == "none")
    throw Error("layer_precisions needs precision_constraints='prefer' or 'obey' (as trtexec)");
  if (c.deviceIndex < 0) throw Error("device_index must be >= 0");
  if (c.avgTiming && *c.avgTiming < 1) throw Error("avg_timing must be >= 1");
  if (c.threads < 0) throw Error("threads must be >= 0 (0: all hardware threads)");
  if (c.device == "gpu" && !gpuAvailable()) throw UnsupportedError("device='gpu': no usable CUDA device, or this build of kiln has no CUDA backend");
  const bool cpu = c.device == "cpu" || (c.device == "auto" && !gpuAvailable());
  BuildPlan p;
  BuilderConfig& cfg = p.cfg;
  cfg.setDevice(cpu ? DeviceType::kCPU : DeviceType::kGPU);
  auto precision = [&](bool requested, BuilderFlag flag, const char* name) {
    if (!requested) return;
    if (cpu) warn(std::string(name) + " is not supported on the CPU; building an FP32 engine");
    else cfg.setFlag(flag, true);
  };
  precision(c.fp16, BuilderFlag::kFP16, "fp16");
  precision(c.bf16, BuilderFlag::kBF16, "bf16");
  cfg.setFlag(BuilderFlag::kINT8, c.int8);  // either device: Q/DQ models, or calibration
  cfg.setFlag(BuilderFlag::kFP8, c.fp8);    // implicit FP8 for MatMul / Gemm with a calibrator
  if (c.calibrator && !c.int8 && !c.fp8) throw Error("calibrator needs int8=True or fp8=True");
  if (c.calibrator) {
    p.calibrator = std::make_unique<PyCalibrator>(c.calibrator, calibrationAlgorithm(c.calibrationAlgorithm), c.calibrationPercentile);
    cfg.setInt8Calibrator(p.calibrator.get());
  } else {
    calibrationAlgorithm(c.calibrationAlgorithm);
  }
  cfg.setFlag(BuilderFlag::kTF32, c.tf32);
  cfg.setFlag(BuilderFlag::kSTRONGLY_TYPED, c.stronglyTyped);
  cfg.setFlag(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS, c.precisionConstraints == "obey");
  cfg.setFlag(BuilderFlag::kPREFER_PRECISION_CONSTRAINTS, c.precisionConstraints == "prefer");
  for (const auto& [layer, type] : c.layerPrecisions) p.layerPrecisions[layer] = precisionOf(layer, type);
  for (const auto& [layer, type] : c.layerOutputTypes) p.layerOutputTypes[layer] = precisionOf(layer, type);
  if (!c.layerOutputTypes.empty() && c.precisionConstraints == "none")
    throw Error("layer_output_types needs precision_constraints='prefer' or 'obey' (as trtexec)");
  for (const auto* m : {&p.layerPrecisions, &p.layerOutputTypes})
    for (const auto& [layer, t] : *m)
      if (t == DataType::kINT8 && !c.int8) throw Error("'" + layer + "': int8 needs int8=True");
  cfg.setBuilderOptimizationLevel(c.optimizationLevel);
  cfg.setTacticShapePoints(c.tacticShapePoints);
  if (c.avgTiming) cfg.setAvgTiming(*c.avgTiming);
  if (c.maxAuxStreams != -1) {
    if (cpu) warn("max_aux_streams has no effect on the CPU (it has no streams)");
    else cfg.setMaxAuxStreams(c.maxAuxStreams);
  }
  if (cpu && c.deviceIndex != 0) warn("device_index has no effect on the CPU");
  cfg.setDeviceIndex(c.deviceIndex);
  cfg.setThreads(c.threads);
  cfg.setMemoryPoolLimit(MemoryPoolType::kWORKSPACE, c.workspaceLimit);
  cfg.setDisabledTactics(c.disabledTactics);
  cfg.setSkippedPasses(c.skippedPasses);
  cfg.setChannelsLast(c.channelsLast);
  cfg.setGpuFusions(c.gpuFusions);
  for (const OptimizationProfile& profile : c.profiles) cfg.addOptimizationProfile(profile);
  if (c.progress) cfg.setProgressCallback(progressCallback(c.progress));
  p.timingCache = c.timingCache;
  p.parser.pluginOverride = c.pluginOverride;
  return p;
}

std::shared_ptr<Engine> build(const py::object& model, const PyBuilderConfig& c, const py::object& loggerFn) {
  BuildPlan p = plan(c, true);
  std::shared_ptr<PyLogger> pyLogger = loggerFor(loggerFn);
  ILogger& logger = pyLogger ? static_cast<ILogger&>(*pyLogger) : defaultLogger();
  // A path (str or os.PathLike) or the serialized model (bytes, e.g. ModelProto.SerializeToString()).
  const bool inMemory = py::isinstance<py::bytes>(model);
  const std::string source =
      inMemory ? std::string(py::bytes(model)) : std::string(py::str(py::module_::import("os").attr("fspath")(model)));
  std::unique_ptr<Engine> engine;
  {
    py::gil_scoped_release release;
    Network net;
    if (inMemory) parseOnnxBuffer(source.data(), source.size(), net, "", logger, p.parser);
    else parseOnnxFile(source, net, logger, p.parser);
    setLayerPrecisions(net, p.layerPrecisions);
    setLayerOutputTypes(net, p.layerOutputTypes);
    TimingCache cache;
    if (!p.timingCache.empty()) {
      cache = TimingCache::load(p.timingCache);
      p.cfg.setTimingCache(&cache);
    }
    engine = Builder(logger).build(net, p.cfg);
    if (!p.timingCache.empty()) cache.save(p.timingCache);
  }
  return shareEngine(std::move(engine), std::move(pyLogger));
}

}  // namespace

void bindBuilder(py::module_& m) {
  py::class_<OptimizationProfile>(m, "OptimizationProfile")
      .def(py::init<>())
      .def(
          "set_shape",
          [](OptimizationProfile& p, const std::string& input, const std::vector<int64_t>& min, const std::vector<int64_t>& opt,
             const std::vector<int64_t>& max) {
            p.setDimensions(input, OptProfileSelector::kMIN, toDims(min));
            p.setDimensions(input, OptProfileSelector::kOPT, toDims(opt));
            p.setDimensions(input, OptProfileSelector::kMAX, toDims(max));
          },
          py::arg("input"), py::arg("min"), py::arg("opt"), py::arg("max"), "min/opt/max shapes of a dynamic input");

  py::class_<PyBuilderConfig> cfg(m, "BuilderConfig",
                                  "Build options: every keyword is also an attribute. Options that cannot apply to the "
                                  "device (fp16 on the CPU, ...) warn (RuntimeWarning) when the build starts.");
  cfg.def(py::init([](const std::string& device, int deviceIndex, bool fp16, bool bf16, bool int8, bool tf32, bool stronglyTyped,
                      const std::string& precisionConstraints, const std::map<std::string, std::string>& layerPrecisions,
                      int level, std::optional<int> avgTiming, int maxAux, int threads, const std::string& timingCache,
                      size_t workspaceLimit, const std::vector<std::string>& disabledTactics,
                      const std::vector<std::string>& skippedPasses, bool channelsLast, bool gpuFusions, bool pluginOverride,
                      const std::vector<OptimizationProfile>& profiles, const py::object& progress) {
            auto c = std::make_unique<PyBuilderConfig>();
            c->device = device;
            c->deviceIndex = deviceIndex;
            c->fp16 = fp16;
            c->bf16 = bf16;
            c->int8 = int8;
            c->tf32 = tf32;
            c->stronglyTyped = stronglyTyped;
            c->precisionConstraints = precisionConstraints;
            c->layerPrecisions = layerPrecisions;
            c->optimizationLevel = level;
            c->avgTiming = avgTiming;
            c->maxAuxStreams = maxAux;
            c->threads = threads;
            c->timingCache = timingCache;
            c->workspaceLimit = workspaceLimit;
            c->disabledTactics = disabledTactics;
            c->skippedPasses = skippedPasses;
            c->channelsLast = channelsLast;
            c->gpuFusions = gpuFusions;
            c->pluginOverride = pluginOverride;
            c->profiles = profiles;
            if (!progress.is_none()) c->progress = std::make_shared<PyCallable>(progress);
            plan(*c, false);  // bad values are errors here already (warnings wait for the build)
            return c;
          }),
          py::kw_only(), py::arg("device") = "auto", py::arg("device_index") = 0, py::arg("fp16") = false,
          py::arg("bf16") = false, py::arg("int8") = false, py::arg("tf32") = true, py::arg("strongly_typed") = false,
          py::arg("precision_constraints") = "none", py::arg("layer_precisions") = std::map<std::string, std::string>(),
          py::arg("optimization_level") = 3, py::arg("avg_timing") = py::none(), py::arg("max_aux_streams") = -1,
          py::arg("threads") = 0, py::arg("timing_cache") = "", py::arg("workspace_limit") = 0,
          py::arg("disabled_tactics") = std::vector<std::string>(), py::arg("skipped_passes") = std::vector<std::string>(),
          py::arg("channels_last") = true, py::arg("gpu_fusions") = false, py::arg("plugin_override") = false,
          py::arg("profiles") = std::vector<OptimizationProfile>(), py::arg("progress") = py::none());
  cfg.def_readwrite("device", &PyBuilderConfig::device, "'auto' (the GPU when there is one, as the CLI), 'cpu' or 'gpu'")
      .def_readwrite("device_index", &PyBuilderConfig::deviceIndex, "CUDA device to build for and run on (trtexec --device=N)")
      .def_readwrite("fp16", &PyBuilderConfig::fp16)
      .def_readwrite("bf16", &PyBuilderConfig::bf16)
      .def_readwrite("int8", &PyBuilderConfig::int8)
      .def_readwrite("fp8", &PyBuilderConfig::fp8,
                     "FP8 E4M3 (--fp8): with a calibrator, MatMul / Gemm with constant weights are quantized to FP8 per tensor")
      .def_readwrite("tf32", &PyBuilderConfig::tf32, "TF32 for float32 matmul/conv on the GPU (--noTF32 = False)")
      .def_readwrite("strongly_typed", &PyBuilderConfig::stronglyTyped)
      .def_readwrite("precision_constraints", &PyBuilderConfig::precisionConstraints, "'none', 'prefer' or 'obey'")
      .def_readwrite("layer_precisions", &PyBuilderConfig::layerPrecisions,
                     "{layer name or '*' pattern: 'fp32' | 'fp16' | 'bf16' | 'int8'} (--layerPrecisions; needs precision_constraints)")
      .def_readwrite("optimization_level", &PyBuilderConfig::optimizationLevel, "0..5: level L times 2^L tactics per layer")
      .def_readwrite("tactic_shape_points", &PyBuilderConfig::tacticShapePoints,
                     "dynamic profiles: shapes tactics are timed at (1: opt, 3: min/opt/max, 5); size buckets where they differ")
      .def_readwrite("avg_timing", &PyBuilderConfig::avgTiming, "timed runs per tactic (None: kiln's default)")
      .def_readwrite("max_aux_streams", &PyBuilderConfig::maxAuxStreams, "auxiliary streams (GPU; -1: the builder decides)")
      .def_readwrite("threads", &PyBuilderConfig::threads, "CPU worker threads (0: all hardware threads)")
      .def_readwrite("timing_cache", &PyBuilderConfig::timingCache, "timing cache file read before and written after a build")
      .def_readwrite("workspace_limit", &PyBuilderConfig::workspaceLimit, "largest workspace (bytes) a layer may use; 0: none")
      .def_readwrite("disabled_tactics", &PyBuilderConfig::disabledTactics, "tactic name patterns not to use (--disableTactics)")
      .def_readwrite("skipped_passes", &PyBuilderConfig::skippedPasses, "builder passes to skip (debugging, --skipPasses)")
      .def_readwrite("channels_last", &PyBuilderConfig::channelsLast, "GPU: half-precision conv chains channels-last")
      .def_readwrite("gpu_fusions", &PyBuilderConfig::gpuFusions, "the GPU-only fusions also on the CPU (testing)")
      .def_readwrite("plugin_override", &PyBuilderConfig::pluginOverride, "a registered plugin replaces a built-in op")
      .def_readwrite("profiles", &PyBuilderConfig::profiles, "optimization profiles (add_optimization_profile appends)")
      .def_property(
          "progress", [](const PyBuilderConfig& c) { return c.progress ? c.progress->fn() : py::object(py::none()); },
          [](PyBuilderConfig& c, const py::object& fn) {
            c.progress = fn.is_none() ? nullptr : std::make_shared<PyCallable>(fn);
          },
          "fn(phase, step, total) called during the build; an exception it raises stops the build")
      .def(
          "add_optimization_profile", [](PyBuilderConfig& c, const OptimizationProfile& p) { c.profiles.push_back(p); },
          py::arg("profile"))
      .def_readwrite("layer_output_types", &PyBuilderConfig::layerOutputTypes,
                     "{layer name or pattern: 'fp32' | 'fp16' | 'bf16' | 'int8'}: output 0's type (--layerOutputTypes)")
      .def_property(
          "calibrator", [](const PyBuilderConfig& c) { return c.calibrator ? c.calibrator->fn() : py::object(py::none()); },
          [](PyBuilderConfig& c, const py::object& obj) {
            if (!obj.is_none() && !py::hasattr(obj, "get_batch")) throw Error("calibrator must have a get_batch() method");
            c.calibrator = obj.is_none() ? nullptr : std::make_shared<PyCallable>(obj);
          },
          "implicit INT8 (with int8=True): an object with get_batch() -> {input: array} or None when done, and optionally "
          "read_calibration_cache() -> bytes or None and write_calibration_cache(data)")
      .def_readwrite("calibration_algorithm", &PyBuilderConfig::calibrationAlgorithm, "'entropy' (default), 'minmax' or 'percentile'")
      .def_readwrite("calibration_percentile", &PyBuilderConfig::calibrationPercentile, "for 'percentile' (default 99.99)")
      .def_property_readonly("num_optimization_profiles", [](const PyBuilderConfig& c) { return c.profiles.size(); });

  m.def("build_engine", &build, py::arg("model"), py::arg("config"), py::kw_only(), py::arg("logger") = py::none(),
        "Parses an ONNX model (a file path, or the serialized model as bytes; external data needs a path) and builds an "
        "engine with `config`. logger(severity, message) receives every message of the build and of the engine's runs "
        "(severity: 'error', 'warning', 'info', 'verbose'); None: kiln's stderr logger (kiln.set_log_level)");
}

}  // namespace kiln::python
