// CUDA tactics: attention family.
#include "backends/cuda/cuda_tactics.h"

namespace kiln {

void addAttentionCudaTactics(std::vector<CudaTacticDef>& v) { (void)v; }

}  // namespace kiln
