// CUDA elementwise family: Cast from 16/32/64-bit integer sources (see elementwise_cast.cu).
#include "backends/cuda/elementwise_cast.cuh"

namespace kiln::cuda::ew {

void launchCastWide(DataType from, DataType to, const void* x, void* y, int64_t n, cudaStream_t s) {
  dispatchCudaType<kCastWideSources>(from, [&](auto stag) { castFrom<decltype(stag)>(to, x, y, n, s); }, "CUDA elementwise");
}

}  // namespace kiln::cuda::ew
