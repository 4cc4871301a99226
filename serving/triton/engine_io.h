// An engine's I/O as the backend serves it: names, types, build-time dims and profile-0 ranges;
// whether it batches (every I/O tensor's first dim dynamic); the model configuration's
// auto-complete from it, and the check that a configuration matches it.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/runtime.h"
#include "model_config.h"

namespace kiln::triton {

struct TensorIO {
  std::string name;
  DataType type = DataType::kFLOAT;
  Dims dims;      //!< build-time dims (-1: dynamic)
  Dims min, max;  //!< inputs: profile 0's range per dim (= dims where static); outputs: dims
};

struct EngineIO {
  std::vector<TensorIO> inputs, outputs;
  bool batchable = false;  //!< every input and output has a dynamic first dim
  int64_t minBatch = 1, maxBatch = 0;  //!< profile 0's batch range when batchable
  const TensorIO* findInput(const std::string& name) const;
  const TensorIO* findOutput(const std::string& name) const;
};

EngineIO describeEngine(const Engine& engine);

//! Fills what the configuration leaves out: inputs, outputs (names, types, dims) and
//! max_batch_size (the profile's max batch when the engine batches). Returns true when it changed
//! `config`.
bool autoCompleteConfig(nlohmann::json& config, const EngineIO& io);

//! Throws TritonError(INVALID_ARG) when `mc` cannot be served by the engine: a configured tensor
//! the engine does not have, an engine input the configuration lacks, a type or dims that differ,
//! max_batch_size beyond the profile or batching an engine that has no batch dim.
void checkConfigAgainstEngine(const ModelConfig& mc, const EngineIO& io);

}  // namespace kiln::triton
