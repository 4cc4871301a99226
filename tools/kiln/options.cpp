#include "options.h"

#include <CLI/CLI.hpp>

#include "kiln/version.h"
#include "trtexec_compat.h"
#include <algorithm>
#include <charconv>
#include <iostream>
#include <limits>
#include <set>

namespace kiln::cli {

namespace {

// The largest dimension a shape flag accepts; larger values are certainly typos, and capping
// keeps products of a few dims far from int64 overflow before volume() checks them.
constexpr int64_t kMaxDim = int64_t(1) << 40;

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

//! Splits on `sep` outside single quotes.
std::vector<std::string> splitUnquoted(const std::string& s, char sep) {
  std::vector<std::string> parts(1);
  bool quoted = false;
  int brackets = 0;  // a shape tensor's values: name:[3,4]
  for (char c : s) {
    if (c == '\'') quoted = !quoted;
    if (!quoted && (c == '[' || c == ']')) brackets += c == '[' ? 1 : -1;
    if (c == sep && !quoted && brackets == 0)
      parts.emplace_back();
    else
      parts.back() += c;
  }
  if (quoted) throw UsageError("unbalanced quote in '" + s + "'");
  return parts;
}

//! Splits "name:value" at the last ':' outside quotes; strips the quotes around the name.
std::pair<std::string, std::string> splitNameValue(const std::string& flag, const std::string& item) {
  size_t colon = std::string::npos;
  bool quoted = false;
  for (size_t i = 0; i < item.size(); ++i) {
    if (item[i] == '\'')
      quoted = !quoted;
    else if (item[i] == ':' && !quoted)
      colon = i;
  }
  if (colon == std::string::npos) throw UsageError(flag + ": '" + item + "' is not of the form name:value");
  std::string name = trim(item.substr(0, colon));
  if (name.size() >= 2 && name.front() == '\'' && name.back() == '\'') name = name.substr(1, name.size() - 2);
  if (name.empty()) throw UsageError(flag + ": empty tensor name in '" + item + "'");
  return {name, trim(item.substr(colon + 1))};
}

Dims parseDims(const std::string& flag, const std::string& name, const std::string& text) {
  if (text.empty()) throw UsageError(flag + ": no dimensions given for '" + name + "'");
  Dims dims;
  for (const std::string& part : splitUnquoted(text, 'x')) {
    int64_t v = -1;
    const char* end = part.data() + part.size();
    auto [ptr, ec] = std::from_chars(part.data(), end, v);
    if (part.empty() || ec != std::errc() || ptr != end || v < 0 || v > kMaxDim)
      throw UsageError(flag + ": bad dimension '" + part + "' for '" + name + "' in '" + text +
                       "' (expected non-negative integers separated by 'x', each at most 2^40)");
    dims.push_back(v);
  }
  return dims;
}

}  // namespace

//! Moves the "name:[v1,v2,...]" entries of --shapes (a shape tensor's values) into `values`;
//! returns the specs without them.
std::vector<std::string> takeShapeValues(const std::vector<std::string>& specs,
                                         std::map<std::string, std::vector<int64_t>>& values) {
  std::vector<std::string> rest;
  for (const std::string& spec : specs) {
    std::string kept;
    for (const std::string& item : splitUnquoted(spec, ',')) {
      const std::string t = trim(item);
      if (t.empty() || t.back() != ']') {
        kept += (kept.empty() ? "" : ",") + item;
        continue;
      }
      auto [name, text] = splitNameValue("--shapes", t);
      if (text.size() < 2 || text.front() != '[')
        throw UsageError("--shapes: '" + t + "': values of a shape tensor are written name:[v1,v2,...]");
      std::vector<int64_t> v;
      const std::string inner = text.substr(1, text.size() - 2);
      for (const std::string& raw : inner.empty() ? std::vector<std::string>{} : splitUnquoted(inner, ',')) {
        const std::string part = trim(raw);
        int64_t x = 0;
        const char* end = part.data() + part.size();
        auto [ptr, ec] = std::from_chars(part.data(), end, x);
        if (part.empty() || ec != std::errc() || ptr != end || x < -kMaxDim || x > kMaxDim)
          throw UsageError("--shapes: bad value '" + part + "' for shape tensor '" + name + "' (integers of magnitude at most 2^40)");
        v.push_back(x);
      }
      if (!values.emplace(name, v).second) throw UsageError("--shapes: input '" + name + "' is given twice");
    }
    if (!kept.empty()) rest.push_back(kept);
  }
  return rest;
}

ShapeMap parseShapeSpec(const std::string& flag, const std::string& spec) {
  ShapeMap out;
  for (const std::string& item : splitUnquoted(spec, ',')) {
    if (trim(item).empty()) throw UsageError(flag + ": empty entry in '" + spec + "'");
    auto [name, value] = splitNameValue(flag, item);
    if (!out.emplace(name, parseDims(flag, name, value)).second)
      throw UsageError(flag + ": input '" + name + "' is given twice");
  }
  return out;
}

std::map<std::string, std::string> parseInputSpec(const std::string& spec) {
  std::map<std::string, std::string> out;
  for (const std::string& item : splitUnquoted(spec, ',')) {
    if (trim(item).empty()) throw UsageError("--loadInputs: empty entry in '" + spec + "'");
    auto [name, file] = splitNameValue("--loadInputs", item);
    if (file.empty()) throw UsageError("--loadInputs: no file given for '" + name + "'");
    if (!out.emplace(name, file).second) throw UsageError("--loadInputs: input '" + name + "' is given twice");
  }
  return out;
}

std::map<std::string, DataType> parseLayerPrecisions(const std::string& spec, const std::string& flag) {
  std::map<std::string, DataType> out;
  for (const std::string& item : splitUnquoted(spec, ',')) {
    if (trim(item).empty()) throw UsageError(flag + ": empty entry in '" + spec + "'");
    auto [name, type] = splitNameValue(flag, item);
    DataType t;
    if (type == "fp32") t = DataType::kFLOAT;
    else if (type == "fp16") t = DataType::kHALF;
    else if (type == "bf16") t = DataType::kBF16;
    else if (type == "int8") t = DataType::kINT8;
    else throw UsageError(flag + ": '" + type + "' for '" + name + "' is not fp32, fp16, bf16 or int8");
    if (!out.emplace(name, t).second) throw UsageError(flag + ": layer '" + name + "' is given twice");
  }
  return out;
}

// trtexec's sizes: a number of MiB, or with a unit suffix K, M or G (binary); decimals allowed.
size_t parsePoolSize(const std::string& flag, const std::string& text) {
  std::string t = trim(text);
  double scale = 1 << 20;
  if (!t.empty() && (t.back() == 'K' || t.back() == 'M' || t.back() == 'G')) {
    scale = t.back() == 'K' ? 1 << 10 : t.back() == 'M' ? 1 << 20 : double(1 << 30);
    t.pop_back();
  }
  double v = 0;
  const char* end = t.data() + t.size();
  auto [ptr, ec] = std::from_chars(t.data(), end, v);
  if (t.empty() || ec != std::errc() || ptr != end || !(v >= 0) || v * scale > 1e18)
    throw UsageError(flag + ": '" + text + "' is not a size (MiB, or a number with K, M or G)");
  return static_cast<size_t>(v * scale);
}

// --memPoolSize=workspace:64M,dlaSRAM:1 (trtexec): kiln has the workspace pool only.
size_t parseWorkspaceLimit(const std::string& spec) {
  size_t limit = 0;
  for (const std::string& item : splitUnquoted(spec, ',')) {
    if (trim(item).empty()) throw UsageError("--memPoolSize: empty entry in '" + spec + "'");
    auto [pool, size] = splitNameValue("--memPoolSize", item);
    const size_t bytes = parsePoolSize("--memPoolSize", size);
    if (pool == "workspace") limit = bytes;
    else if (pool == "dlaSRAM" || pool == "dlaLocalDRAM" || pool == "dlaGlobalDRAM" || pool == "tacticSharedMem")
      std::cerr << "[W] --memPoolSize: the " << pool << " pool has no effect (kiln has no DLA and sizes shared memory per kernel)\n";
    else
      throw UsageError("--memPoolSize: unknown pool '" + pool + "' (workspace, dlaSRAM, dlaLocalDRAM, dlaGlobalDRAM, tacticSharedMem)");
  }
  return limit;
}

std::vector<double> parsePercentiles(const std::string& spec) {
  std::vector<double> out;
  for (const std::string& raw : splitUnquoted(spec, ',')) {
    std::string part = trim(raw);
    double v = 0;
    const char* end = part.data() + part.size();
    auto [ptr, ec] = std::from_chars(part.data(), end, v);
    if (part.empty() || ec != std::errc() || ptr != end || !(v >= 0.0 && v <= 100.0))
      throw UsageError("--percentile: '" + part + "' is not a number in [0, 100]");
    out.push_back(v);
  }
  return out;
}

namespace {

//! Merges repeated occurrences of a shape flag into one map (an input may appear once).
ShapeMap mergeShapeFlags(const std::string& flag, const std::vector<std::string>& specs) {
  ShapeMap all;
  for (const auto& s : specs)
    for (auto& [name, dims] : parseShapeSpec(flag, s))
      if (!all.emplace(name, dims).second) throw UsageError(flag + ": input '" + name + "' is given twice");
  return all;
}

// One ShapeMap per optimization profile: occurrences merge (one input per flag is fine) until an
// occurrence names an input the current profile already has, which starts the next profile (as
// trtexec's repeated --minShapes/--optShapes/--maxShapes).
std::vector<ShapeMap> groupProfileFlags(const std::string& flag, const std::vector<std::string>& specs) {
  std::vector<ShapeMap> profiles;
  for (const auto& s : specs) {
    ShapeMap one = parseShapeSpec(flag, s);
    bool repeats = profiles.empty();
    for (auto& [name, _] : one) repeats = repeats || profiles.back().count(name);
    if (repeats) profiles.emplace_back();
    for (auto& [name, dims] : one) profiles.back().emplace(name, dims);
  }
  return profiles;
}

// Every shape flag that is given must give every profile (one that is absent takes the defaults).
void checkProfileCounts(const Options& o) {
  size_t n = std::max({o.minShapes.size(), o.optShapes.size(), o.maxShapes.size()});
  const std::pair<const char*, size_t> flags[] = {
      {"--minShapes", o.minShapes.size()}, {"--optShapes", o.optShapes.size()}, {"--maxShapes", o.maxShapes.size()}};
  for (auto& [flag, count] : flags)
    if (count != 0 && count != n)
      throw UsageError(std::string(flag) + " gives " + std::to_string(count) + " optimization profile(s) but another shape flag gives " +
                       std::to_string(n) + "; give each of --minShapes/--optShapes/--maxShapes once per profile");
  for (size_t p = 1; p < n; ++p) {
    std::set<std::string> first, here;
    for (const auto* m : {&o.minShapes, &o.optShapes, &o.maxShapes})
      if (!m->empty()) {
        for (auto& [name, _] : (*m)[0]) first.insert(name);
        for (auto& [name, _] : (*m)[p]) here.insert(name);
      }
    if (first != here)
      throw UsageError("optimization profile " + std::to_string(p) + " names other inputs than profile 0; every profile gives the same inputs");
  }
}

void checkConsistency(const Options& o) {
  if (o.listPlugins) return;  // needs no model
  if (o.getPlanVersionOnly && (o.loadEngine.empty() || !o.onnx.empty()))
    throw UsageError("--getPlanVersionOnly needs --loadEngine (and no --onnx)");
  if (o.onnx.empty() == o.loadEngine.empty())
    throw UsageError(o.onnx.empty() ? "give a model with --onnx=<file> or an engine with --loadEngine=<file>"
                                    : "--onnx and --loadEngine are mutually exclusive");
  if (!o.loadEngine.empty() && (!o.minShapes.empty() || !o.optShapes.empty() || !o.maxShapes.empty()))
    throw UsageError(
        "--minShapes/--optShapes/--maxShapes build optimization profiles and need --onnx; "
        "use --shapes to pick runtime shapes of a loaded engine");
  const size_t built = std::max({size_t(1), o.minShapes.size(), o.optShapes.size(), o.maxShapes.size()});
  if (!o.onnx.empty() && static_cast<size_t>(o.useProfile) >= built)
    throw UsageError("--useProfile=" + std::to_string(o.useProfile) + ": the shape flags build " + std::to_string(built) +
                     " optimization profile(s)");
  if (o.fp16 && o.stronglyTyped)
    throw UsageError("--fp16 conflicts with --stronglyTyped (types come from the network)");
  if (o.bf16 && o.stronglyTyped)
    throw UsageError("--bf16 conflicts with --stronglyTyped (types come from the network)");
  if (o.int8 && o.stronglyTyped)
    throw UsageError("--int8 conflicts with --stronglyTyped (types come from the network)");
  if (o.fp8 && o.stronglyTyped)
    throw UsageError("--fp8 conflicts with --stronglyTyped (types come from the network)");
  for (const auto* flagged : {&o.layerPrecisions, &o.layerOutputTypes})
    for (const auto& [name, t] : *flagged)
      if (t == DataType::kINT8 && !o.int8)
        throw UsageError(std::string(flagged == &o.layerPrecisions ? "--layerPrecisions" : "--layerOutputTypes") + ": '" + name +
                         ":int8' needs --int8");
  if (!o.calibData.empty() && !o.int8 && !o.fp8)
    throw UsageError("--calibData needs --int8 or --fp8 (calibration data is for implicit quantization)");
  if (!o.calibCache.empty() && !o.int8 && !o.fp8)
    throw UsageError("--calib needs --int8 or --fp8 (a calibration cache is for implicit quantization)");
  if ((!o.calibData.empty() || !o.calibCache.empty()) && o.onnx.empty())
    throw UsageError("--calibData / --calib apply when building (--onnx); a loaded engine keeps its scales");
  if (!o.compareWith.empty() && o.compareWith != "fp32") throw UsageError("--compareWith: only 'fp32' is supported, got '" + o.compareWith + "'");
  if (!o.compareWith.empty() && o.onnx.empty()) throw UsageError("--compareWith=fp32 builds both engines from the model: it needs --onnx");
}

}  // namespace

ParseOutcome parseOptions(int argc, char** argv, Options& o) {
  CLI::App app{"kiln: build, save, load and benchmark inference engines (trtexec-compatible flags)", "kiln"};
  app.get_formatter()->column_width(40);
  std::vector<std::string> shapes, minShapes, optShapes, maxShapes, loadInputs;
  std::string percentile;
  std::string memPoolSize, workspaceMiB;
  std::string device;

  auto repeatable = [](CLI::Option* opt) {
    return opt->allow_extra_args(false)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  };

  app.add_option("--onnx", o.onnx, "ONNX model to build an engine from");
  app.add_option("--saveEngine", o.saveEngine, "Write the built engine (plan) to this file");
  app.add_option("--loadEngine", o.loadEngine, "Load a saved engine instead of building one");
  repeatable(app.add_option("--shapes", shapes, "Runtime shapes of dynamic inputs: name:1x3x224x224[,name2:...]"));
  repeatable(app.add_option("--minShapes", minShapes,
                            "Optimization profile minimum shapes (same syntax). Repeat min/opt/max to add a profile: "
                            "a flag naming an input again starts the next profile"));
  repeatable(app.add_option("--optShapes", optShapes, "Optimization profile optimal shapes (same syntax)"));
  repeatable(app.add_option("--maxShapes", maxShapes, "Optimization profile maximum shapes (same syntax)"));
  app.add_option("--useProfile", o.useProfile, "Optimization profile the inference contexts use (default 0)")
      ->check(CLI::Range(0, 4095));
  repeatable(app.add_option("--loadInputs", loadInputs,
                            "Input data: name:file[,name2:file2] (.npy, ONNX TensorProto .pb, or raw bytes). "
                            "Other inputs are random with a fixed seed: floats in [-1,1], integers in [0,10), "
                            "bools 0/1; integer/bool inputs whose name contains 'mask' are all ones"));
  app.add_option("--exportOutput", o.exportOutput,
                 "Write the outputs as JSON, trtexec's layout: [{name,dimensions,values}] (kiln adds dims and dtype)");
  app.add_flag("--dumpOutput", o.dumpOutput, "Print the outputs (first values) after inference");
  app.add_option("--iterations", o.iterations, "Run at least N timed inferences (default 10)")
      ->check(CLI::Range(1, 1 << 30));
  app.add_option("--warmUp", o.warmUpMs, "Warm up for this many ms before timing (default 200)")
      ->check(CLI::Range(0.0, 3.6e6));
  app.add_option("--duration", o.durationS, "Run timed inferences for at least this many s (default 3)")
      ->check(CLI::Range(0.0, 86400.0));
  app.add_option("--avgRuns", o.avgRuns, "Average N consecutive runs per reported sample (default 10)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--percentile", percentile, "Latency percentiles to report, e.g. 90,95,99 (default)");
  app.add_option("--streams", o.streams, "Run N inference streams (execution contexts) concurrently (default 1)")
      ->check(CLI::Range(1, 64));
  app.add_flag("--skipInference", o.skipInference, "Build (and save) the engine without running it");
  app.add_flag("--noDataTransfers", o.noDataTransfers, "Leave host<->device copies out of the timing loop");
  app.add_flag("--useCudaGraph", o.useCudaGraph, "Capture one enqueue in a CUDA graph and replay it (GPU; falls back with a warning)");
  app.add_flag("--poisonFreedMemory", o.poisonFreedMemory,
               "Debugging aid: overwrite activation memory after its last planned use (a planner bug then shows as NaN)");
  app.add_flag("--dumpProfile", o.dumpProfile, "Print per-layer times (a separate profiling run after timing)");
  app.add_option("--exportProfile", o.exportProfile, "Write per-layer times as JSON");
  app.add_option("--exportTimes", o.exportTimes, "Write per-iteration times as JSON");
  app.add_flag("--dumpLayerInfo", o.dumpLayerInfo, "Print the engine's layer information");
  app.add_option("--exportLayerInfo", o.exportLayerInfo, "Write the engine's layer information as JSON");
  app.add_option("--device", device, "GPU index N (as trtexec; default 0), or cpu|gpu (same as --backend)");
  app.add_option("--gpu", o.gpu, "CUDA device index to build and run on (default 0)")->check(CLI::Range(0, 1023));
  app.add_option("--memPoolSize", memPoolSize,
                 "Memory pool limits, trtexec's form: workspace:N (MiB, or N with K, M, G); tactics needing more workspace are not chosen");
  app.add_option("--workspace", workspaceMiB, "Workspace limit in MiB (trtexec's older form of --memPoolSize=workspace:N)");
  app.add_option("--disableTactics", o.disableTactics,
                 "Build: tactics not offered: names starting with, or holding as whole words, one of these (comma-separated; e.g. onednn,avx2)")
      ->delimiter(',');
  app.add_option("--skipPasses", o.skipPasses,
                 "Build (debugging aid): skip builder passes whose name contains one of these words (comma-separated)")
      ->delimiter(',');
  app.add_flag("--noChannelsLast", o.noChannelsLast, "Build (GPU): keep float16/bfloat16 conv/pool chains NCHW");
  app.add_option("--channelsLastMinBatch", o.channelsLastMinBatch,
                 "Build (GPU): smallest batch (at the opt shape) whose float16/bfloat16 conv/pool chains go channels-last (default 1: every batch)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  app.add_flag("--gpuFusions", o.gpuFusions,
               "Build (testing aid): the GPU-only fusions (attention, skip LayerNorm) also on the CPU, on reference kernels");
  app.add_option("--threads", o.threads, "CPU worker threads (0 = all hardware threads)")->check(CLI::Range(0, 4096));
  app.add_flag("--fp16", o.fp16, "Allow FP16 kernels (the CPU warns and builds FP32)");
  app.add_flag("--bf16", o.bf16, "Allow BF16 kernels (the CPU warns and builds FP32)");
  app.add_flag("--int8", o.int8,
               "Allow INT8: Q/DQ models run their integer layers; with --calibData or --calib, Conv/MatMul/Gemm are "
               "quantized from calibration (implicit INT8)");
  app.add_flag("--fp8", o.fp8,
               "Allow FP8 (E4M3, compute capability 8.9+ on the GPU): a model's float8e4m3fn Q/DQ MatMul/Gemm run as FP8 GEMMs "
               "anyway; with --calibData or --calib, MatMul/Gemm with constant weights are quantized to FP8 from calibration "
               "(per-tensor scales; Conv goes INT8 with --int8)");
  app.add_flag("--noTF32", o.noTF32, "Disallow TF32 for FP32 matmul/conv");
  app.add_flag("--stronglyTyped", o.stronglyTyped, "Keep exactly the types the network states");
  app.add_option("--builderOptimizationLevel", o.builderOptimizationLevel,
                 "0..5: search breadth; level L times the first 2^L tactics per layer (default 3; 0: no timing)")
      ->check(CLI::Range(0, 5));
  app.add_option("--tacticShapePoints", o.tacticShapePoints,
                 "dynamic profiles: time tactics at 1 (opt only), 3 (min, opt, max; default) or 5 shapes; a layer "
                 "whose best tactic differs across them gets one per size range")
      ->check(CLI::IsMember({1, 3, 5}));
  app.add_option("--precisionConstraints", o.precisionConstraints,
                 "none (default): --fp16/--bf16 decide every layer; obey: honour --layerPrecisions/--layerOutputTypes or fail "
                 "naming the layer; prefer: honour them where a kernel exists, else warn naming the layer")
      ->check(CLI::IsMember({"none", "prefer", "obey"}));
  std::vector<std::string> layerPrecisions;
  repeatable(app.add_option("--layerPrecisions", layerPrecisions,
                            "Compute precision per layer: name:fp32|fp16|bf16|int8[,name2:...]; '*' wildcards ('*': every "
                            "layer, 'block1*': names starting so; an exact name wins, then the longest pattern; int8 needs --int8; "
                            "needs --precisionConstraints=prefer or obey)"));
  std::vector<std::string> layerOutputTypes;
  repeatable(app.add_option("--layerOutputTypes", layerOutputTypes,
                            "Type of each layer's output: name:fp32|fp16|bf16|int8[,...], names as --layerPrecisions "
                            "(needs --precisionConstraints=prefer or obey)"));
  app.add_option("--calibData", o.calibData,
                 "INT8 calibration (with --int8): a directory of input batches, <input>.npy or <input>.<k>.npy (or .pb) per "
                 "network input and batch k");
  app.add_option("--calib", o.calibCache,
                 "INT8 calibration cache (with --int8): used instead of calibrating when the file exists, written after a calibration");
  app.add_option("--calibAlgo", o.calibAlgo, "INT8 calibration algorithm: entropy (default; TensorRT's KL), minmax, percentile")
      ->check(CLI::IsMember({"entropy", "minmax", "percentile"}));
  app.add_option("--calibPercentile", o.calibPercentile, "Percentile of --calibAlgo=percentile (default 99.99)")
      ->check(CLI::Range(1e-9, 100.0));
  app.add_option("--compareWith", o.compareWith,
                 "fp32: also build a float32 engine, run both on the same inputs and compare the tensors that feed each "
                 "Conv/MatMul/Gemm and the outputs; fails naming the first layer beyond --compareTolerance");
  app.add_option("--compareTolerance", o.compareTolerance,
                 "--compareWith: largest max|a-b| / max|fp32| a tensor may have (default 0.1)")
      ->check(CLI::Range(0.0, 1e30));
  app.add_option("--timingCacheFile", o.timingCacheFile,
                 "Tactic timings: read from this file (if it exists) and saved back after the build, so a rebuild "
                 "skips timing what it has timed before");
  app.add_option("--maxAuxStreams", o.maxAuxStreams, "Auxiliary streams the engine may use (GPU only)")
      ->check(CLI::Range(0, 64));
  repeatable(app.add_option("--plugins", o.plugins,
                            "Load a plugin library (repeatable); it registers its plugin creators"));
  app.add_flag("--listPlugins", o.listPlugins, "List the registered plugins (after --plugins) and exit");
  app.add_flag("--enablePluginOverride", o.enablePluginOverride,
               "Import a node as a registered plugin even when kiln supports its op natively");
  app.add_flag("--verbose,-v", o.verbose, "Print verbose messages");

  TrtexecFlags trtexec;
  addTrtexecFlags(app, trtexec, o);
  app.set_version_flag("--version", std::string("kiln ") + KILN_VERSION_STRING);
  std::vector<char*> args = stripTrtexecBareFlags(argc, argv, o);

  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return ParseOutcome::kExitSuccess;
  } catch (const CLI::CallForVersion&) {
    std::cout << "kiln " << KILN_VERSION_STRING << '\n';
    return ParseOutcome::kExitSuccess;
  } catch (const CLI::ParseError& e) {
    throw UsageError(std::string(e.what()) + " (run with --help for the list of flags)");
  }

