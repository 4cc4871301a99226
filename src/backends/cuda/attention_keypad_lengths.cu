// Key-padding flags as cuDNN SDPA's padding mask (attention_cudnn.cpp): per batch, the number of
// leading true flags is the key sequence length, and whether the row is exactly "true then false"
// with at least one true (right padding) says whether that length expresses the flags. One block
// per row of flags; the results stay on the device (cuDNN and the fallback read them there).
#include <cstdint>

#include "backends/cuda/attention_keypad_lengths.h"
#include "backends/cuda/cuda_util.h"

namespace kiln::cuda {

namespace {

__global__ void __launch_bounds__(256) keyPadLengthsKernel(const unsigned char* __restrict__ flags, int64_t strideB, int batch,
                                                           int skv, int sq, int32_t* seqQ, int32_t* seqKv, int* rightPadded) {
  __shared__ int firstFalse, lastTrue;
  const int row = blockIdx.x;
  if (threadIdx.x == 0) firstFalse = skv, lastTrue = -1;
  __syncthreads();
  const unsigned char* f = flags + row * strideB;
  int ff = skv, lt = -1;
  for (int j = threadIdx.x; j < skv; j += blockDim.x) {
    if (f[j]) lt = j;
    else if (ff == skv) ff = j;
  }
  if (ff < skv) atomicMin(&firstFalse, ff);
  if (lt >= 0) atomicMax(&lastTrue, lt);
  __syncthreads();
  if (threadIdx.x != 0) return;
  rightPadded[row] = firstFalse >= 1 && lastTrue < firstFalse ? 1 : 0;
  // One row of flags for every batch (strideB 0): every batch gets its length.
  for (int b = strideB != 0 ? row : 0; b < (strideB != 0 ? row + 1 : batch); ++b) {
    seqQ[b] = sq;
    seqKv[b] = firstFalse;
  }
}

}  // namespace

void launchKeyPadLengths(const void* flags, int64_t strideB, int batch, int skv, int sq, int32_t* seqQ, int32_t* seqKv,
                         int* rightPadded, cudaStream_t s) {
  const int rows = strideB != 0 ? batch : 1;
  if (rows <= 0) return;
  keyPadLengthsKernel<<<rows, 256, 0, s>>>(static_cast<const unsigned char*>(flags), strideB, batch, skv, sq, seqQ, seqKv,
                                           rightPadded);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda
