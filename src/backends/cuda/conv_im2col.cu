// im2col for the grouped / large-kernel conv GEMM tactic (conv_im2col_gemm.cpp): the columns of
// NCHW (or NCDHW) images as GEMM B matrices, col[n][c][kd][kh][kw][p] (p: the output position),
// zeros where the window reaches into the padding. 2-byte element types, copied as bits.
#include "backends/cuda/conv_cuda_common.h"
#include "backends/cuda/cuda_util.h"

namespace kiln::cuda {

namespace {

//! One thread per column element (adjacent threads: adjacent output positions, so the writes are
//! coalesced and the reads of one kernel tap walk the input row with the conv's stride).
__global__ void im2colKernel(const uint16_t* __restrict__ x, uint16_t* __restrict__ col, const Im2colGeometry g, int64_t total) {
  const int64_t kvol = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int64_t outVol = g.out[0] * g.out[1] * g.out[2];
  const int64_t inVol = g.in[0] * g.in[1] * g.in[2];
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = e;
    const int64_t p = r % outVol;
    r /= outVol;
    const int64_t k = r % kvol;
    r /= kvol;
    const int64_t c = r % g.channels, n = r / g.channels;
    const int64_t ow = p % g.out[2], oh = (p / g.out[2]) % g.out[1], od = p / (g.out[2] * g.out[1]);
    const int64_t kw = k % g.kernel[2], kh = (k / g.kernel[2]) % g.kernel[1], kd = k / (g.kernel[2] * g.kernel[1]);
    const int64_t iz = od * g.stride[0] - g.pad[0] + kd * g.dilation[0];
    const int64_t iy = oh * g.stride[1] - g.pad[1] + kh * g.dilation[1];
    const int64_t ix = ow * g.stride[2] - g.pad[2] + kw * g.dilation[2];
    const bool inside = iz >= 0 && iz < g.in[0] && iy >= 0 && iy < g.in[1] && ix >= 0 && ix < g.in[2];
    col[e] = inside ? __ldg(x + (n * g.channels + c) * inVol + (iz * g.in[1] + iy) * g.in[2] + ix) : uint16_t(0);
  }
}

}  // namespace

void launchIm2col(DataType type, const void* x, void* col, const Im2colGeometry& g, int64_t images, cudaStream_t s) {
  if (elementSize(type) != 2) throw Error("im2col: 2-byte element types only");
  const int64_t total = images * g.channels * g.kernel[0] * g.kernel[1] * g.kernel[2] * g.out[0] * g.out[1] * g.out[2];
  if (total <= 0) return;
  im2colKernel<<<gridFor(total), 256, 0, s>>>(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(col), g, total);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda
