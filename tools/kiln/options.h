// Command-line options of the kiln CLI (trtexec's flag names and semantics).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/types.h"

namespace kiln::cli {

//! Input name -> dims, as given by --shapes / --minShapes / --optShapes / --maxShapes.
using ShapeMap = std::map<std::string, Dims>;

struct Options {
  // Model / engine files.
  std::string onnx;
  std::string saveEngine;
  std::string loadEngine;

  // Shapes.
  ShapeMap shapes;  //!< runtime shapes
  //! --shapes=name:[v1,v2,...]: the values of an input that determines shapes (a "shape tensor",
  //! e.g. an Expand's target shape as a graph input), used when --loadInputs gives none.
  std::map<std::string, std::vector<int64_t>> shapeValues;
  //! One map per optimization profile (empty: no flag given); all given flags have the same count.
  std::vector<ShapeMap> minShapes, optShapes, maxShapes;
  int useProfile = 0;  //!< the profile inference contexts run with

  // Inputs / outputs.
  std::map<std::string, std::string> loadInputs;  //!< input name -> file (.npy, .pb or raw)
  std::string exportOutput;
  bool dumpOutput = false;

  // Timing loop.
  int iterations = 10;
  double warmUpMs = 200.0;
  double durationS = 3.0;
  int avgRuns = 10;
  std::vector<double> percentiles = {90.0, 95.0, 99.0};
  int streams = 1;
  bool skipInference = false;
  bool noDataTransfers = false;
  bool useCudaGraph = false;

  // Reporting.
  bool dumpProfile = false;
  bool poisonFreedMemory = false;
  size_t workspaceLimit = 0;  //!< --memPoolSize=workspace:N / --workspace=N (bytes; 0: none)
  std::string exportProfile;
  std::string exportTimes;
  bool dumpLayerInfo = false;
  std::string exportLayerInfo;
  bool verbose = false;

  // Build.
  std::optional<std::string> device;  //!< backend, "cpu" or "gpu" (--backend; --device=cpu|gpu); unset: gpu when available
  std::optional<int> threads;         //!< unset: build with all hardware threads; a plan keeps its own
  bool fp16 = false, bf16 = false, int8 = false, fp8 = false, noTF32 = false, stronglyTyped = false;
  std::optional<int> builderOptimizationLevel;
  std::optional<int> tacticShapePoints;  //!< shapes of a dynamic profile tactics are timed at (1, 3 or 5)
  std::optional<int> maxAuxStreams;
  std::string timingCacheFile;  //!< read (when it exists) and updated by the build
  std::string precisionConstraints = "none";        //!< none | prefer | obey
  std::map<std::string, DataType> layerPrecisions;  //!< layer name or '*' pattern -> compute type
  std::map<std::string, DataType> layerOutputTypes; //!< layer name or '*' pattern -> output 0's type

  // Implicit INT8 (calib_data.cpp).
  std::string calibData;                  //!< directory of calibration batches: <input>.npy / <input>.<k>.npy (or .pb)
  std::string calibCache;                 //!< --calib: read when it exists (instead of calibrating), written after
  std::string calibAlgo = "entropy";      //!< entropy | minmax | percentile
  double calibPercentile = 99.99;

  // Accuracy check (compare.cpp).
  std::string compareWith;                //!< "fp32": build a float32 engine too and compare tensors layer by layer
  double compareTolerance = 0.1;          //!< a tensor whose max |a - b| / max |b| exceeds it fails the run
  int gpu = 0;                                      //!< CUDA device index (--gpu)
  std::vector<std::string> disableTactics;          //!< tactic name patterns not offered (tactic_filter.h)
  std::vector<std::string> skipPasses;              //!< words: builder passes whose name has one are skipped
  bool noChannelsLast = false;                      //!< GPU: keep conv/pool chains NCHW
  std::optional<int64_t> channelsLastMinBatch;       //!< GPU: smallest batch that goes channels-last
  bool gpuFusions = false;                          //!< testing aid: GPU-only fusions in a CPU build

  // Plugins.
  std::vector<std::string> plugins;  //!< plugin libraries to load (--plugins, repeatable)
  bool listPlugins = false;
  bool enablePluginOverride = false;

  // trtexec compatibility (trtexec_compat.cpp).
  std::optional<int> gpuIndex;              //!< --device=N: the GPU to run on
  std::vector<std::string> compatWarnings;  //!< one per accepted trtexec flag that has no effect
  std::optional<int> avgTiming;             //!< --avgTiming: timed runs per tactic
  bool getPlanVersionOnly = false;          //!< print the version that built --loadEngine's plan
  bool dumpOptimizationProfile = false;
};

//! What parseOptions decided.
enum class ParseOutcome { kRun, kExitSuccess };

//! Parses argv into `opts`. Prints --help and returns kExitSuccess when asked to; throws
//! UsageError on any bad flag or value.
ParseOutcome parseOptions(int argc, char** argv, Options& opts);

//! A command-line mistake (exit status 2).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& m) : Error(m) {}
};

//! Parses "name:1x3x224x224,name2:4" (a name may be quoted with single quotes when it contains
//! ':' or ','). `flag` names the option in error messages. Throws UsageError.
ShapeMap parseShapeSpec(const std::string& flag, const std::string& spec);
//! Parses "name:file,name2:file2" for --loadInputs. Throws UsageError.
std::map<std::string, std::string> parseInputSpec(const std::string& spec);
//! Parses "name:fp32,name2:fp16,block*:int8" for --layerPrecisions / --layerOutputTypes (`flag`;
//! a name may be quoted). Throws UsageError.
std::map<std::string, DataType> parseLayerPrecisions(const std::string& spec, const std::string& flag = "--layerPrecisions");
//! Parses "90,95,99" (each in [0, 100]). Throws UsageError.
std::vector<double> parsePercentiles(const std::string& spec);

}  // namespace kiln::cli
