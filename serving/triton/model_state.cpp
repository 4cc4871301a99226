#include "model_state.h"

#include <filesystem>

#include "engine_source.h"
#include "kiln/runtime.h"
#include "triton_util.h"

namespace kiln::triton {
namespace {

nlohmann::json readConfigJson(TRITONBACKEND_Model* model) {
  TRITONSERVER_Message* message = nullptr;
  check(TRITONBACKEND_ModelConfig(model, 1, &message), "reading the model configuration");
  const char* base = nullptr;
  size_t size = 0;
  TRITONSERVER_Error* err = TRITONSERVER_MessageSerializeToJson(message, &base, &size);
  nlohmann::json config;
  if (!err) config = nlohmann::json::parse(base, base + size, nullptr, false);
  TRITONSERVER_MessageDelete(message);
  check(err, "serializing the model configuration");
  if (config.is_discarded()) throw TritonError(TRITONSERVER_ERROR_INTERNAL, "the model configuration is not valid JSON");
  return config;
}

void setConfigJson(TRITONBACKEND_Model* model, const nlohmann::json& config) {
  const std::string text = config.dump();
  TRITONSERVER_Message* message = nullptr;
  check(TRITONSERVER_MessageNewFromSerializedJson(&message, text.data(), text.size()), "encoding the completed configuration");
  TRITONSERVER_Error* err = TRITONBACKEND_ModelSetConfig(model, 1, message);
  TRITONSERVER_MessageDelete(message);
  check(err, "setting the completed configuration");
}

// The device of the configuration's first instance group: where the engine used for
// auto-complete is made (a GPU plan cannot be described without a GPU).
std::pair<DeviceType, int> primaryDevice(const ModelConfig& mc) {
  InstanceKind kind = mc.instanceGroups.empty() ? InstanceKind::kAuto : mc.instanceGroups[0].kind;
  if (kind == InstanceKind::kAuto) kind = gpuAvailable() ? InstanceKind::kGpu : InstanceKind::kCpu;
  if (kind == InstanceKind::kModel)
    throw TritonError(TRITONSERVER_ERROR_UNSUPPORTED, "instance_group KIND_MODEL is not supported by the kiln backend: use KIND_CPU or KIND_GPU");
  if (kind == InstanceKind::kCpu) return {DeviceType::kCPU, -1};
  const std::vector<int>& gpus = mc.instanceGroups.empty() ? std::vector<int>{} : mc.instanceGroups[0].gpus;
  return {DeviceType::kGPU, gpus.empty() ? 0 : gpus[0]};
}

}  // namespace

ModelState::ModelState(TRITONBACKEND_Model* model) {
  const char* cname = nullptr;
  check(TRITONBACKEND_ModelName(model, &cname), "reading the model name");
  name_ = cname;
  uint64_t version = 0;
  check(TRITONBACKEND_ModelVersion(model, &version), "reading the model version");
  TRITONBACKEND_ArtifactType artifact;
  const char* location = nullptr;
  check(TRITONBACKEND_ModelRepository(model, &artifact, &location), "reading the model repository");
  if (artifact != TRITONBACKEND_ARTIFACT_FILESYSTEM)
    throw TritonError(TRITONSERVER_ERROR_UNSUPPORTED, "the kiln backend reads models from a file system repository only");
  modelDir_ = location;

  nlohmann::json json = readConfigJson(model);
  config_ = parseModelConfig(json);
  std::vector<std::string> warnings;
  params_ = readBackendParameters(config_.parameters, warnings);
  for (const std::string& w : warnings) logWarning("model '" + name_ + "': " + w);
  modelFile_ = findModelFile((std::filesystem::path(modelDir_) / std::to_string(version)).string(),
                             config_.defaultModelFilename);
  if (!isOnnxFile(modelFile_) && params_.onnxOnlyGiven)
    logWarning("model '" + name_ + "': the build parameters (precision, shapes, optimization level, timing cache, aux streams) "
               "have no effect on a plan file; they apply when the model file is an ONNX model");

  const auto [type, index] = primaryDevice(config_);
  io_ = describeEngine(*engineFor(type, index));

  bool autoComplete = false;
  check(TRITONBACKEND_ModelAutoCompleteConfig(model, &autoComplete), "asking whether to auto-complete");
  if (autoComplete && autoCompleteConfig(json, io_)) {
    setConfigJson(model, json);
    config_ = parseModelConfig(readConfigJson(model));
  }
  checkConfigAgainstEngine(config_, io_);
  logInfo("model '" + name_ + "' serves " + modelFile_ + (batching() ? " with max_batch_size " + std::to_string(config_.maxBatchSize) : ""));
}

std::vector<uint8_t>& ModelState::planFor(DeviceType type, int deviceIndex) {
  std::vector<uint8_t>& plan = type == DeviceType::kGPU ? gpuPlan_ : cpuPlan_;
  if (!plan.empty()) return plan;
  if (isOnnxFile(modelFile_))
    plan = buildPlanFromOnnx(modelFile_, type, deviceIndex, params_, config_.maxBatchSize, modelDir_);
  else
    plan = readFileBytes(modelFile_);
  return plan;
}

std::shared_ptr<Engine> ModelState::engineFor(DeviceType type, int deviceIndex) {
  std::lock_guard<std::mutex> lock(mu_);
  const int key = type == DeviceType::kGPU ? deviceIndex : -1;
  if (auto it = engines_.find(key); it != engines_.end()) return it->second;
  if (type == DeviceType::kGPU && !gpuAvailable())
    throw TritonError(TRITONSERVER_ERROR_UNAVAILABLE, "a KIND_GPU instance needs a CUDA device and a kiln built with CUDA; none is available");
  const std::vector<uint8_t>& plan = planFor(type, deviceIndex);
  std::shared_ptr<Engine> engine =
      Engine::deserialize(plan.data(), plan.size(), type == DeviceType::kGPU ? deviceIndex : -1, tritonLogger(), params_.threads);
  if (engine->device() != type)
    throw TritonError(TRITONSERVER_ERROR_INVALID_ARG,
                      "the plan " + modelFile_ + " runs on the " + toString(engine->device()) + " but a " +
                          (type == DeviceType::kGPU ? "KIND_GPU" : "KIND_CPU") +
                          " instance asks for the " + toString(type) + ": use a matching instance_group kind, or an ONNX model that is built for each");
  engines_[key] = engine;
  return engine;
}

}  // namespace kiln::triton
