// CUDA elementwise family: Cast between any two of the 13 kiln types (this file: float, half,
// bf16, double, bool, int8, uint8 sources; elementwise_cast_wide.cu: the wider integers).
#include "backends/cuda/elementwise_cast.cuh"

namespace kiln::cuda::ew {

void launchCast(DataType from, DataType to, const void* x, void* y, int64_t n, cudaStream_t s) {
  if (n <= 0) return;
  if (from == to) {
    if (x != y) KILN_CUDA_CHECK(cudaMemcpyAsync(y, x, static_cast<size_t>(n) * elementSize(from), cudaMemcpyDeviceToDevice, s));
    return;
  }
  if (inSet(kCastWideSources, from)) return launchCastWide(from, to, x, y, n, s);
  dispatchCudaType<kAllTypes & ~kCastWideSources>(from, [&](auto stag) { castFrom<decltype(stag)>(to, x, y, n, s); }, "CUDA elementwise");
}

}  // namespace kiln::cuda::ew
