// Device step of the FP8 matmul tactic (fp8_matmul_cuda.cpp; fp8_matmul_kernels.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kiln/types.h"

namespace kiln::cuda {

//! out[i] = float8e4m3fn(x[i] / scale), saturating (ONNX QuantizeLinear, saturate = 1); x float32,
//! float16 or bfloat16; `count` a multiple of 4, `out` 4-byte aligned.
void launchQuantizeE4M3(DataType type, const void* x, int64_t count, float scale, void* out, cudaStream_t s);

}  // namespace kiln::cuda
