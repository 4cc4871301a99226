#include "instance_state.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "data_types.h"
#include "triton_util.h"

namespace kiln::triton {
namespace {

size_t tensorBytes(const Dims& d, DataType t) { return static_cast<size_t>(volume(d)) * elementSize(t); }

std::string shapesKey(const std::vector<Dims>& shapes) {
  std::string key;
  for (const Dims& d : shapes) key += toString(d);
  return key;
}

// Answers a request that failed before it joined a batch, and releases it.
void failRequest(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request* request, TRITONSERVER_Error* error) {
  TRITONBACKEND_Response* response = nullptr;
  TRITONSERVER_Error* e = TRITONBACKEND_ResponseNew(&response, request);
  logAndDelete(e, "creating an error response");
  if (!e) logAndDelete(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, error), "sending an error response");
  logAndDelete(TRITONBACKEND_ModelInstanceReportStatistics(instance, request, false, 0, 0, 0, 0), "reporting statistics");
  logAndDelete(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL), "releasing a request");
}

}  // namespace

InstanceState::InstanceState(ModelState& model, TRITONBACKEND_ModelInstance* instance) : model_(model), instance_(instance) {
  const char* name = nullptr;
  check(TRITONBACKEND_ModelInstanceName(instance, &name), "reading the instance name");
  name_ = name;
  TRITONSERVER_InstanceGroupKind kind;
  check(TRITONBACKEND_ModelInstanceKind(instance, &kind), "reading the instance kind");
  int32_t deviceId = 0;
  check(TRITONBACKEND_ModelInstanceDeviceId(instance, &deviceId), "reading the instance device");
  if (kind == TRITONSERVER_INSTANCEGROUPKIND_GPU) {
    type_ = DeviceType::kGPU;
    place_ = {TRITONSERVER_MEMORY_GPU, deviceId};
  } else if (kind == TRITONSERVER_INSTANCEGROUPKIND_CPU) {
    type_ = DeviceType::kCPU;
    place_ = {TRITONSERVER_MEMORY_CPU, 0};
  } else {
    throw TritonError(TRITONSERVER_ERROR_UNSUPPORTED, std::string("instance '") + name_ + "' is of kind " +
                                                          TRITONSERVER_InstanceGroupKindString(kind) +
                                                          ": the kiln backend runs KIND_CPU and KIND_GPU instances");
  }
  engine_ = model_.engineFor(type_, deviceId);
  device_ = std::make_unique<Device>(type_, type_ == DeviceType::kGPU ? deviceId : 0);
  int lanes = model_.params().batchesInFlight;
  if (lanes < 0) lanes = type_ == DeviceType::kGPU ? 2 : 1;
  try {
    for (int i = 0; i < lanes; ++i) {
      auto lane = std::make_unique<Lane>();
      lane->stream = device_->createStream();
      lanes_.push_back(std::move(lane));
      lanes_.back()->ctx = engine_->createExecutionContext();
    }
  } catch (...) {
    for (auto& lane : lanes_) {
      lane->ctx.reset();
      device_->destroyStream(lane->stream);
    }
    throw;
  }
  if (model_.params().cudaGraphs && type_ == DeviceType::kCPU)
    logWarning("instance '" + name_ + "': cuda_graphs has no effect on the CPU (each input-shape set still gets its own "
               "context and buffers, run without a graph)");
  completer_ = std::thread([this] { completionLoop(); });
  logInfo("instance '" + name_ + "' runs on the " + toString(type_) +
          (type_ == DeviceType::kGPU ? " " + std::to_string(deviceId) : std::string()) + ", " + std::to_string(lanes) +
          " batch(es) in flight");
}

InstanceState::~InstanceState() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queued_.notify_all();
  completer_.join();  // answers every batch still in flight first
  if (type_ == DeviceType::kGPU) device_->makeCurrent();
  for (auto& lane : lanes_) {
    for (auto& [key, slot] : lane->slots) releaseBuffers(slot->buffers);
    lane->slots.clear();
    releaseBuffers(lane->staging);
    releaseBuffers(lane->pinned, /*host=*/true);
    lane->ctx.reset();
    device_->destroyStream(lane->stream);
  }
}

