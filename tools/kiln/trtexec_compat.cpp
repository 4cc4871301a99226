#include "trtexec_compat.h"

#include <charconv>
#include <cstdlib>
#include <ostream>

#include <nlohmann/json.hpp>

#include "kiln/runtime.h"

namespace kiln::cli {

namespace {

struct NoEffect {
  const char* flag;  //!< with its aliases, CLI11 style ("--versionCompatible,--vc")
  bool takesValue;
  const char* why;   //!< completes "<flag> has no effect: ..."
};

// trtexec flags kiln accepts but cannot honour. Each prints exactly one warning when given.
constexpr NoEffect kNoEffect[] = {
    // build
    {"--inputIOFormats", true, "engine inputs keep the network's types and the linear (chw) layout"},
    {"--outputIOFormats", true, "engine outputs keep the network's types and the linear (chw) layout"},
    {"--profilingVerbosity", true, "kiln's plans always keep detailed layer information"},
    {"--noBuilderCache", false, "kiln's builder has no in-build timing cache (only --timingCacheFile)"},
    {"--noCompilationCache", false, "kiln keeps no compilation cache"},
    {"--errorOnTimingCacheMiss", false, "a timing cache miss is timed, never an error"},
    {"--tacticSources", true, "tactic sources (cuBLAS, cuDNN, ...) cannot be selected from the command line"},
    {"--sparsity", true, "kiln has no structured-sparsity kernels"},
    {"--refit", false, "kiln engines are not refittable"},
    {"--stripWeights", false, "kiln plans always contain their weights"},
    {"--stripAllWeights", false, "kiln plans always contain their weights"},
    {"--versionCompatible,--vc", false, "a plan loads only in the kiln version that built it"},
    {"--excludeLeanRuntime", false, "kiln has no lean runtime"},
    {"--leanDLLPath", true, "kiln has no lean runtime"},
    {"--hardwareCompatibilityLevel", true, "a plan runs only on the device it was built for"},
    {"--runtimePlatform", true, "a plan runs only on the platform it was built on"},
    {"--tempdir", true, "kiln writes no temporary files"},
    {"--tempfileControls", true, "kiln writes no temporary files"},
    {"--preview", true, "kiln has no preview features"},
    {"--maxTactics", true, "use --builderOptimizationLevel to bound the tactics timed"},
    {"--tilingOptimizationLevel", true, "kiln has no tiling optimization"},
    {"--l2LimitForTiling", true, "kiln has no tiling optimization"},
    {"--directIO", false, "kiln never reformats at network boundaries"},
    {"--pluginInstanceNorm,--pi", false, "InstanceNormalization is always imported natively"},
    {"--monitorMemory", false, "kiln has no memory monitor"},
    {"--allowWeightStreaming", false, "kiln has no weight streaming"},
    {"--layerDeviceTypes", true, "kiln has no DLA; every layer runs on the chosen backend"},
    {"--decomposableAttentions", true, "attention fusion is decided by the builder"},
    {"--markDebug", true, "kiln has no debug tensors"},
    {"--markUnfusedTensorsAsDebugTensors", false, "kiln has no debug tensors"},
    {"--calibProfile", true, "kiln calibrates with optimization profile 0"},
    {"--minShapesCalib", true, "kiln calibrates with optimization profile 0's shapes"},
    {"--optShapesCalib", true, "kiln calibrates with optimization profile 0's shapes"},
    {"--maxShapesCalib", true, "kiln calibrates with optimization profile 0's shapes"},
    {"--int4", false, "kiln has no INT4 weight-only kernels"},
    {"--explicitBatch", false, "every kiln network has an explicit batch dimension"},
    {"--useDLACore", true, "kiln has no DLA; every layer runs on the chosen backend"},
    {"--allowGPUFallback", false, "kiln has no DLA; every layer runs on the chosen backend"},
    {"--setPluginsToSerialize", true, "a plan records the library of each plugin it uses; load it with --plugins"},
    {"--ignoreParsedPluginLibs", false, "a plan records the library of each plugin it uses"},
    // inference
    {"--exposeDMA", false, "transfers and compute already run one after another on the stream"},
    {"--useSpinWait", false, "kiln waits for the stream with a blocking synchronize"},
    {"--noSpinWait", false, "kiln waits for the stream with a blocking synchronize"},
    {"--sleepTime", true, "inference starts right after the warm-up"},
    {"--idleTime", true, "iterations run back to back"},
    {"--useManagedMemory", false, "kiln uses separate host and device buffers"},
    {"--persistentCacheRatio", true, "kiln does not set a persisting L2 cache limit"},
    {"--allocationStrategy", true, "a context allocates its arena once, for the largest shapes of its profile"},
    {"--weightStreamingBudget", true, "kiln has no weight streaming"},
    {"--asyncFileReader", false, "plans are read with one read"},
    {"--useRuntime", true, "kiln has one runtime"},
    {"--dumpRefit", false, "kiln engines are not refittable: there are no refittable weights to print"},
    {"--timeRefit", false, "kiln engines are not refittable"},
    {"--dumpRawBindingsToFile", false, "use --exportOutput (JSON) for the outputs"},
    {"--saveDebugTensors", true, "kiln has no debug tensors"},
    {"--saveAllDebugTensors", false, "kiln has no debug tensors"},
};

struct Refused {
  const char* flag;
  bool takesValue;
  const char* why;
};

// Flags whose request kiln cannot meet and must not pretend to: the run stops (exit 3).
constexpr Refused kRefused[] = {
    {"--safe", false, "kiln does not build safety-certified engines"},
    {"--consistency", false, "consistency checking applies to safety-certified engines, which kiln does not build"},
    {"--buildDLAStandalone", false, "kiln has no DLA and builds no DLA loadables"},
    {"--dumpKernelText", false, "applies to safety-certified engines, which kiln does not build"},
    {"--safetyPlugins", true, "kiln does not build safety-certified engines"},
    {"--remoteAutoTuningConfig", true, "kiln has no remote auto-tuning"},
    {"--refitFromOnnx", true, "kiln engines are not refittable"},
    {"--cpuOnly", false, "kiln builds GPU engines on the GPU they run on (a CPU engine: --backend=cpu)"},
    {"--loadRefOutputs", true, "kiln does not compare outputs with references (use --exportOutput and compare); ignoring it would pass every check"},
    {"--accuracyAlgorithm", true, "kiln does not compare outputs with references"},
    {"--atol", true, "kiln does not compare outputs with references"},
    {"--rtol", true, "kiln does not compare outputs with references"},
    {"--accuracyThreshold", true, "kiln does not compare outputs with references"},
    {"--refPair", true, "kiln does not compare outputs with references"},
};

const char* kGroup = "trtexec compatibility";

std::string primaryName(const char* names) {
  std::string s(names);
  return s.substr(0, s.find(','));
}

template <typename Entry>
void addAccepted(CLI::App& app, const Entry& e, std::map<std::string, std::vector<std::string>>& seen, const char* prefix) {
  std::string flag = primaryName(e.flag);
  auto record = [&seen, flag](const std::vector<std::string>& values) {
    auto& v = seen[flag];
    v.insert(v.end(), values.begin(), values.end());
    if (values.empty()) v.emplace_back();
  };
  CLI::Option* opt = e.takesValue ? app.add_option_function<std::vector<std::string>>(e.flag, record)
                                  : app.add_flag_function(e.flag, [record](int64_t) { record({}); });
  if (e.takesValue) opt->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  opt->description(std::string(prefix) + e.why)->group(kGroup);
}

}  // namespace

std::vector<char*> stripTrtexecBareFlags(int argc, char** argv, Options& o) {
  std::vector<char*> args;
  bool threads = false;
  for (int i = 0; i < argc; ++i) {
    if (i > 0 && std::string(argv[i]) == "--threads") {
      threads = true;
      continue;
    }
    args.push_back(argv[i]);
  }
  if (threads)
    o.compatWarnings.push_back("--threads (without a value) has no effect: each stream always runs on its own thread "
                               "(--threads=N sets kiln's CPU worker threads)");
  return args;
}

void addTrtexecFlags(CLI::App& app, TrtexecFlags& t, Options& o) {
  app.add_option("--backend", t.backend, "cpu or gpu (default: gpu when available, else cpu); --device=cpu|gpu still works")
      ->check(CLI::IsMember({"cpu", "gpu"}));
  app.add_option("--infStreams", t.infStreams, "trtexec's name for --streams")->check(CLI::Range(1, 64))->group(kGroup);
  app.add_option("--avgTiming", t.avgTiming, "Timed runs per tactic during the build (the fastest is kept)")
      ->check(CLI::Range(1, 1000))->group(kGroup);
  app.add_flag("--best", t.best, "Allow every reduced precision kiln has without data (FP16; INT8 also needs --int8 with --calibData or a Q/DQ model)")->group(kGroup);
  app.add_flag("--separateProfileRun", t.separateProfileRun, "Per-layer profiles always come from a separate run (the default)")
      ->group(kGroup);
  app.add_flag("--includeDataTransfers", t.includeDataTransfers, "Time host<->device copies (the default; --noDataTransfers leaves them out)")
      ->group(kGroup);
  app.add_flag("--noCudaGraph", t.noCudaGraph, "Plain enqueue, no CUDA graph (the default; --useCudaGraph captures one)")->group(kGroup);
  app.add_flag("--buildOnly", t.buildOnly, "Old name of --skipInference")->group(kGroup);
  app.add_flag("--timeDeserialize", t.timeDeserialize, "Load the engine, print the time it took and exit")->group(kGroup);
  app.add_flag("--getPlanVersionOnly", o.getPlanVersionOnly, "Print the kiln version that built --loadEngine's plan and exit")
      ->group(kGroup);
  app.add_flag("--dumpOptimizationProfile", o.dumpOptimizationProfile, "Print each input's min/opt/max shapes per profile")
      ->group(kGroup);
  auto repeatable = [](CLI::Option* opt) {
    opt->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)->group(kGroup);
  };
  repeatable(app.add_option("--staticPlugins", t.staticPlugins, "Same as --plugins"));
  repeatable(app.add_option("--dynamicPlugins", t.dynamicPlugins, "Same as --plugins"));
  for (const NoEffect& e : kNoEffect) addAccepted(app, e, t.noEffect, "Accepted, no effect: ");
  for (const Refused& e : kRefused) addAccepted(app, e, t.refused, "Refused: ");
}

