// One model instance (TRITONBACKEND_ModelInstance): execution contexts on its device (the CPU,
// or one GPU), the buffers it gathers batches into, and the execution of Triton's request lists:
// requests are checked one by one (a bad one gets its own error), requests of equal row shapes
// are concatenated along the batch dim up to max_batch_size, run as one enqueue, and the outputs
// scattered back to each request's response.
//
// Batches are pipelined, as Triton's TensorRT backend does: execute() binds a batch to a free
// lane (its own context, stream and buffers), enqueues it and returns; a completion thread waits
// for the lane's stream, copies the outputs out, sends the responses and frees the lane. With two
// lanes (a GPU's default, `batches_in_flight`), the next batch's inputs are copied in while the
// previous one computes, which one lane serializes.
#pragma once
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
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
  ~InstanceState();  // waits for the batches in flight
  InstanceState(const InstanceState&) = delete;
  InstanceState& operator=(const InstanceState&) = delete;

  //! Takes ownership of the requests: answers and releases every one of them (some after it
  //! returns, from the completion thread). Never throws.
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
  //! What one batch in flight owns: a context (and its arena), a stream, gathered inputs and
  //! outputs in the engine's memory, pinned host copies of inputs from pageable memory (GPU).
  struct Lane {
    void* stream = nullptr;
    std::unique_ptr<ExecutionContext> ctx;
    std::map<std::string, Buffer> staging;
    std::map<std::string, Buffer> pinned;
    std::map<std::string, std::unique_ptr<GraphSlot>> slots;
    bool busy = false;
  };
  //! A batch enqueued on a lane, for the completion thread to finish.
  struct InFlight {
    Lane* lane = nullptr;
    std::vector<PendingRequest> batch;
    int64_t total = 0;
    std::map<std::string, Buffer>* outputs = nullptr;  //!< where non-direct outputs are
    std::vector<Dims> outShapes;
    std::vector<bool> direct;
    std::vector<std::pair<void*, MemoryPlace>> target;
    uint64_t execStart = 0, computeStart = 0;
  };

  void runBatch(std::vector<PendingRequest>& batch, uint64_t execStart);
  //! Waits for the lane's work, copies the outputs into the responses, answers and releases.
  void finish(InFlight& f);
  //! Sends every response (an error response for each when `failure`), reports statistics and
  //! releases the requests; deletes `failure`.
  void answer(std::vector<PendingRequest>& batch, int64_t total, TRITONSERVER_Error* failure, uint64_t execStart,
              uint64_t computeStart, uint64_t computeEnd);
  Lane* acquireLane();
  void freeLane(Lane* lane);
  void completionLoop();
  //! The lane's slot for these input shapes (created on first use, captured after its first run);
  //! null when the lane already holds `cuda_graph_shapes` slots (the batch then runs without a graph).
  GraphSlot* graphSlot(Lane& lane, const std::vector<Dims>& shapes);
  //! `bufs[name]`, grown to at least `bytes` of the engine's memory (pinned host memory: `host`).
  void* buffer(std::map<std::string, Buffer>& bufs, const std::string& name, size_t bytes, bool host = false);
  void bindInputs(std::vector<PendingRequest>& batch, const std::vector<Dims>& shapes, ExecutionContext& ctx, Lane& lane,
                  std::map<std::string, Buffer>& bufs, bool fixedBuffers);
  void releaseBuffers(std::map<std::string, Buffer>& bufs, bool host = false);

  ModelState& model_;
  TRITONBACKEND_ModelInstance* instance_;
  std::string name_;
  DeviceType type_ = DeviceType::kCPU;
  MemoryPlace place_;  //!< where the engine's buffers live
  std::unique_ptr<Device> device_;
  std::shared_ptr<Engine> engine_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  bool slotsFullWarned_ = false;

  std::mutex mutex_;  //!< guards lanes' busy flags, queue_ and stopping_
  std::condition_variable laneFreed_, queued_;
  std::deque<InFlight> queue_;
  bool stopping_ = false;
  std::thread completer_;
};

}  // namespace kiln::triton
