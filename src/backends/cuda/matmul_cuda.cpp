// CUDA tactics: matmul family.
#include "backends/cuda/cuda_tactics.h"

namespace kiln {

void addMatMulCudaTactics(std::vector<CudaTacticDef>& v) { (void)v; }

}  // namespace kiln
