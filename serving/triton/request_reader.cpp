#include "request_reader.h"

#include <algorithm>

#include "data_types.h"
#include "triton_util.h"

namespace kiln::triton {
namespace {

[[noreturn]] void badRequest(const std::string& msg) { throw TritonError(TRITONSERVER_ERROR_INVALID_ARG, msg); }

std::string range(int64_t lo, int64_t hi) {
  return lo == hi ? std::to_string(lo) : "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

// The expected shape of `t` as a client sees it: the batch dim as -1 when the model batches.
std::string expectedShape(const TensorIO& t, bool batching) {
  Dims d = t.dims;
  if (batching) d[0] = -1;
  return toString(d);
}

void checkShape(const RequestInput& in, bool batching, int64_t maxBatchSize) {
  const TensorIO& t = *in.io;
  const std::string where = "input '" + t.name + "'";
  if (in.shape.size() != t.dims.size())
    badRequest(where + " has shape " + toString(in.shape) + " but the model takes rank " + std::to_string(t.dims.size()) +
               " " + expectedShape(t, batching) + (batching ? " (with the batch dim first)" : ""));
  for (size_t i = 0; i < in.shape.size(); ++i) {
    const int64_t v = in.shape[i];
    if (batching && i == 0) {
      if (v < 1 || v > maxBatchSize)
        badRequest(where + " has batch " + std::to_string(v) + " but the model takes batches of 1 to " + std::to_string(maxBatchSize));
      continue;
    }
    if (v < t.min[i] || v > t.max[i])
      badRequest(where + " has shape " + toString(in.shape) + ": dim " + std::to_string(i) + " is " + std::to_string(v) +
                 " but the model takes " + range(t.min[i], t.max[i]) + " there (shape " + expectedShape(t, batching) + ")");
  }
  const uint64_t want = static_cast<uint64_t>(volume(in.shape)) * elementSize(t.type);
  if (in.byteSize != want)
    badRequest(where + " carries " + std::to_string(in.byteSize) + " bytes but its shape " + toString(in.shape) + " of " +
               toConfigType(t.type) + " needs " + std::to_string(want));
}

}  // namespace

PendingRequest readRequest(TRITONBACKEND_Request* request, const EngineIO& io, int64_t maxBatchSize) {
  const bool batching = maxBatchSize > 0;
  PendingRequest r;
  r.request = request;
  r.inputs.resize(io.inputs.size());
  uint32_t count = 0;
  check(TRITONBACKEND_RequestInputCount(request, &count), "reading the request's inputs");
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Input* handle = nullptr;
    check(TRITONBACKEND_RequestInputByIndex(request, i, &handle), "reading a request input");
    const char* name = nullptr;
    TRITONSERVER_DataType type;
    const int64_t* shape = nullptr;
    uint32_t rank = 0;
    RequestInput in;
    check(TRITONBACKEND_InputProperties(handle, &name, &type, &shape, &rank, &in.byteSize, &in.bufferCount),
          "reading a request input's properties");
    size_t k = 0;
    while (k < io.inputs.size() && io.inputs[k].name != name) ++k;
    if (k == io.inputs.size()) badRequest(std::string("unknown input '") + name + "'");
    if (r.inputs[k].io) badRequest(std::string("input '") + name + "' is given twice");
    in.io = &io.inputs[k];
    in.handle = handle;
    in.shape.assign(shape, shape + rank);
    if (type == TRITONSERVER_TYPE_BYTES || fromTritonType(type) != in.io->type)
      badRequest(std::string("input '") + name + "' has data type " + TRITONSERVER_DataTypeString(type) +
                 " but the model takes " + TRITONSERVER_DataTypeString(toTritonType(in.io->type)));
    checkShape(in, batching, maxBatchSize);
    r.inputs[k] = std::move(in);
  }
  for (size_t k = 0; k < r.inputs.size(); ++k)
    if (!r.inputs[k].io) badRequest("missing input '" + io.inputs[k].name + "'");
  if (batching) {
    r.batch = r.inputs[0].shape[0];
    for (const RequestInput& in : r.inputs)
      if (in.shape[0] != r.batch)
        badRequest("inputs disagree on the batch: '" + r.inputs[0].io->name + "' has " + std::to_string(r.batch) + ", '" +
                   in.io->name + "' has " + std::to_string(in.shape[0]));
  }

  uint32_t outputs = 0;
  check(TRITONBACKEND_RequestOutputCount(request, &outputs), "reading the requested outputs");
  std::vector<bool> wanted(io.outputs.size(), outputs == 0);  // none named: all of them
  for (uint32_t i = 0; i < outputs; ++i) {
    const char* name = nullptr;
    check(TRITONBACKEND_RequestOutputName(request, i, &name), "reading a requested output");
    const TensorIO* t = io.findOutput(name);
    if (!t) badRequest(std::string("unknown output '") + name + "'");
    wanted[t - io.outputs.data()] = true;
  }
  for (size_t k = 0; k < io.outputs.size(); ++k)
    if (wanted[k]) r.outputs.push_back(&io.outputs[k]);
  return r;
}

bool sameRowShapes(const PendingRequest& a, const PendingRequest& b) {
  for (size_t k = 0; k < a.inputs.size(); ++k)
    if (!std::equal(a.inputs[k].shape.begin() + 1, a.inputs[k].shape.end(), b.inputs[k].shape.begin() + 1,
                    b.inputs[k].shape.end()))
      return false;
  return true;
}

}  // namespace kiln::triton
