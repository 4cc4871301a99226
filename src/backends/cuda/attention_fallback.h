// The tensor-core flash attention tactic (attention_cuda.cpp) as the fallback inside another
// attention kernel: cuDNN SDPA takes key-padding masks as sequence lengths, which holds only for
// right-padded key flags; where a run's flags are not, the flash kernel (launched after cuDNN)
// computes the output, and where they are, its blocks return at once (FlashParams::skipWhen).
#pragma once
#include <memory>

#include "backends/backend.h"

namespace kiln::cuda {

//! The flash tensor-core kernel with `warps` warps per block for layer `l`; null when it does
//! not support `l`.
std::unique_ptr<Kernel> makeFlashTcFallback(const LayerDesc& l, int warps);
//! A fallback's state (from its reshape) skips its work in runs where the device int *skipWhen
//! is non-zero when the kernel starts.
void setFlashSkip(KernelState* state, const int* skipWhen);

}  // namespace kiln::cuda
