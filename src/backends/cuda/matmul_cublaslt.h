// cuBLASLt wrapper for the matmul family: one process-wide handle, and LtPlan = the descriptors,
// layouts and chosen algorithm of one row-major GEMM problem (built at reshape, run at execute).
#pragma once
#include <memory>
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kiln/types.h"

namespace kiln::cuda {

//! The process-wide cuBLASLt handle (created on first use; thread-safe).
cublasLtHandle_t ltHandle();

//! Epilogue activations cuBLASLt applies itself.
enum class LtAct { kNone, kRelu, kGeluTanh };

//! One row-major problem: D[b] = act(alpha * op(A[b]) @ op(B[b]) + beta * C[b] + bias), for b in
//! [0, batch), with op(A) [M,K] and op(B) [K,N]. A is stored [M,K] (or [K,M] when transA), B is
//! stored [K,N] (or [N,K] when transB), C and D are [M,N]; all contiguous row-major matrices.
struct GemmProblem {
  //! Of A, B, C, D and bias (float, half or bf16), or kINT8: int8 A and B, int32 D, int32
  //! accumulation (cuBLASLt's IMMA path: transB only, one matrix, no C, bias or activation;
  //! M, N, K and the pointers should be multiples of 16 for the tensor-core kernels).
  DataType type = DataType::kFLOAT;
  //! A and B are float8e4m3fn codes and `type` (float32, float16, bfloat16) is C's, D's and the
  //! bias's: the FP8 tensor cores (Hopper), FP32 accumulation, transB only ("TN"), K a multiple
  //! of 16; the per-tensor scales go into alpha; a bias epilogue only with a 16-bit D; fast
  //! accumulation (partial sums kept at the tensor cores' precision, ~2^-8 relative).
  bool fp8 = false;
  //! With fp8 and a 16-bit `type`: D holds float8e4m3fn codes of dScale[0] * act(...) (a device
  //! float; cuBLASLt's saturating conversion), C (unused) and the bias are `type`.
  bool fp8Out = false;
  const float* dScale = nullptr;
  bool tf32 = true;                  //!< float32 only: TF32 tensor cores allowed
  int64_t M = 0, N = 0, K = 0;
  bool transA = false, transB = false;
  int64_t batch = 1;                             //!< strided batch count
  int64_t strideA = 0, strideB = 0, strideD = 0;  //!< elements between batches (0: broadcast A/B)
  float alpha = 1.f, beta = 0.f;
  bool useC = false;  //!< C (strided like D) is read with beta; otherwise beta must be 0
  bool bias = false;  //!< a row of N values added to every row of D (fused BIAS epilogue)
  LtAct act = LtAct::kNone;
};

//! Descriptors + algorithm for one GemmProblem. `algoIndex` picks the i-th heuristic candidate
//! (the best one when fewer exist). `alignBytes` is the pointer alignment the algorithm may
//! assume for every buffer (16 for the fast variant, the element size for the safe one).
class LtPlan {
 public:
  LtPlan(const GemmProblem& p, int algoIndex, unsigned alignBytes, size_t maxWorkspace);
  ~LtPlan();
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  size_t workspace() const { return workspace_; }
  unsigned alignment() const { return align_; }
  //! Enqueues D = ... on `s`. `c` may be null when the problem does not use C.
  void run(const void* a, const void* b, const void* c, void* d, const void* bias, void* ws, cudaStream_t s);

 private:
  void destroy();
  GemmProblem p_;
  unsigned align_ = 16;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr, ld_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  size_t workspace_ = 0;
};

//! One GemmProblem (no C, bias or FP8 scales) planned twice: for 16-byte aligned A, B and D, and,
//! where cuBLASLt has one, for element-aligned buffers (an image at an odd offset, an X read in
//! place); the conv tactics whose A is the weights and B the input (conv_gemm.cpp,
//! conv_im2col_gemm.cpp).
class AlignedLtPlans {
 public:
  AlignedLtPlans(const GemmProblem& p, int algoIndex, size_t maxWorkspace);
  size_t workspace() const;
  //! D = A B with the fast plan when a, b and d are 16-byte aligned, else the element-aligned
  //! one; throws naming `who` when neither applies.
  void run(const void* a, const void* b, void* d, void* ws, cudaStream_t s, const char* who) const;

 private:
  std::unique_ptr<LtPlan> fast_, safe_;
};

}  // namespace kiln::cuda