void InstanceState::releaseBuffers(std::map<std::string, Buffer>& bufs, bool host) {
  for (auto& [name, b] : bufs)
    if (b.data) host ? device_->releaseHost(b.data) : device_->release(b.data);
  bufs.clear();
}

void* InstanceState::buffer(std::map<std::string, Buffer>& bufs, const std::string& name, size_t bytes, bool host) {
  Buffer& b = bufs[name];
  if (b.data && b.bytes >= bytes) return b.data;
  if (b.data) host ? device_->releaseHost(b.data) : device_->release(b.data);
  b.data = nullptr;
  b.bytes = std::max<size_t>(bytes, 256);  // never a null binding, even for empty tensors
  b.data = host ? device_->allocateHost(b.bytes) : device_->allocate(b.bytes);
  return b.data;
}

InstanceState::Lane* InstanceState::acquireLane() {
  std::unique_lock<std::mutex> lock(mutex_);
  Lane* free = nullptr;
  laneFreed_.wait(lock, [&] {
    for (auto& lane : lanes_)
      if (!lane->busy) free = lane.get();
    return free != nullptr;
  });
  free->busy = true;
  return free;
}

void InstanceState::freeLane(Lane* lane) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lane->busy = false;
  }
  laneFreed_.notify_one();
}

void InstanceState::completionLoop() {
  bool current = type_ != DeviceType::kGPU;
  for (;;) {
    InFlight f;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queued_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      f = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!current) {
      try {
        device_->makeCurrent();
      } catch (...) {  // finish() reports the same failure through its first CUDA call
      }
      current = true;
    }
    finish(f);
    freeLane(f.lane);
  }
}

void InstanceState::execute(TRITONBACKEND_Request** requests, uint32_t count) {
  const uint64_t execStart = nowNs();
  const std::string prefix = "model '" + model_.name() + "': ";
  if (type_ == DeviceType::kGPU) {
    try {
      device_->makeCurrent();  // Triton calls each instance from its own thread
    } catch (...) {
      TRITONSERVER_Error* err = currentExceptionAsError(prefix);
      for (uint32_t i = 0; i < count; ++i) failRequest(instance_, requests[i], err);
      TRITONSERVER_ErrorDelete(err);
      return;
    }
  }
  // The first batch's execution starts with the call (reading the requests), later ones when
  // they are handed to a lane.
  bool first = true;
  auto batchStart = [&](uint64_t callStart) { return std::exchange(first, false) ? callStart : nowNs(); };
  std::vector<PendingRequest> ready;
  for (uint32_t i = 0; i < count; ++i) {
    try {
      PendingRequest r = readRequest(requests[i], model_.io(), model_.config().maxBatchSize);
      check(TRITONBACKEND_ResponseNew(&r.response, r.request), "creating a response");
      ready.push_back(std::move(r));
    } catch (...) {
      TRITONSERVER_Error* err = currentExceptionAsError(prefix);
      failRequest(instance_, requests[i], err);
      TRITONSERVER_ErrorDelete(err);
    }
  }
  if (!model_.batching()) {
    for (PendingRequest& r : ready) {
      std::vector<PendingRequest> one;
      one.push_back(std::move(r));
      runBatch(one, batchStart(execStart));
    }
    return;
  }
  // Requests with equal row shapes (in arrival order within a shape) share batches of at most
  // max_batch_size rows.
  std::vector<size_t> order(ready.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<std::string> keys(ready.size());
  for (size_t i = 0; i < ready.size(); ++i) {
    std::vector<Dims> rows;
    for (const RequestInput& in : ready[i].inputs) rows.emplace_back(in.shape.begin() + 1, in.shape.end());
    keys[i] = shapesKey(rows);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return keys[a] < keys[b]; });
  std::vector<PendingRequest> batch;
  int64_t rows = 0;
  for (size_t n = 0; n < order.size(); ++n) {
    PendingRequest& r = ready[order[n]];
    if (!batch.empty() && (!sameRowShapes(batch[0], r) || rows + r.batch > model_.config().maxBatchSize)) {
      runBatch(batch, batchStart(execStart));
      batch.clear();
      rows = 0;
    }
    rows += r.batch;
    batch.push_back(std::move(r));
  }
  if (!batch.empty()) runBatch(batch, batchStart(execStart));
}

