// One model instance (TRITONBACKEND_ModelInstance): an execution context on its device (the
// CPU, or one GPU with its own stream), the buffers it gathers batches into, and the execution
// of Triton's request lists: requests are checked one by one (a bad one gets its own error),
// requests of equal row shapes are concatenated along the batch dim up to max_batch_size, run
// as one enqueue, and the outputs scattered back to each request's response.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/device.h"
#include "kiln/runtime.h"
#include "memory_copy.h"
#include "model_state.h"
#include "request_reader.h"

namespace kiln::triton {

class InstanceState {
 public:
  InstanceState(ModelState& model, TRITONBACKEND_ModelInstance* instance);
  ~InstanceState();
  InstanceState(const InstanceState&) = delete;
  InstanceState& operator=(const InstanceState&) = delete;

  //! Takes ownership of the requests: answers and releases every one of them. Never throws.
  void execute(TRITONBACKEND_Request** requests, uint32_t count);

 private:
  struct Buffer {
    void* data = nullptr;
    size_t bytes = 0;
  };
  //! A context with buffers bound once: the CUDA-graph path keeps one per input-shape set.
  struct GraphSlot {
    std::unique_ptr<ExecutionContext> ctx;
    std::map<std::string, Buffer> buffers;
    bool captured = false;  //!< its first batch ran; later ones replay the graph
  };

  void runBatch(std::vector<PendingRequest>& batch, uint64_t execStart);
  //! The slot for these input shapes (created on first use, captured after its first run); null when the
  //! instance already holds `cuda_graph_shapes` slots (the batch then runs without a graph).
  GraphSlot* graphSlot(const std::vector<Dims>& shapes);
  //! `bufs[name]`, grown to at least `bytes` of the engine's memory.
  void* buffer(std::map<std::string, Buffer>& bufs, const std::string& name, size_t bytes);
  void bindInputs(std::vector<PendingRequest>& batch, const std::vector<Dims>& shapes, ExecutionContext& ctx,
                  std::map<std::string, Buffer>& bufs, bool fixedBuffers);
  void releaseBuffers(std::map<std::string, Buffer>& bufs);

  ModelState& model_;
  TRITONBACKEND_ModelInstance* instance_;
  std::string name_;
  DeviceType type_ = DeviceType::kCPU;
  MemoryPlace place_;  //!< where the engine's buffers live
  std::unique_ptr<Device> device_;
  void* stream_ = nullptr;
  std::shared_ptr<Engine> engine_;
  std::unique_ptr<ExecutionContext> ctx_;
  std::map<std::string, Buffer> staging_;
  std::map<std::string, std::unique_ptr<GraphSlot>> slots_;
  bool slotsFullWarned_ = false;
};

}  // namespace kiln::triton