void applyTrtexecFlags(const TrtexecFlags& t, const std::string& device, Options& o) {
  for (const Refused& e : kRefused)
    if (t.refused.count(primaryName(e.flag)))
      throw UnsupportedError(primaryName(e.flag) + " is not supported: " + e.why);
  for (const NoEffect& e : kNoEffect)
    if (t.noEffect.count(primaryName(e.flag))) o.compatWarnings.push_back(primaryName(e.flag) + " has no effect: " + e.why);

  // --device: trtexec's GPU index; cpu|gpu, kiln's first meaning, still selects the backend.
  if (device == "cpu" || device == "gpu") {
    o.device = device;
  } else if (!device.empty()) {
    int n = -1;
    auto [p, ec] = std::from_chars(device.data(), device.data() + device.size(), n);
    if (ec != std::errc() || p != device.data() + device.size() || n < 0 || n > 1023)
      throw UsageError("--device=" + device + ": expected a GPU index (0, 1, ...) or cpu|gpu");
    o.gpuIndex = n;
    o.gpu = n;  // the CUDA device index builds and runs use (BuilderConfig::setDeviceIndex)
  }
  if (!t.backend.empty()) {
    if (o.device && *o.device != t.backend) throw UsageError("--backend=" + t.backend + " conflicts with --device=" + *o.device);
    o.device = t.backend;
  }
  if (t.infStreams) o.streams = t.infStreams;
  if (t.avgTiming) o.avgTiming = t.avgTiming;
  if (t.best) o.fp16 = true;
  if (t.buildOnly) o.skipInference = true;
  if (t.timeDeserialize) {
    if (o.loadEngine.empty()) throw UsageError("--timeDeserialize needs --loadEngine");
    o.skipInference = true;
  }
  if (t.noCudaGraph && o.useCudaGraph) throw UsageError("--noCudaGraph conflicts with --useCudaGraph");
  if (t.includeDataTransfers && o.noDataTransfers) throw UsageError("--includeDataTransfers conflicts with --noDataTransfers");
  for (const auto* list : {&t.staticPlugins, &t.dynamicPlugins}) o.plugins.insert(o.plugins.end(), list->begin(), list->end());
}

