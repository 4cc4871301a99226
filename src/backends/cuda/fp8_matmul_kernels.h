// Device steps of the FP8 family (fp8_matmul_cuda.cpp; fp8_matmul_kernels.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kiln/types.h"
#include "ops/activation.h"

namespace kiln::cuda {

//! out[i] = float8e4m3fn(act(x[i]) / scale), saturating (ONNX QuantizeLinear, saturate = 1); x
//! float32, float16 or bfloat16. Vectorized when count % 4 == 0 and the buffers allow it.
void launchQuantizeE4M3(DataType type, const void* x, int64_t count, float scale, void* out, cudaStream_t s,
                        const Activation& act = {});

}  // namespace kiln::cuda
