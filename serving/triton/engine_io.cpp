#include "engine_io.h"

#include <algorithm>

#include "data_types.h"
#include "triton_util.h"

namespace kiln::triton {

const TensorIO* EngineIO::findInput(const std::string& name) const {
  for (const TensorIO& t : inputs)
    if (t.name == name) return &t;
  return nullptr;
}
const TensorIO* EngineIO::findOutput(const std::string& name) const {
  for (const TensorIO& t : outputs)
    if (t.name == name) return &t;
  return nullptr;
}

EngineIO describeEngine(const Engine& engine) {
  EngineIO io;
  for (int i = 0; i < engine.getNbIOTensors(); ++i) {
    TensorIO t;
    t.name = engine.getIOTensorName(i);
    t.type = engine.getTensorDataType(t.name);
    t.dims = engine.getTensorShape(t.name);
    t.min = t.max = t.dims;
    if (engine.getTensorIOMode(t.name) == TensorIOMode::kINPUT) {
      if (!isStatic(t.dims)) {
        t.min = engine.getProfileShape(t.name, 0, OptProfileSelector::kMIN);
        t.max = engine.getProfileShape(t.name, 0, OptProfileSelector::kMAX);
      }
      io.inputs.push_back(std::move(t));
    } else {
      io.outputs.push_back(std::move(t));
    }
  }
  auto batchDim = [](const TensorIO& t) { return !t.dims.empty() && t.dims[0] < 0; };
  io.batchable = !io.inputs.empty() && std::all_of(io.inputs.begin(), io.inputs.end(), batchDim) &&
                 std::all_of(io.outputs.begin(), io.outputs.end(), batchDim);
  if (io.batchable) {
    io.maxBatch = io.inputs[0].max[0];
    io.minBatch = io.inputs[0].min[0];
    for (const TensorIO& t : io.inputs) {
      io.maxBatch = std::min(io.maxBatch, t.max[0]);
      io.minBatch = std::max(io.minBatch, t.min[0]);
    }
  }
  return io;
}

namespace {

// The dims the configuration states for `t`: without the batch dim when the model batches.
nlohmann::json configDims(const TensorIO& t, bool batching) {
  nlohmann::json dims = nlohmann::json::array();
  for (size_t i = batching ? 1 : 0; i < t.dims.size(); ++i) dims.push_back(t.dims[i]);
  return dims;
}

bool completeTensors(nlohmann::json& config, const char* key, const std::vector<TensorIO>& tensors, bool batching) {
  nlohmann::json& list = config[key];
  bool changed = false;
  if (!list.is_array() || list.empty()) {
    list = nlohmann::json::array();
    for (const TensorIO& t : tensors)
      list.push_back({{"name", t.name}, {"data_type", toConfigType(t.type)}, {"dims", configDims(t, batching)}});
    return true;
  }
  for (nlohmann::json& entry : list) {  // fill the fields a named entry leaves out
    const std::string name = entry.value("name", "");
    const TensorIO* t = nullptr;
    for (const TensorIO& c : tensors)
      if (c.name == name) t = &c;
    if (!t) continue;  // checkConfigAgainstEngine names it
    if (!entry.contains("data_type") || entry["data_type"] == "TYPE_INVALID") {
      entry["data_type"] = toConfigType(t->type);
      changed = true;
    }
    if (!entry.contains("dims") || entry["dims"].empty()) {
      entry["dims"] = configDims(*t, batching);
      changed = true;
    }
  }
  return changed;
}

[[noreturn]] void mismatch(const std::string& msg) { throw TritonError(TRITONSERVER_ERROR_INVALID_ARG, msg); }

std::string names(const std::vector<TensorIO>& tensors) {
  std::string s;
  for (const TensorIO& t : tensors) s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

void checkTensor(const TensorConfig& c, const TensorIO& t, bool batching, const char* what) {
  const std::string where = std::string(what) + " '" + c.name + "'";
  if (c.type && *c.type != t.type)
    mismatch(where + " has data_type " + toConfigType(*c.type) + " in the configuration but " +
             toConfigType(t.type) + " in the engine");
  if (!c.dims) return;
  const size_t skip = batching ? 1 : 0;
  if (c.dims->size() + skip != t.dims.size())
    mismatch(where + " has dims " + toString(*c.dims) + " in the configuration but the engine's shape is " +
             toString(t.dims) + (batching ? " (the configuration leaves out the batch dim)" : ""));
  for (size_t i = 0; i < c.dims->size(); ++i) {
    const int64_t want = (*c.dims)[i], lo = t.min[i + skip], hi = t.max[i + skip];
    if (lo < 0) continue;  // an output dim known only at run time
    if (want >= 0 && (want < lo || want > hi))
      mismatch(where + " dim " + std::to_string(i) + " is " + std::to_string(want) + " in the configuration but the engine takes " +
               (lo == hi ? std::to_string(lo) : "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]"));
  }
}

}  // namespace

bool autoCompleteConfig(nlohmann::json& config, const EngineIO& io) {
  bool changed = false;
  int64_t mbs = config.contains("max_batch_size") ? jsonInt(config["max_batch_size"], "max_batch_size") : 0;
  if (mbs == 0 && io.batchable && io.minBatch <= 1) {
    mbs = io.maxBatch;
    config["max_batch_size"] = mbs;
    changed = true;
  }
  changed |= completeTensors(config, "input", io.inputs, mbs > 0);
  changed |= completeTensors(config, "output", io.outputs, mbs > 0);
  return changed;
}

void checkConfigAgainstEngine(const ModelConfig& mc, const EngineIO& io) {
  const bool batching = mc.maxBatchSize > 0;
  if (batching) {
    if (!io.batchable)
      mismatch("max_batch_size is " + std::to_string(mc.maxBatchSize) +
               " but the engine has no batch dim (every input and output needs a dynamic first dim): use max_batch_size: 0");
    if (mc.maxBatchSize > io.maxBatch)
      mismatch("max_batch_size " + std::to_string(mc.maxBatchSize) + " exceeds the engine profile's largest batch " +
               std::to_string(io.maxBatch));
    if (io.minBatch > 1)
      mismatch("the engine profile's smallest batch is " + std::to_string(io.minBatch) +
               ": Triton sends requests of batch 1, so the profile must start at 1");
  }
  for (const TensorConfig& c : mc.inputs) {
    const TensorIO* t = io.findInput(c.name);
    if (!t) mismatch("configuration input '" + c.name + "' is not an engine input (the engine's inputs: " + names(io.inputs) + ")");
    checkTensor(c, *t, batching, "input");
  }
  for (const TensorIO& t : io.inputs) {
    bool configured = false;
    for (const TensorConfig& c : mc.inputs) configured |= c.name == t.name;
    if (!configured) mismatch("engine input '" + t.name + "' is missing from the configuration's inputs");
  }
  for (const TensorConfig& c : mc.outputs) {
    const TensorIO* t = io.findOutput(c.name);
    if (!t) mismatch("configuration output '" + c.name + "' is not an engine output (the engine's outputs: " + names(io.outputs) + ")");
    checkTensor(c, *t, batching, "output");
  }
}

}  // namespace kiln::triton