std::string addTrtexecLayerInfo(const std::string& kilnLayerInfo, const Engine& engine) {
  using nlohmann::json;
  json doc = json::parse(kilnLayerInfo);
  auto tensors = [](const json& list) {
    json out = json::array();
    for (const json& t : list) {
      if (!t.is_object()) continue;  // an omitted optional input (null in kiln's layer info)
      std::string format = t.value("dtype", "");
      out.push_back({{"Name", t.value("name", "")}, {"Dimensions", t.value("dims", json::array())},
                     {"Format/Datatype", format}});
    }
    return out;
  };
  json layers = json::array();
  for (const json& l : doc.value("layers", json::array()))
    layers.push_back({{"Name", l.value("name", "")},
                      {"LayerType", l.value("op", "")},
                      {"Inputs", tensors(l.value("inputs", json::array()))},
                      {"Outputs", tensors(l.value("outputs", json::array()))},
                      {"TacticName", l.value("tactic", "")},
                      {"Precision", l.value("precision", "")}});
  json bindings = json::array();
  for (int i = 0; i < engine.getNbIOTensors(); ++i) bindings.push_back(engine.getIOTensorName(i));
  doc["Layers"] = std::move(layers);
  doc["Bindings"] = std::move(bindings);
  return doc.dump(1);
}

void printOptimizationProfiles(std::ostream& os, const Engine& engine) {
  for (int p = 0; p < engine.getNbOptimizationProfiles(); ++p) {
    os << "[I] Optimization profile " << p << ":\n";
    for (int i = 0; i < engine.getNbIOTensors(); ++i) {
      std::string name = engine.getIOTensorName(i);
      if (engine.getTensorIOMode(name) != TensorIOMode::kINPUT) continue;
      Dims mn = engine.getProfileShape(name, p, OptProfileSelector::kMIN);
      if (mn.empty()) {
        os << "[I]   " << name << ": static " << toString(engine.getTensorShape(name)) << '\n';
        continue;
      }
      os << "[I]   " << name << ": min " << toString(mn) << ", opt "
         << toString(engine.getProfileShape(name, p, OptProfileSelector::kOPT)) << ", max "
         << toString(engine.getProfileShape(name, p, OptProfileSelector::kMAX)) << '\n';
    }
  }
}

}  // namespace kiln::cli
