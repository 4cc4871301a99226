// One inference request as the instance runs it: its inputs matched to the engine's (checked
// for name, type, shape against the profile, byte size), its batch and its requested outputs.
// Every check failure is a TritonError(INVALID_ARG) whose message names the tensor and the
// expectation, so that the client learns what to fix while the server keeps serving.
#pragma once
#include <string>
#include <vector>

#include "engine_io.h"
#include "triton/core/tritonbackend.h"

namespace kiln::triton {

struct RequestInput {
  const TensorIO* io = nullptr;
  TRITONBACKEND_Input* handle = nullptr;
  Dims shape;  //!< the request's shape (with its batch dim when the model batches)
  uint32_t bufferCount = 0;
  uint64_t byteSize = 0;
};

struct PendingRequest {
  TRITONBACKEND_Request* request = nullptr;
  TRITONBACKEND_Response* response = nullptr;
  int64_t batch = 1;                 //!< rows of the batch this request fills
  std::vector<RequestInput> inputs;  //!< in the engine's input order
  std::vector<const TensorIO*> outputs;  //!< requested, in the engine's output order
};

//! Reads and checks `request` against the engine's I/O; `maxBatchSize` is the configuration's
//! (0: the model does not batch, shapes are the engine's whole shapes).
PendingRequest readRequest(TRITONBACKEND_Request* request, const EngineIO& io, int64_t maxBatchSize);

//! Whether `a` and `b` can share one batch: same shapes apart from the batch dim.
bool sameRowShapes(const PendingRequest& a, const PendingRequest& b);

}  // namespace kiln::triton
