// What the cuDNN tactics (conv_cudnn.cpp, attention_cudnn.cpp) share: the process's cuDNN handle,
// the frontend error check and the enqueue of a built plan. Built with the cuDNN frontend only.
#pragma once
#include <cuda_runtime.h>
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <mutex>
#include <string>

#include "backends/backend.h"
#include "kiln/types.h"

namespace kiln::cuda {

//! Created on first use and never destroyed (kernels may outlive any static owner). cuDNN
//! handles are not thread-safe: setting the stream and enqueueing happen under `mu`.
struct CudnnHandle {
  cudnnHandle_t h = nullptr;
  std::mutex mu;
};

inline CudnnHandle& cudnnHandle() {
  static CudnnHandle* s = [] {
    auto* c = new CudnnHandle;
    cudnnStatus_t st = cudnnCreate(&c->h);
    if (st != CUDNN_STATUS_SUCCESS) {
      delete c;
      throw Error(std::string("cudnnCreate failed: ") + cudnnGetErrorString(st));
    }
    return c;
  }();
  return *s;
}

//! Throws UnsupportedError naming the layer when a frontend step failed (the tactic cannot run it).
inline void checkCudnn(cudnn_frontend::error_t e, const LayerDesc& l, const std::string& what) {
  if (e.is_bad()) throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): cuDNN " + what + ": " + e.get_message());
}

//! Enqueues plan `plan` of `graph` on `stream` with the variant pack `ptrs` (the user tensors in
//! uid order) and `workspace`; `what` names the caller in errors.
inline void executeCudnnPlan(cudnn_frontend::graph::Graph& graph, int64_t plan, void** ptrs, int n, void* workspace,
                             cudaStream_t stream, const char* what) {
  CudnnHandle& h = cudnnHandle();
  std::lock_guard<std::mutex> lock(h.mu);
  cudnnStatus_t st = cudnnSetStream(h.h, stream);
  if (st != CUDNN_STATUS_SUCCESS) throw Error(std::string("cudnnSetStream: ") + cudnnGetErrorString(st));
  auto e = graph.execute_plan_at_index(h.h, ptrs, n, workspace, plan);
  if (e.is_bad()) throw Error(std::string(what) + " execute: " + e.get_message());
}

}  // namespace kiln::cuda
