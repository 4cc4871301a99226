// Kernel factories of the CUDA tactics that data-dependent detectors need (tactic_table.cpp names
// them): RoiAlign (roi_align_cuda.cu) and a run-time If (if_cuda.cu). Apart from cuda_tactics.h so
// that adding them does not recompile every CUDA family.
#pragma once
#include "backends/backend.h"

namespace kiln::cuda {

KernelFactory roiAlignCuda();
//! A run-time If (both branches ran) passes the taken branch's outputs on.
KernelFactory ifCuda();

}  // namespace kiln::cuda
