// The device steps of the CUDA QLinearMatMul tactics (qlinear_matmul_cuda.cpp), in order:
//   1. prepare A: int8/uint8 [rows, K] -> signed int8 [rows, Kp] (uint8 shifted by -128, K padded
//      with zeros to Kp, a multiple of 16) and, where a weight zero point is not 0, each row's sum;
//   2. the int32 product dot[rows, Np] = A_s @ W_s^T: cuBLASLt's IMMA kernels, or the dp4a kernel
//      here (W_s: the constant weights, shifted and padded the same way, stored [Np, Kp]);
//   3. the epilogue: the zero-point corrections that turn dot into the reference's accumulator,
//      sum_k (a - a_zp)(w - w_zp[n]) + bias[n]
//        = dot - w_zp_s[n] * rowsum_s[r] + (bias[n] - a_zp_s * colsum_s[n] + K a_zp_s w_zp_s[n]),
//      (the last term precomputed per channel), then QLinearParams::output's rounding, in the same
//      float operations (ops/qlinear.h), written as int8, uint8 or float32.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/activation.h"

namespace kiln::cuda {

//! Device pointers and scalars of step 3 (pointers into the kernel's constant block).
struct QMatMulEpilogue {
  const int64_t* channelTerm = nullptr;  //!< [N]: bias - a_zp_s colsum_s + K a_zp_s w_zp_s
  const int32_t* wZero = nullptr;        //!< [N]: shifted weight zero points (read with rowSums)
  const float* wScale = nullptr;         //!< [N]
  const float* xScale = nullptr;         //!< [xCount]: one, or one per row of a matrix
  int64_t xCount = 1;
  bool floatOut = false;
  float yScale = 1.f;
  int32_t yZero = 0, lo = 0, hi = 0;     //!< lo < 0: int8 output, else uint8
  ActKind act = ActKind::kNone;          //!< kNone, kRelu or kClip (exact on both sides)
  float alpha = 0.f, beta = 0.f;
};

//! Step 1. `rowSums` may be null (not needed).
void launchQPrepareA(const void* a, bool aUnsigned, int64_t rows, int64_t K, int64_t Kp, int8_t* aOut, int32_t* rowSums,
                     cudaStream_t s);
//! Step 2 without cuBLASLt: dot[r, n] = sum_k a[r, k] w[n, k] (Kp a multiple of 4, 4-byte aligned).
void launchQDotDp4a(const int8_t* a, const int8_t* w, int64_t rows, int64_t Np, int64_t Kp, int32_t* dot, cudaStream_t s);
//! Step 3: y[rows, N] from dot (row stride ldDot); `rowSums` null when every weight zero point is 0.
void launchQEpilogue(const int32_t* dot, int64_t ldDot, const int32_t* rowSums, int64_t rows, int64_t N,
                     const QMatMulEpilogue& e, void* y, cudaStream_t s);

}  // namespace kiln::cuda
