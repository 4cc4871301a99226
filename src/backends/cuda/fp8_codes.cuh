// The device's float8e4m3fn quantization, shared by the FP8 family's kernels
// (fp8_matmul_kernels.cu) and the LayerNorm that writes codes (norm_warp_rows.cu).
#pragma once
#include <cuda_fp8.h>

#include <cstdint>

namespace kiln::cuda {

//! The saturating E4M3 code of v / scale: one IEEE float division and the hardware conversion
//! (round to nearest even, clamped to +-448, NaN kept), exactly the reference's fp8Code
//! (ops/fp8_matmul.h), as ONNX's QuantizeLinear with saturate = 1.
__device__ __forceinline__ uint8_t deviceFp8Code(float v, float scale) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(__fdiv_rn(v, scale), __NV_SATFINITE, __NV_E4M3));
}

}  // namespace kiln::cuda
