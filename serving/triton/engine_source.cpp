#include "engine_source.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "kiln/network.h"
#include "kiln/onnx_parser.h"
#include "kiln/runtime.h"
#include "triton_util.h"

namespace kiln::triton {
namespace fs = std::filesystem;

std::string findModelFile(const std::string& versionDir, const std::string& defaultName) {
  std::vector<std::string> candidates;
  if (!defaultName.empty()) candidates = {defaultName};
  else candidates = {"model.plan", "model.onnx"};
  for (const std::string& c : candidates) {
    const fs::path p = fs::path(versionDir) / c;
    if (fs::is_regular_file(p)) return p.string();
  }
  std::string tried;
  for (const std::string& c : candidates) tried += (tried.empty() ? "" : " or ") + c;
  throw TritonError(TRITONSERVER_ERROR_NOT_FOUND, "no model file in '" + versionDir + "' (looked for " + tried + ")");
}

bool isOnnxFile(const std::string& path) { return fs::path(path).extension() == ".onnx"; }

std::vector<uint8_t> readFileBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw TritonError(TRITONSERVER_ERROR_NOT_FOUND, "cannot open '" + path + "'");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) throw TritonError(TRITONSERVER_ERROR_INTERNAL, "cannot read '" + path + "'");
  return bytes;
}

namespace {

// One profile covering every dynamic input of `net`.
OptimizationProfile makeProfile(const Network& net, const BackendParameters& p, int64_t maxBatchSize) {
  OptimizationProfile profile;
  const std::map<std::string, Dims>* given[3] = {&p.minShapes, &p.optShapes, &p.maxShapes};
  const OptProfileSelector sel[3] = {OptProfileSelector::kMIN, OptProfileSelector::kOPT, OptProfileSelector::kMAX};
  const char* keys[3] = {"min_shapes", "opt_shapes", "max_shapes"};
  for (int k = 0; k < 3; ++k)
    for (const auto& [name, dims] : *given[k]) {
      bool known = false;
      for (const Tensor* t : net.inputs()) known |= t->name == name;
      if (!known) throw TritonError(TRITONSERVER_ERROR_INVALID_ARG, std::string("parameters '") + keys[k] +
                                                                        "' names '" + name + "', which is not a model input");
    }
  for (const Tensor* t : net.inputs()) {
    if (isStatic(t->dims)) continue;
    const bool hasAll = p.minShapes.count(t->name) && p.optShapes.count(t->name) && p.maxShapes.count(t->name);
    if (hasAll) {
      for (int k = 0; k < 3; ++k) profile.setDimensions(t->name, sel[k], given[k]->at(t->name));
      continue;
    }
    bool onlyBatchDynamic = !t->dims.empty() && t->dims[0] < 0;
    for (size_t i = 1; i < t->dims.size(); ++i) onlyBatchDynamic &= t->dims[i] >= 0;
    if (!onlyBatchDynamic || maxBatchSize <= 0)
      throw TritonError(TRITONSERVER_ERROR_INVALID_ARG,
                        "input '" + t->name + "' of the ONNX model has dynamic dims " + toString(t->dims) +
                            ": give its ranges in parameters min_shapes, opt_shapes and max_shapes"
                            " (or max_batch_size when only the first dim is dynamic)");
    Dims lo = t->dims, hi = t->dims;
    lo[0] = 1;
    hi[0] = maxBatchSize;
    profile.setDimensions(t->name, OptProfileSelector::kMIN, lo);
    profile.setDimensions(t->name, OptProfileSelector::kOPT, hi);
    profile.setDimensions(t->name, OptProfileSelector::kMAX, hi);
  }
  return profile;
}

}  // namespace

std::vector<uint8_t> buildPlanFromOnnx(const std::string& onnxPath, DeviceType device, int deviceIndex,
                                       const BackendParameters& params, int64_t maxBatchSize,
                                       const std::string& modelDir) {
  Network net;
  parseOnnxFile(onnxPath, net, tritonLogger());
  BuilderConfig cfg;
  cfg.setDevice(device);
  cfg.setDeviceIndex(device == DeviceType::kGPU ? deviceIndex : 0);
  if (params.precision == "fp16") cfg.setFlag(BuilderFlag::kFP16);
  if (params.precision == "bf16") cfg.setFlag(BuilderFlag::kBF16);
  cfg.setFlag(BuilderFlag::kTF32, params.tf32);
  if (params.optimizationLevel >= 0) cfg.setBuilderOptimizationLevel(params.optimizationLevel);
  if (params.threads >= 0) cfg.setThreads(params.threads);
  if (params.maxAuxStreams >= 0) cfg.setMaxAuxStreams(params.maxAuxStreams);
  bool dynamic = false;
  for (const Tensor* t : net.inputs()) dynamic |= !isStatic(t->dims);
  if (dynamic) cfg.addOptimizationProfile(makeProfile(net, params, maxBatchSize));

  TimingCache cache;
  std::string cachePath;
  if (!params.timingCacheFile.empty()) {
    fs::path p(params.timingCacheFile);
    cachePath = (p.is_absolute() ? p : fs::path(modelDir) / p).string();
    cache = TimingCache::load(cachePath);
    cfg.setTimingCache(&cache);
  }
  const uint64_t start = nowNs();
  std::unique_ptr<Engine> engine = Builder(tritonLogger()).build(net, cfg);
  logInfo("built '" + onnxPath + "' for " + toString(device) +
          (device == DeviceType::kGPU ? " " + std::to_string(deviceIndex) : std::string()) + " in " +
          std::to_string((nowNs() - start) / 1000000) + " ms");
  if (!cachePath.empty()) cache.save(cachePath);
  return engine->serialize();
}

}  // namespace kiln::triton