  o.shapes = mergeShapeFlags("--shapes", takeShapeValues(shapes, o.shapeValues));
  for (const auto& [name, v] : o.shapeValues)
    if (o.shapes.count(name)) throw UsageError("--shapes: input '" + name + "' is given twice");
  o.minShapes = groupProfileFlags("--minShapes", minShapes);
  o.optShapes = groupProfileFlags("--optShapes", optShapes);
  o.maxShapes = groupProfileFlags("--maxShapes", maxShapes);
  checkProfileCounts(o);
  for (const auto& spec : loadInputs)
    for (auto& [name, file] : parseInputSpec(spec))
      if (!o.loadInputs.emplace(name, file).second)
        throw UsageError("--loadInputs: input '" + name + "' is given twice");
  if (!percentile.empty()) o.percentiles = parsePercentiles(percentile);
  if (!workspaceMiB.empty()) o.workspaceLimit = parsePoolSize("--workspace", workspaceMiB);
  if (!memPoolSize.empty()) o.workspaceLimit = parseWorkspaceLimit(memPoolSize);
  for (const auto& spec : layerPrecisions)
    for (auto& [name, t] : parseLayerPrecisions(spec))
      if (!o.layerPrecisions.emplace(name, t).second) throw UsageError("--layerPrecisions: layer '" + name + "' is given twice");
  if (!o.layerPrecisions.empty() && o.precisionConstraints == "none")
    throw UsageError("--layerPrecisions needs --precisionConstraints=prefer or obey (as trtexec)");
  for (const auto& spec : layerOutputTypes)
    for (auto& [name, t] : parseLayerPrecisions(spec, "--layerOutputTypes"))
      if (!o.layerOutputTypes.emplace(name, t).second) throw UsageError("--layerOutputTypes: layer '" + name + "' is given twice");
  if (!o.layerOutputTypes.empty() && o.precisionConstraints == "none")
    throw UsageError("--layerOutputTypes needs --precisionConstraints=prefer or obey (as trtexec)");
  applyTrtexecFlags(trtexec, device, o);
  checkConsistency(o);
  return ParseOutcome::kRun;
}

}  // namespace kiln::cli
