// The process's cuDNN handle, shared by the cuDNN tactics (conv_cudnn.cpp, attention_cudnn.cpp).
#pragma once
#include <cudnn.h>

#include <mutex>
#include <string>

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

}  // namespace kiln::cuda
