// Key-padding flags -> cuDNN SDPA sequence lengths (attention_keypad_lengths.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace kiln::cuda {

//! `flags`: bool key flags [rows, skv] with row stride `strideB` elements (0: one row for every
//! batch). Writes, on `s`: seqQ[b] = sq and seqKv[b] = the leading true flags of b's row for
//! every batch b < batch, and rightPadded[r] = 1 when row r is true-then-false with at least one
//! true (its length expresses it exactly), else 0.
void launchKeyPadLengths(const void* flags, int64_t strideB, int batch, int skv, int sq, int32_t* seqQ, int32_t* seqKv,
                         int* rightPadded, cudaStream_t s);

}  // namespace kiln::cuda
