// Page-locked host memory: the CUDA backend's allocateHost and the host fallback's staging
// buffers take it from here (one allocation rule for both).
#pragma once
#include <cstddef>

#include <cuda_runtime_api.h>

#include "backends/cuda/cuda_util.h"

namespace kiln::cuda {

//! Page-locked bytes on the current device, at least 64 (never null, even for an empty tensor).
inline void* allocatePinned(size_t bytes) {
  void* p = nullptr;
  KILN_CUDA_CHECK(cudaMallocHost(&p, bytes < 64 ? 64 : bytes));
  return p;
}
inline void releasePinned(void* p) { cudaFreeHost(p); }

}  // namespace kiln::cuda
