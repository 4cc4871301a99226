// CUDA tactics: normalization family.
#include "backends/cuda/cuda_tactics.h"

namespace kiln {

void addNormalizationCudaTactics(std::vector<CudaTacticDef>& v) { (void)v; }

}  // namespace kiln
