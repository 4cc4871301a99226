// Copies between the memory kinds Triton hands over (CPU, pinned CPU, GPU) and the engine's
// buffers. Host-to-host copies are memcpy; anything touching a GPU goes through the CUDA runtime
// (cudaMemcpyDefault, asynchronous on the instance's stream), which a build without CUDA refuses
// with a clear error.
#pragma once
#include <cstddef>
#include <cstdint>

#include "triton/core/tritonserver.h"

namespace kiln::triton {

struct MemoryPlace {
  TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
  int64_t id = 0;  //!< the GPU for TRITONSERVER_MEMORY_GPU
  bool operator==(const MemoryPlace& o) const { return type == o.type && (type != TRITONSERVER_MEMORY_GPU || id == o.id); }
};

inline bool isHostMemory(TRITONSERVER_MemoryType t) { return t != TRITONSERVER_MEMORY_GPU; }
//! Whether memory at `have` can be handed to an engine whose buffers live at `engine` as is.
inline bool engineCanUse(MemoryPlace have, MemoryPlace engine) {
  return isHostMemory(engine.type) ? isHostMemory(have.type) : have == engine;
}

//! Copies `bytes` from `src` to `dst`; `stream` orders copies that touch a GPU (null: the
//! default stream). Throws TritonError when GPU memory is involved and this build has no CUDA.
void copyBytes(void* dst, MemoryPlace dstPlace, const void* src, MemoryPlace srcPlace, size_t bytes, void* stream);

//! memcpy between host buffers, split over up to 4 threads when large (one thread copies ~10 GB/s:
//! a 19 MB ResNet-50 batch would take longer than the GPU computes it).
void copyHostParallel(void* dst, const void* src, size_t bytes);

}  // namespace kiln::triton
