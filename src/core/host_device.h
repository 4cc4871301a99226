// KILN_HOST_DEVICE marks a function that both host code and CUDA kernels call (shared op
// semantics such as ops/det_lu.h, ops/quantize.h): __host__ __device__ under nvcc, nothing
// under the host compiler.
#pragma once

#ifdef __CUDACC__
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif
