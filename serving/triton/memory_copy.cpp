#include "memory_copy.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

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

void copyHostParallel(void* dst, const void* src, size_t bytes) {
  constexpr size_t kMinPerThread = size_t(4) << 20;  // below this, starting a thread costs more than it saves
  const size_t threads = std::min<size_t>({4, std::max(1u, std::thread::hardware_concurrency()), bytes / kMinPerThread});
  if (threads <= 1) {
    if (bytes) std::memcpy(dst, src, bytes);
    return;
  }
  const size_t chunk = (bytes + threads - 1) / threads;
  auto part = [&](size_t i) {
    const size_t begin = i * chunk, end = std::min(bytes, begin + chunk);
    if (begin < end) std::memcpy(static_cast<uint8_t*>(dst) + begin, static_cast<const uint8_t*>(src) + begin, end - begin);
  };
  std::vector<std::thread> helpers;
  for (size_t i = 1; i < threads; ++i) helpers.emplace_back(part, i);
  part(0);
  for (std::thread& t : helpers) t.join();
}

}  // namespace kiln::triton
