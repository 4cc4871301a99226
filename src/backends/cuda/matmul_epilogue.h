// The matmul family's own epilogue for what cuBLASLt cannot fuse: in place on the output Y,
//   Y = act((zeroFirst ? 0 : Y) + scale * C) [* G]
// with C broadcast to Y's shape (a general MatMul bias, Gemm's C with beta), any kiln activation
// (Sigmoid, Tanh, Clip, LeakyRelu, erf-Gelu, ...) and G, a multiplier of Y's shape (a gated
// linear unit's other half: SwiGLU's up projection).
#pragma once
#include <cuda_runtime.h>

#include "backends/backend.h"
#include "ops/activation.h"

namespace kiln::cuda {

constexpr int kPostMaxRank = 8;

struct MatMulPost {
  bool zeroFirst = false;  //!< the matmul did not run (K == 0): Y's contents are ignored
  Activation act;
  bool hasC = false;
  float cScale = 1.f;
  //! Y's dims with C's broadcast strides, size-1 dims dropped and compatible dims merged.
  int rank = 0;
  int64_t dims[kPostMaxRank] = {};
  int64_t cStrides[kPostMaxRank] = {};
  bool hasGate = false;  //!< multiply by G (same shape and layout as Y) after the activation
  bool needed() const { return zeroFirst || hasC || hasGate || act.kind != ActKind::kNone; }
};

//! Makes C (of dims `cDims`, broadcast unidirectionally to `outDims`) the post's addend.
//! Throws UnsupportedError when the broadcast pattern needs more than kPostMaxRank dims.
void setPostAddend(MatMulPost& p, const Dims& cDims, const Dims& outDims, float scale);

//! Enqueues the post pass over the n elements of y (type float, half or bf16); `gate` is read when
//! p.hasGate.
void launchMatMulPost(DataType t, void* y, int64_t n, const void* c, const MatMulPost& p, cudaStream_t s,
                      const void* gate = nullptr);

}  // namespace kiln::cuda
