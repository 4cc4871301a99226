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
  stream_ = device_->createStream();
  ctx_ = engine_->createExecutionContext();
  if (model_.params().cudaGraphs && type_ == DeviceType::kCPU)
    logWarning("instance '" + name_ + "': cuda_graphs has no effect on the CPU (each input-shape set still gets its own "
               "context and buffers, run without a graph)");
  logInfo("instance '" + name_ + "' runs on the " + toString(type_) +
          (type_ == DeviceType::kGPU ? " " + std::to_string(deviceId) : std::string()));
}

InstanceState::~InstanceState() {
  if (type_ == DeviceType::kGPU) device_->makeCurrent();
  for (auto& [key, slot] : slots_) releaseBuffers(slot->buffers);
  slots_.clear();
  releaseBuffers(staging_);
  ctx_.reset();
  if (stream_) device_->destroyStream(stream_);
}

void InstanceState::releaseBuffers(std::map<std::string, Buffer>& bufs) {
  for (auto& [name, b] : bufs)
    if (b.data) device_->release(b.data);
  bufs.clear();
}

void* InstanceState::buffer(std::map<std::string, Buffer>& bufs, const std::string& name, size_t bytes) {
  Buffer& b = bufs[name];
  if (b.data && b.bytes >= bytes) return b.data;
  if (b.data) device_->release(b.data);
  b.data = nullptr;
  b.bytes = std::max<size_t>(bytes, 256);  // never a null binding, even for empty tensors
  b.data = device_->allocate(b.bytes);
  return b.data;
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
  // the previous batch is done.
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
                               std::map<std::string, Buffer>& bufs, bool fixedBuffers) {
  const EngineIO& io = model_.io();
  for (size_t k = 0; k < io.inputs.size(); ++k) {
    const TensorIO& t = io.inputs[k];
    if (!fixedBuffers) ctx.setInputShape(t.name, shapes[k]);
    // One request, one buffer already where the engine reads: bind it as is (no copy).
    if (!fixedBuffers && batch.size() == 1 && batch[0].inputs[k].bufferCount == 1) {
      const void* data = nullptr;
      uint64_t size = 0;
      MemoryPlace have = place_;
      check(TRITONBACKEND_InputBuffer(batch[0].inputs[k].handle, 0, &data, &size, &have.type, &have.id), "reading input '" + t.name + "'");
      if (engineCanUse(have, place_) && size > 0) {
        ctx.setTensorAddress(t.name, const_cast<void*>(data));  // kiln never writes its inputs
        continue;
      }
    }
    // Otherwise gather every request's buffers, in batch order, into the engine's memory.
    auto* dst = static_cast<uint8_t*>(fixedBuffers ? bufs.at(t.name).data : buffer(bufs, t.name, tensorBytes(shapes[k], t.type)));
    size_t offset = 0;
    for (PendingRequest& r : batch) {
      const RequestInput& in = r.inputs[k];
      for (uint32_t b = 0; b < in.bufferCount; ++b) {
        const void* data = nullptr;
        uint64_t size = 0;
        MemoryPlace have = place_;
        check(TRITONBACKEND_InputBuffer(in.handle, b, &data, &size, &have.type, &have.id), "reading input '" + t.name + "'");
        copyBytes(dst + offset, place_, data, have, size, stream_);
        offset += size;
      }
    }
    if (!fixedBuffers) ctx.setTensorAddress(t.name, dst);
  }
}

