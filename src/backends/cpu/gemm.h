// Single-precision GEMM for the CPU backend (own AVX2/FMA kernel, multi-threaded):
// C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C. Row-major, leading dims in elements.
// An optional epilogue (bias over rows/columns, then an activation) is applied to each block of C
// right after its last K step, while it is still in cache.
#pragma once
#include <cstdint>
#include <memory>

#include "ops/activation.h"

namespace kiln {
class ThreadPool;
namespace cpu {

//! Applied last: C[i][j] = act(C[i][j] + colBias[j] + rowBias[i]) (null biases are skipped).
struct GemmEpilogue {
  const float* colBias = nullptr;  //!< N values (e.g. MatMul's fused bias, Gemm's C as a row)
  const float* rowBias = nullptr;  //!< M values (e.g. a convolution's per-channel bias)
  Activation act;
  bool empty() const { return !colBias && !rowBias && act.kind == ActKind::kNone; }
};

//! `pool` may be null (runs on the calling thread). Inside a pool job it runs inline.
void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ThreadPool* pool,
           const GemmEpilogue& epilogue = {});

//! op(B) [K,N] packed once into the kernel's panel layout (constant weights). Immutable, cheap
//! to copy (shares its buffer), safe to use from several threads.
class PackedB {
 public:
  PackedB() = default;
  PackedB(bool transB, int64_t K, int64_t N, const float* B, int64_t ldb, ThreadPool* pool = nullptr);
  int64_t K() const { return k_; }
  int64_t N() const { return n_; }
  const float* data() const { return buf_.get(); }

 private:
  int64_t k_ = 0, n_ = 0;
  std::shared_ptr<float> buf_;
};

//! C[M,N] = alpha * op(A) * B + beta * C with B pre-packed (K and N from `B`).
void sgemmPacked(bool transA, int64_t M, float alpha, const float* A, int64_t lda, const PackedB& B, float beta,
                 float* C, int64_t ldc, ThreadPool* pool, const GemmEpilogue& epilogue = {});

//! Applies the epilogue to rows [m0,m1) x columns [n0,n1) of C (also used by non-GEMM callers).
void applyEpilogue(const GemmEpilogue& ep, float* C, int64_t ldc, int64_t m0, int64_t m1, int64_t n0, int64_t n1);

}  // namespace cpu
}  // namespace kiln
