// NCHW -> NHWC copy with the channels zero-padded to `cp`, for the cuDNN conv tactics that pad
// the input channels to a multiple of 8 ("conv_half_cudnn_pad8_*" in conv_cudnn.cpp): cuDNN's NHWC
// tensor-core engines want C % 8 == 0, and a network's first conv has C = 3.
#include <string>

#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/conv_cuda_common.h"
#include "backends/cuda/cuda_util.h"

namespace kiln::cuda {

namespace {

//! One thread per pixel (n, s): reads its c channels, strided by hw (adjacent threads read
//! adjacent pixels: coalesced), and writes cp values, zeros from channel c on. VEC: cp % 8 == 0
//! and dst 16-byte aligned, so the pixel's row is written as cp / 8 16-byte stores.
template <bool VEC>
__global__ void nchwToNhwcPaddedKernel(const uint16_t* __restrict__ src, uint16_t* __restrict__ dst, int64_t pixels,
                                       int64_t c, int64_t hw, int64_t cp) {
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < pixels; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t n = p / hw, s = p - n * hw;
    const uint16_t* in = src + n * c * hw + s;
    uint16_t* out = dst + p * cp;
    if constexpr (VEC) {
      for (int64_t base = 0; base < cp; base += 8) {
        Pack16<uint16_t> pk;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          const int64_t ch = base + k;
          pk.e[k] = ch < c ? __ldg(in + ch * hw) : uint16_t(0);
        }
        reinterpret_cast<uint4*>(out)[base / 8] = pk.u;
      }
    } else {
      for (int64_t ch = 0; ch < cp; ++ch) out[ch] = ch < c ? __ldg(in + ch * hw) : uint16_t(0);
    }
  }
}

}  // namespace

void launchNchwToNhwcPadded(DataType type, const void* src, void* dst, int64_t n, int64_t c, int64_t hw, int64_t cp,
                            cudaStream_t s) {
  if (elementSize(type) != 2)
    throw UnsupportedError(std::string("NCHW -> padded NHWC: unsupported type ") + toString(type));
  if (n < 0 || c < 0 || hw < 0 || cp < c) throw Error("NCHW -> padded NHWC: bad sizes");
  const int64_t pixels = volume(Dims{n, hw});
  (void)volume(Dims{pixels, cp});  // the output's element count must fit too (throws on overflow)
  if (pixels == 0 || cp == 0) return;
  const bool vec = cp % 8 == 0 && (reinterpret_cast<uintptr_t>(dst) & 15) == 0;
  const auto* in = static_cast<const uint16_t*>(src);
  auto* out = static_cast<uint16_t*>(dst);
  if (vec)
    nchwToNhwcPaddedKernel<true><<<gridFor(pixels), 256, 0, s>>>(in, out, pixels, c, hw, cp);
  else
    nchwToNhwcPaddedKernel<false><<<gridFor(pixels), 256, 0, s>>>(in, out, pixels, c, hw, cp);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda

namespace kiln::cuda {

namespace {

//! rows[n][hp*WP + wp][(c*P + kh)*P + kw] = x[n][c][hp*P + kh][wp*P + kw]; one thread per element
//! of the output, in its order (coalesced stores; reads of one row walk P-element runs of x).
__global__ void patchesToRowsKernel(const uint16_t* __restrict__ x, uint16_t* __restrict__ rows, int64_t total, int64_t c,
                                    int64_t h, int64_t w, int64_t p) {
  const int64_t hp = h / p, wp = w / p, cpp = c * p * p;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t col = i % cpp, row = i / cpp;
    const int64_t kw = col % p, kh = (col / p) % p, ch = col / (p * p);
    const int64_t pw = row % wp, ph = (row / wp) % hp, n = row / (wp * hp);
    rows[i] = __ldg(x + ((n * c + ch) * h + ph * p + kh) * w + pw * p + kw);
  }
}

}  // namespace

void launchPatchesToRows(DataType type, const void* x, void* rows, int64_t n, int64_t c, int64_t h, int64_t w, int64_t p,
                         cudaStream_t s) {
  if (elementSize(type) != 2) throw UnsupportedError(std::string("patches to rows: unsupported type ") + toString(type));
  if (p <= 0 || h % p || w % p) throw Error("patches to rows: the image is not a whole number of patches");
  const int64_t total = volume(Dims{n, c, h, w});
  if (total == 0) return;
  patchesToRowsKernel<<<gridFor(total), 256, 0, s>>>(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(rows), total, c, h, w, p);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda
