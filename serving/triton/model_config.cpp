#include "model_config.h"

#include "data_types.h"
#include "triton_util.h"

namespace kiln::triton {
namespace {

[[noreturn]] void badField(const std::string& field, const std::string& why) {
  throw TritonError(TRITONSERVER_ERROR_INVALID_ARG, "model configuration field '" + field + "' " + why);
}

std::vector<TensorConfig> readTensors(const nlohmann::json& config, const char* key) {
  std::vector<TensorConfig> out;
  if (!config.contains(key)) return out;
  for (const nlohmann::json& t : config.at(key)) {
    TensorConfig tc;
    if (!t.contains("name") || !t["name"].is_string()) badField(key, "has an entry without a name");
    tc.name = t["name"].get<std::string>();
    const std::string field = std::string(key) + " '" + tc.name + "'";
    if (t.contains("data_type") && t["data_type"].is_string() && t["data_type"] != "TYPE_INVALID")
      tc.type = fromConfigType(t["data_type"].get<std::string>());
    if (t.contains("dims") && t["dims"].is_array() && !t["dims"].empty()) {
      Dims d;
      for (const nlohmann::json& v : t["dims"]) d.push_back(jsonInt(v, field + " dims"));
      tc.dims = d;
    }
    if (t.contains("reshape")) badField(field + " reshape", "is not supported by the kiln backend");
    if (t.value("allow_ragged_batch", false))
      badField(field + " allow_ragged_batch", "is not supported: requests of different shapes run as separate batches");
    out.push_back(std::move(tc));
  }
  return out;
}

InstanceKind readKind(const std::string& s) {
  if (s == "KIND_AUTO") return InstanceKind::kAuto;
  if (s == "KIND_CPU") return InstanceKind::kCpu;
  if (s == "KIND_GPU") return InstanceKind::kGpu;
  if (s == "KIND_MODEL") return InstanceKind::kModel;
  badField("instance_group kind", "has the unknown value '" + s + "'");
}

}  // namespace

int64_t jsonInt(const nlohmann::json& v, const std::string& field) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    size_t used = 0;
    try {
      const int64_t x = std::stoll(s, &used);
      if (used == s.size()) return x;
    } catch (const std::exception&) {
    }
  }
  badField(field, "is not an integer: " + v.dump());
}

ModelConfig parseModelConfig(const nlohmann::json& config) {
  ModelConfig mc;
  mc.name = config.value("name", "");
  if (config.contains("max_batch_size")) mc.maxBatchSize = jsonInt(config["max_batch_size"], "max_batch_size");
  if (mc.maxBatchSize < 0) badField("max_batch_size", "is negative");
  mc.inputs = readTensors(config, "input");
  mc.outputs = readTensors(config, "output");
  if (config.contains("instance_group")) {
    for (const nlohmann::json& g : config["instance_group"]) {
      InstanceGroupConfig ig;
      if (g.contains("kind")) ig.kind = readKind(g["kind"].get<std::string>());
      if (g.contains("gpus"))
        for (const nlohmann::json& d : g["gpus"]) ig.gpus.push_back(static_cast<int>(jsonInt(d, "instance_group gpus")));
      mc.instanceGroups.push_back(std::move(ig));
    }
  }
  if (config.contains("parameters")) {
    for (const auto& [key, value] : config["parameters"].items()) {
      if (!value.contains("string_value") || !value["string_value"].is_string())
        badField("parameters '" + key + "'", "has no string_value");
      mc.parameters[key] = value["string_value"].get<std::string>();
    }
  }
  mc.defaultModelFilename = config.value("default_model_filename", "");
  return mc;
}

}  // namespace kiln::triton
