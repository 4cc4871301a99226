// The parts of a Triton model configuration (config.pbtxt, handed to the backend as JSON) that
// the kiln backend reads: I/O, max_batch_size, instance groups and `parameters`.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/types.h"

namespace kiln::triton {

struct TensorConfig {
  std::string name;
  std::optional<DataType> type;  //!< absent: auto-complete fills it
  std::optional<Dims> dims;      //!< without the batch dim when max_batch_size > 0; absent: auto-complete
};

enum class InstanceKind { kAuto, kCpu, kGpu, kModel };

struct InstanceGroupConfig {
  InstanceKind kind = InstanceKind::kAuto;
  std::vector<int> gpus;
};

struct ModelConfig {
  std::string name;
  int64_t maxBatchSize = 0;
  std::vector<TensorConfig> inputs, outputs;
  std::vector<InstanceGroupConfig> instanceGroups;
  std::map<std::string, std::string> parameters;  //!< `parameters { key: ... value { string_value } }`
  std::string defaultModelFilename;
};

//! Reads Triton's JSON form of the configuration. Throws TritonError(INVALID_ARG) on a field of
//! the wrong shape.
ModelConfig parseModelConfig(const nlohmann::json& config);
//! A JSON integer, or an integer written as a string (protobuf's JSON form of int64 fields).
int64_t jsonInt(const nlohmann::json& v, const std::string& field);

}  // namespace kiln::triton
