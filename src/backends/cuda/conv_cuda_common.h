// Shared by the CUDA conv_pool tactics: the fused activation as device code sees it, the
// epilogue kernel (bias + residual + activation in place), the padded NCHW -> NHWC copy.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/device_copy.h"
#include "ops/activation.h"

namespace kiln::cuda {

//! A fused activation for device code (ActKind as an int: no host types in kernels).
struct DevAct {
  int kind = 0;  //!< static_cast<int>(ActKind)
  float alpha = 0.f, beta = 0.f;
};
inline DevAct toDevAct(const Activation& a) { return DevAct{static_cast<int>(a.kind), a.alpha, a.beta}; }

//! Alignment of a kernel's own scratch region and of the library workspace placed after it in one
//! workspace allocation (the padded conv input, the patch rows).
constexpr int64_t kWorkspaceAlign = 256;

//! v rounded up to a multiple of m (v >= 0, m > 0); throws on overflow.
inline int64_t roundUp(int64_t v, int64_t m) {
  if (v < 0 || v > std::numeric_limits<int64_t>::max() - (m - 1)) throw Error("workspace size overflow");
  return (v + m - 1) / m * m;
}

//! y[n, c, s] = act(y[n, c, s] + bias[c] + res[n, c, s]) in place, for `planes` = N*C planes of
//! `size` elements; `bias` and `res` may be null. T is float, __half or __nv_bfloat16 (`type`).
void launchConvEpilogue(DataType type, void* y, const void* bias, const void* res, int64_t planes, int64_t channels,
                        int64_t size, DevAct act, cudaStream_t stream);

//! The non-overlapping P x P patches of an NCHW image batch (H, W multiples of P) as GEMM rows
//! (conv_pad.cu): rows[n][patch][(c, kh, kw)] for a conv whose kernel equals its stride (ViT's
//! patch embedding). 2-byte types.
void launchPatchesToRows(DataType type, const void* x, void* rows, int64_t n, int64_t c, int64_t h, int64_t w, int64_t p,
                         cudaStream_t s);

//! An im2col problem over 3 spatial axes (1-D / 2-D convs padded with leading axes of size 1).
struct Im2colGeometry {
  int64_t channels = 0;  //!< all input channels (a group's rows are contiguous in col)
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1}, stride[3] = {1, 1, 1}, dilation[3] = {1, 1, 1},
          pad[3] = {0, 0, 0};  //!< pad: the leading (begin) padding
};
//! col[n][c][kd][kh][kw][p] = x[n][c][window p's tap (kd, kh, kw)] (0 in the padding) for `images`
//! NC(D)HW images (conv_im2col.cu). 2-byte types.
void launchIm2col(DataType type, const void* x, void* col, const Im2colGeometry& g, int64_t images, cudaStream_t s);

//! dst[n, s, k] = k < c ? src[n, k, s] : 0 for `n` images of `hw` pixels (conv_pad.cu): an NCHW
//! tensor of `c` channels copied channels last with the channels zero-padded to `cp` >= c. 2-byte
//! types (float16, bfloat16); 16-byte stores when cp % 8 == 0 and dst is 16-byte aligned.
void launchNchwToNhwcPadded(DataType type, const void* src, void* dst, int64_t n, int64_t c, int64_t hw, int64_t cp,
                            cudaStream_t s);

//! A float16/bfloat16 1x1 conv (stride 1, no padding, group 1, constant weights) of 1x1 images
//! at batch > 1 (or a batch unknown at build time): a GEMM, which conv_half_cublaslt_1x1_* runs in any layouts (conv_gemm.cpp). cuDNN
//! 9.14's engines computed these wrong at batch 128 on the H100 (squeeze-excitation FCs of
//! EfficientNet-B0: every engine config, NCHW and channels-last; right at batch 1), so the cuDNN
//! tactics refuse them.
bool isPixelGemmConv(const LayerDesc& l);

//! Whether Conv/ConvTranspose's fused activation (if any) is one kiln knows.
bool knownActivation(const LayerDesc& l);
//! Float types the CUDA conv tactics compute (float32, float16, bfloat16), same for every input.
bool convFloatTypes(const LayerDesc& l);

//! Device copy of a constant input (weights, bias), optionally repacked for the kernel; shared
//! (device_copy.h) with every other kernel that uploads the same constant with the same packing
//! (the tactics timed for a layer, several optimization profiles). Null when the input is absent
//! or not constant (then the kernel reads io.in[i]).
class DeviceConstant {
 public:
  DeviceConstant() = default;
  explicit DeviceConstant(const HostTensor& t) : copy_(sharedDeviceCopy(t, "", nullptr)) {}
  //! `packing` names `pack` with its parameters (see sharedDeviceCopy).
  DeviceConstant(const HostTensor& t, const std::string& packing, const Packer& pack) : copy_(sharedDeviceCopy(t, packing, pack)) {}
  const void* get() const { return copy_ ? copy_->ptr : nullptr; }
  //! The uploaded copy, or the run-time buffer when none was uploaded.
  const void* orInput(const KernelIO& io, size_t i) const { return copy_ ? copy_->ptr : (i < io.in.size() ? io.in[i].data : nullptr); }

 private:
  std::shared_ptr<const DeviceCopy> copy_;
};

}  // namespace kiln::cuda
