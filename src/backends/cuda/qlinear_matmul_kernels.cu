// Device steps of the CUDA QLinearMatMul tactics (see qlinear_matmul_kernels.h).
#include "backends/cuda/qlinear_matmul_kernels.h"

#include <algorithm>

#include "backends/cuda/activation_math.cuh"
#include "backends/cuda/cuda_util.h"

namespace kiln::cuda {

namespace {

constexpr int kWarp = 32;
constexpr int kTile = 16;  // dp4a kernel: 16 x 16 outputs per block, K in steps of 16 words

//! One warp per row: shift, pad and (optionally) sum.
__global__ void prepareAKernel(const uint8_t* __restrict__ a, bool aUnsigned, int64_t rows, int64_t K, int64_t Kp,
                               int8_t* __restrict__ out, int32_t* __restrict__ rowSums) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t r = blockIdx.x * int64_t(blockDim.x / kWarp) + threadIdx.x / kWarp; r < rows; r += warps) {
    int32_t sum = 0;
    for (int64_t k = lane; k < Kp; k += kWarp) {
      int32_t v = 0;
      if (k < K) v = aUnsigned ? int32_t(a[r * K + k]) - 128 : int32_t(static_cast<int8_t>(a[r * K + k]));
      out[r * Kp + k] = static_cast<int8_t>(v);
      sum += v;
    }
    if (!rowSums) continue;
    for (int off = kWarp / 2; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off);
    if (lane == 0) rowSums[r] = sum;
  }
}

//! Tiled dp4a product: block (16, 16) computes dot[16 rows, 16 columns], blockIdx.x over rows.
__global__ void dotDp4aKernel(const int32_t* __restrict__ a, const int32_t* __restrict__ w, int64_t rows, int64_t Np, int64_t Kw,
                              int32_t* __restrict__ dot) {
  __shared__ int32_t as[kTile][kTile + 1], ws[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t r0 = int64_t(blockIdx.x) * kTile, n0 = int64_t(blockIdx.y) * kTile;
  int32_t acc = 0;
  for (int64_t k0 = 0; k0 < Kw; k0 += kTile) {
    const int64_t k = k0 + tx;
    as[ty][tx] = r0 + ty < rows && k < Kw ? a[(r0 + ty) * Kw + k] : 0;
    ws[ty][tx] = n0 + ty < Np && k < Kw ? w[(n0 + ty) * Kw + k] : 0;
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTile; ++j) acc = __dp4a(as[ty][j], ws[tx][j], acc);
    __syncthreads();
  }
  if (r0 + ty < rows && n0 + tx < Np) dot[(r0 + ty) * Np + n0 + tx] = acc;
}

//! QLinearParams::output (ops/qlinear.h), operation for operation.
__device__ __forceinline__ float requantize(int64_t acc, float xs, float ws, const QMatMulEpilogue& e) {
  const float xw = xs * ws;
  const float facc = static_cast<float>(acc);
  if (e.floatOut) return applyActivation(e.act, e.alpha, e.beta, facc * xw);
  float v;
  if (e.act == ActKind::kNone || e.act == ActKind::kRelu) {
    v = facc * (xw / e.yScale);
    if (e.act == ActKind::kRelu && v < 0.f) v = 0.f;
  } else {
    v = applyActivation(e.act, e.alpha, e.beta, facc * xw) / e.yScale;
  }
  const double q = rint(static_cast<double>(v)) + e.yZero;  // round half to even
  return static_cast<float>(q < e.lo ? e.lo : (q > e.hi ? e.hi : q));
}

__global__ void epilogueKernel(const int32_t* __restrict__ dot, int64_t ldDot, const int32_t* __restrict__ rowSums, int64_t rows,
                               int64_t N, QMatMulEpilogue e, void* __restrict__ y) {
  const int64_t total = rows * N;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / N, n = i % N;
    int64_t acc = int64_t(dot[r * ldDot + n]) + e.channelTerm[n];
    if (rowSums) acc -= int64_t(e.wZero[n]) * rowSums[r];
    const float v = requantize(acc, e.xScale[e.xCount == 1 ? 0 : r % e.xCount], e.wScale[n], e);
    if (e.floatOut) static_cast<float*>(y)[i] = v;
    else if (e.lo < 0) static_cast<int8_t*>(y)[i] = static_cast<int8_t>(v);
    else static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(v);
  }
}

}  // namespace

void launchQPrepareA(const void* a, bool aUnsigned, int64_t rows, int64_t K, int64_t Kp, int8_t* aOut, int32_t* rowSums,
                     cudaStream_t s) {
  if (rows == 0) return;
  constexpr unsigned kBlock = 256;
  const unsigned blocks = gridFor(rows * kWarp, kBlock);
  prepareAKernel<<<blocks, kBlock, 0, s>>>(static_cast<const uint8_t*>(a), aUnsigned, rows, K, Kp, aOut, rowSums);
  KILN_CUDA_CHECK_LAUNCH();
}

void launchQDotDp4a(const int8_t* a, const int8_t* w, int64_t rows, int64_t Np, int64_t Kp, int32_t* dot, cudaStream_t s) {
  if (rows == 0 || Np == 0) return;
  const dim3 grid(static_cast<unsigned>((rows + kTile - 1) / kTile), static_cast<unsigned>((Np + kTile - 1) / kTile));
  dotDp4aKernel<<<grid, dim3(kTile, kTile), 0, s>>>(reinterpret_cast<const int32_t*>(a), reinterpret_cast<const int32_t*>(w), rows,
                                                    Np, Kp / 4, dot);
  KILN_CUDA_CHECK_LAUNCH();
}

void launchQEpilogue(const int32_t* dot, int64_t ldDot, const int32_t* rowSums, int64_t rows, int64_t N, const QMatMulEpilogue& e,
                     void* y, cudaStream_t s) {
  if (rows * N == 0) return;
  epilogueKernel<<<gridFor(rows * N), 256, 0, s>>>(dot, ldDot, rowSums, rows, N, e, y);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda
