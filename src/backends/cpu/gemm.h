// Single-precision GEMM for the CPU backend (own AVX2/FMA kernel, multi-threaded):
// C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C. Row-major, leading dims in elements.
#pragma once
#include <cstdint>

namespace kiln {
class ThreadPool;
namespace cpu {

void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ThreadPool* pool);

}  // namespace cpu
}  // namespace kiln