void InstanceState::bindInputs(std::vector<PendingRequest>& batch, const std::vector<Dims>& shapes, ExecutionContext& ctx,
                               Lane& lane, std::map<std::string, Buffer>& bufs, bool fixedBuffers) {
  const EngineIO& io = model_.io();
  for (size_t k = 0; k < io.inputs.size(); ++k) {
    const TensorIO& t = io.inputs[k];
    if (!fixedBuffers) ctx.setInputShape(t.name, shapes[k]);
    // Every buffer of the input, in batch order.
    struct Piece {
      const void* data = nullptr;
      uint64_t size = 0;
      MemoryPlace have;
    };
    std::vector<Piece> pieces;
    size_t total = 0;
    bool pageable = true;
    for (PendingRequest& r : batch) {
      const RequestInput& in = r.inputs[k];
      for (uint32_t b = 0; b < in.bufferCount; ++b) {
        Piece p;
        p.have = place_;
        check(TRITONBACKEND_InputBuffer(in.handle, b, &p.data, &p.size, &p.have.type, &p.have.id), "reading input '" + t.name + "'");
        pageable = pageable && p.have.type == TRITONSERVER_MEMORY_CPU;
        total += p.size;
        pieces.push_back(p);
      }
    }
    // One buffer already where the engine reads: bind it as is (no copy).
    if (!fixedBuffers && pieces.size() == 1 && pieces[0].size > 0 && engineCanUse(pieces[0].have, place_)) {
      ctx.setTensorAddress(t.name, const_cast<void*>(pieces[0].data));  // kiln never writes its inputs
      continue;
    }
    auto* dst = static_cast<uint8_t*>(fixedBuffers ? bufs.at(t.name).data : buffer(bufs, t.name, tensorBytes(shapes[k], t.type)));
    if (type_ == DeviceType::kGPU && pageable && total > 0) {
      // From pageable memory a copy to the GPU is synchronous and slow (the driver stages it):
      // gather into the lane's pinned buffer with parallel memcpy, then one asynchronous copy.
      auto* host = static_cast<uint8_t*>(buffer(lane.pinned, t.name, total, /*host=*/true));
      size_t offset = 0;
      for (const Piece& p : pieces) {
        copyHostParallel(host + offset, p.data, p.size);
        offset += p.size;
      }
      copyBytes(dst, place_, host, {TRITONSERVER_MEMORY_CPU_PINNED, 0}, total, lane.stream);
    } else {
      size_t offset = 0;
      for (const Piece& p : pieces) {
        copyBytes(dst + offset, place_, p.data, p.have, p.size, lane.stream);
        offset += p.size;
      }
    }
    if (!fixedBuffers) ctx.setTensorAddress(t.name, dst);
  }
}

InstanceState::GraphSlot* InstanceState::graphSlot(Lane& lane, const std::vector<Dims>& shapes) {
  const std::string key = shapesKey(shapes);
  if (auto it = lane.slots.find(key); it != lane.slots.end()) return it->second.get();
  if (static_cast<int>(lane.slots.size()) >= model_.params().cudaGraphShapes) {
    if (!slotsFullWarned_)
      logWarning("instance '" + name_ + "': " + std::to_string(lane.slots.size()) +
                 " input-shape sets already have CUDA graphs (cuda_graph_shapes); other shapes run without one");
    slotsFullWarned_ = true;
    return nullptr;
  }
  auto slot = std::make_unique<GraphSlot>();
  slot->ctx = engine_->createExecutionContext();
  const EngineIO& io = model_.io();
  try {
    for (size_t k = 0; k < io.inputs.size(); ++k) {
      slot->ctx->setInputShape(io.inputs[k].name, shapes[k]);
      slot->ctx->setTensorAddress(io.inputs[k].name, buffer(slot->buffers, io.inputs[k].name, tensorBytes(shapes[k], io.inputs[k].type)));
    }
    for (const TensorIO& t : io.outputs)
      slot->ctx->setTensorAddress(t.name, buffer(slot->buffers, t.name, tensorBytes(slot->ctx->getTensorShape(t.name), t.type)));
  } catch (...) {
    releaseBuffers(slot->buffers);
    throw;
  }
  return lane.slots.emplace(key, std::move(slot)).first->second.get();
}

