#include "memory_copy.h"

#include <cstring>
#include <string>

#include "triton_util.h"
#ifdef KILN_TRITON_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace kiln::triton {

void copyBytes(void* dst, MemoryPlace dstPlace, const void* src, MemoryPlace srcPlace, size_t bytes, void* stream) {
  if (bytes == 0) return;
  if (isHostMemory(dstPlace.type) && isHostMemory(srcPlace.type)) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef KILN_TRITON_WITH_CUDA
  const cudaError_t rc = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream));
  if (rc != cudaSuccess)
    throw TritonError(TRITONSERVER_ERROR_INTERNAL, std::string("copy of ") + std::to_string(bytes) +
                                                       " bytes failed: " + cudaGetErrorString(rc));
#else
  (void)stream;
  throw TritonError(TRITONSERVER_ERROR_UNSUPPORTED,
                    "a tensor in GPU memory reached a kiln backend built without CUDA; send it in CPU memory");
#endif
}

}  // namespace kiln::triton
