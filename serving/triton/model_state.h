// One loaded model (TRITONBACKEND_Model): its configuration, parameters and the engines its
// instances share, one per device, loaded from the plan or built from the ONNX file once.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend_parameters.h"
#include "engine_io.h"
#include "model_config.h"
#include "triton/core/tritonbackend.h"

namespace kiln::triton {

class ModelState {
 public:
  //! Reads the configuration, loads or builds the engine for the configuration's first instance
  //! group (the CPU, or its first GPU), auto-completes the configuration from it when Triton asks
  //! for that, and checks the configuration against the engine. Throws on any mismatch.
  explicit ModelState(TRITONBACKEND_Model* model);

  const std::string& name() const { return name_; }
  const ModelConfig& config() const { return config_; }
  const BackendParameters& params() const { return params_; }
  const EngineIO& io() const { return io_; }
  bool batching() const { return config_.maxBatchSize > 0; }

  //! The engine on the CPU (kCPU) or on CUDA device `deviceIndex` (kGPU), shared by the
  //! instances there; created on first use. Thread-safe.
  std::shared_ptr<Engine> engineFor(DeviceType type, int deviceIndex);

 private:
  std::vector<uint8_t>& planFor(DeviceType type, int deviceIndex);

  std::string name_, modelDir_, modelFile_;
  ModelConfig config_;
  BackendParameters params_;
  EngineIO io_;
  std::mutex mu_;
  std::map<int, std::shared_ptr<Engine>> engines_;  // key: -1 = CPU, else the CUDA device
  std::vector<uint8_t> cpuPlan_, gpuPlan_;          // the plan file, or a build per device kind
};

}  // namespace kiln::triton