void InstanceState::runBatch(std::vector<PendingRequest>& batch, uint64_t execStart) {
  const EngineIO& io = model_.io();
  const bool batching = model_.batching();
  InFlight f;
  f.execStart = execStart;
  for (const PendingRequest& r : batch) f.total += r.batch;
  Lane* lane = acquireLane();
  f.lane = lane;
  try {
    std::vector<Dims> shapes;
    for (const RequestInput& in : batch[0].inputs) {
      shapes.push_back(in.shape);
      if (batching) shapes.back()[0] = f.total;
    }
    GraphSlot* slot = model_.params().cudaGraphs ? graphSlot(*lane, shapes) : nullptr;
    ExecutionContext& ctx = slot ? *slot->ctx : *lane->ctx;
    std::map<std::string, Buffer>& bufs = slot ? slot->buffers : lane->staging;
    bindInputs(batch, shapes, ctx, *lane, bufs, slot != nullptr);

    // Output shapes; a lone request's outputs go straight into its response buffers when they
    // are where the engine writes.
    const bool single = batch.size() == 1;
    f.outShapes.resize(io.outputs.size());
    f.direct.assign(io.outputs.size(), false);
    f.target.assign(io.outputs.size(), {nullptr, place_});
    for (size_t o = 0; o < io.outputs.size(); ++o) {
      const TensorIO& t = io.outputs[o];
      f.outShapes[o] = ctx.getTensorShape(t.name);
      if (batching && (f.outShapes[o].empty() || f.outShapes[o][0] != f.total))
        throw TritonError(TRITONSERVER_ERROR_INTERNAL, "output '" + t.name + "' has shape " + toString(f.outShapes[o]) +
                                                           ", whose first dim is not the batch of " + std::to_string(f.total));
      const size_t bytes = tensorBytes(f.outShapes[o], t.type);
      const bool requested = std::find(batch[0].outputs.begin(), batch[0].outputs.end(), &t) != batch[0].outputs.end();
      if (single && requested) {
        TRITONBACKEND_Output* out = nullptr;
        check(TRITONBACKEND_ResponseOutput(batch[0].response, &out, t.name.c_str(), toTritonType(t.type), f.outShapes[o].data(),
                                           static_cast<uint32_t>(f.outShapes[o].size())),
              "creating output '" + t.name + "'");
        MemoryPlace have = place_;
        check(TRITONBACKEND_OutputBuffer(out, &f.target[o].first, bytes, &have.type, &have.id), "allocating output '" + t.name + "'");
        f.target[o].second = have;
        f.direct[o] = !slot && bytes > 0 && engineCanUse(have, place_);
      }
      if (f.direct[o]) ctx.setTensorAddress(t.name, f.target[o].first);
      else if (!slot) ctx.setTensorAddress(t.name, buffer(bufs, t.name, bytes));
    }
    f.outputs = &bufs;

    f.computeStart = nowNs();
    if (slot && slot->captured) {
      ctx.launchGraph(lane->stream);
    } else {
      ctx.enqueue(lane->stream);  // a new slot's first run is a plain one: lazy initialization stays out of the capture
      if (slot) {  // capture records without running: the buffers keep this batch's results
        device_->synchronize(lane->stream);
        if (type_ == DeviceType::kGPU) slot->ctx->captureGraph(lane->stream);
        slot->captured = true;  // on the CPU (or when capture is not possible) launchGraph runs a plain enqueue
      }
    }
  } catch (...) {
    TRITONSERVER_Error* failure = currentExceptionAsError("model '" + model_.name() + "': ");
    try {
      device_->synchronize(lane->stream);  // copies enqueued before the failure still read the requests
    } catch (...) {
    }
    freeLane(lane);
    answer(batch, f.total, failure, execStart, 0, 0);
    return;
  }
  f.batch = std::move(batch);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(f));
  }
  queued_.notify_one();
}