InstanceState::GraphSlot* InstanceState::graphSlot(const std::vector<Dims>& shapes) {
  const std::string key = shapesKey(shapes);
  if (auto it = slots_.find(key); it != slots_.end()) return it->second.get();
  if (static_cast<int>(slots_.size()) >= model_.params().cudaGraphShapes) {
    if (!slotsFullWarned_)
      logWarning("instance '" + name_ + "': " + std::to_string(slots_.size()) +
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
  return slots_.emplace(key, std::move(slot)).first->second.get();
}

void InstanceState::runBatch(std::vector<PendingRequest>& batch, uint64_t execStart) {
  const EngineIO& io = model_.io();
  const bool batching = model_.batching();
  uint64_t computeStart = 0, computeEnd = 0;
  int64_t total = 0;
  for (const PendingRequest& r : batch) total += r.batch;
  TRITONSERVER_Error* failure = nullptr;
  try {
    std::vector<Dims> shapes;
    for (const RequestInput& in : batch[0].inputs) {
      shapes.push_back(in.shape);
      if (batching) shapes.back()[0] = total;
    }
    GraphSlot* slot = model_.params().cudaGraphs ? graphSlot(shapes) : nullptr;
    ExecutionContext& ctx = slot ? *slot->ctx : *ctx_;
    std::map<std::string, Buffer>& bufs = slot ? slot->buffers : staging_;
    bindInputs(batch, shapes, ctx, bufs, slot != nullptr);

    // Output shapes; a lone request's outputs go straight into its response buffers when they
    // are where the engine writes.
    const bool single = batch.size() == 1;
    std::vector<Dims> outShapes(io.outputs.size());
    std::vector<bool> direct(io.outputs.size(), false);
    std::vector<std::pair<void*, MemoryPlace>> target(io.outputs.size(), {nullptr, place_});
    for (size_t o = 0; o < io.outputs.size(); ++o) {
      const TensorIO& t = io.outputs[o];
      outShapes[o] = ctx.getTensorShape(t.name);
      if (batching && (outShapes[o].empty() || outShapes[o][0] != total))
        throw TritonError(TRITONSERVER_ERROR_INTERNAL, "output '" + t.name + "' has shape " + toString(outShapes[o]) +
                                                           ", whose first dim is not the batch of " + std::to_string(total));
      const size_t bytes = tensorBytes(outShapes[o], t.type);
      const bool requested = std::find(batch[0].outputs.begin(), batch[0].outputs.end(), &t) != batch[0].outputs.end();
      if (single && requested) {
        TRITONBACKEND_Output* out = nullptr;
        check(TRITONBACKEND_ResponseOutput(batch[0].response, &out, t.name.c_str(), toTritonType(t.type), outShapes[o].data(),
                                           static_cast<uint32_t>(outShapes[o].size())),
              "creating output '" + t.name + "'");
        MemoryPlace have = place_;
        check(TRITONBACKEND_OutputBuffer(out, &target[o].first, bytes, &have.type, &have.id), "allocating output '" + t.name + "'");
        target[o].second = have;
        direct[o] = !slot && bytes > 0 && engineCanUse(have, place_);
      }
      if (direct[o]) ctx.setTensorAddress(t.name, target[o].first);
      else if (!slot) ctx.setTensorAddress(t.name, buffer(bufs, t.name, bytes));
    }

    computeStart = nowNs();
    if (slot && slot->captured) {
      ctx.launchGraph(stream_);
    } else {
      ctx.enqueue(stream_);  // a new slot's first run is a plain one: lazy initialization stays out of the capture
    }
    device_->synchronize(stream_);
    computeEnd = nowNs();
    if (slot && !slot->captured) {  // capture records without running: the buffers keep this batch's results
      if (type_ == DeviceType::kGPU) slot->ctx->captureGraph(stream_);
      slot->captured = true;  // on the CPU (or when capture is not possible) launchGraph runs a plain enqueue
    }

    int64_t row = 0;
    for (PendingRequest& r : batch) {
      for (const TensorIO* t : r.outputs) {
        const size_t o = t - io.outputs.data();
        if (direct[o]) continue;
        const size_t rowBytes = batching ? tensorBytes(outShapes[o], t->type) / static_cast<size_t>(total) : 0;
        const size_t bytes = batching ? rowBytes * static_cast<size_t>(r.batch) : tensorBytes(outShapes[o], t->type);
        if (!single) {
          Dims shape = outShapes[o];
          if (batching) shape[0] = r.batch;
          TRITONBACKEND_Output* out = nullptr;
          check(TRITONBACKEND_ResponseOutput(r.response, &out, t->name.c_str(), toTritonType(t->type), shape.data(),
                                             static_cast<uint32_t>(shape.size())),
                "creating output '" + t->name + "'");
          target[o].second = place_;
          check(TRITONBACKEND_OutputBuffer(out, &target[o].first, bytes, &target[o].second.type, &target[o].second.id),
                "allocating output '" + t->name + "'");
        }
        const auto* src = static_cast<const uint8_t*>(bufs.at(t->name).data) + rowBytes * static_cast<size_t>(row);
        copyBytes(target[o].first, target[o].second, src, place_, bytes, stream_);
      }
      row += r.batch;
    }
    device_->synchronize(stream_);
  } catch (...) {
    failure = currentExceptionAsError("model '" + model_.name() + "': ");
  }
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
