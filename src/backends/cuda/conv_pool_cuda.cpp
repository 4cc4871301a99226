// CUDA tactics: conv_pool family.
#include "backends/cuda/cuda_tactics.h"

namespace kiln {

void addConvPoolCudaTactics(std::vector<CudaTacticDef>& v) { (void)v; }

}  // namespace kiln