void InstanceState::finish(InFlight& f) {
  const EngineIO& io = model_.io();
  const bool batching = model_.batching();
  const bool single = f.batch.size() == 1;
  uint64_t computeEnd = 0;
  TRITONSERVER_Error* failure = nullptr;
  try {
    device_->synchronize(f.lane->stream);
    computeEnd = nowNs();
    int64_t row = 0;
    for (PendingRequest& r : f.batch) {
      for (const TensorIO* t : r.outputs) {
        const size_t o = t - io.outputs.data();
        if (f.direct[o]) continue;
        const size_t rowBytes = batching ? tensorBytes(f.outShapes[o], t->type) / static_cast<size_t>(f.total) : 0;
        const size_t bytes = batching ? rowBytes * static_cast<size_t>(r.batch) : tensorBytes(f.outShapes[o], t->type);
        if (!single) {
          Dims shape = f.outShapes[o];
          if (batching) shape[0] = r.batch;
          TRITONBACKEND_Output* out = nullptr;
          check(TRITONBACKEND_ResponseOutput(r.response, &out, t->name.c_str(), toTritonType(t->type), shape.data(),
                                             static_cast<uint32_t>(shape.size())),
                "creating output '" + t->name + "'");
          f.target[o].second = place_;
          check(TRITONBACKEND_OutputBuffer(out, &f.target[o].first, bytes, &f.target[o].second.type, &f.target[o].second.id),
                "allocating output '" + t->name + "'");
        }
        const auto* src = static_cast<const uint8_t*>(f.outputs->at(t->name).data) + rowBytes * static_cast<size_t>(row);
        copyBytes(f.target[o].first, f.target[o].second, src, place_, bytes, f.lane->stream);
      }
      row += r.batch;
    }
    device_->synchronize(f.lane->stream);
  } catch (...) {
    failure = currentExceptionAsError("model '" + model_.name() + "': ");
  }
  answer(f.batch, f.total, failure, f.execStart, f.computeStart, computeEnd);
}

void InstanceState::answer(std::vector<PendingRequest>& batch, int64_t total, TRITONSERVER_Error* failure, uint64_t execStart,
                           uint64_t computeStart, uint64_t computeEnd) {
  const uint64_t execEnd = nowNs();
  for (PendingRequest& r : batch) {
    if (failure) {  // a fresh response: the failed one may hold half-made outputs
      logAndDelete(TRITONBACKEND_ResponseDelete(r.response), "deleting a response");
      r.response = nullptr;
      TRITONSERVER_Error* e = TRITONBACKEND_ResponseNew(&r.response, r.request);
      logAndDelete(e, "creating an error response");
      if (e) r.response = nullptr;
    }
    if (r.response)
      logAndDelete(TRITONBACKEND_ResponseSend(r.response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, failure), "sending a response");
    logAndDelete(TRITONBACKEND_ModelInstanceReportStatistics(instance_, r.request, failure == nullptr, execStart, computeStart,
                                                             computeEnd, execEnd),
                 "reporting statistics");
    logAndDelete(TRITONBACKEND_RequestRelease(r.request, TRITONSERVER_REQUEST_RELEASE_ALL), "releasing a request");
  }
  if (failure)
    TRITONSERVER_ErrorDelete(failure);
  else
    logAndDelete(TRITONBACKEND_ModelInstanceReportBatchStatistics(instance_, static_cast<uint64_t>(total), execStart, computeStart,
                                                                  computeEnd, execEnd),
                 "reporting batch statistics");
}

}  // namespace kiln::triton
