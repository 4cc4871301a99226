// CUDA tactics: shape family.
#include "backends/cuda/cuda_tactics.h"

namespace kiln {

void addShapeCudaTactics(std::vector<CudaTacticDef>& v) { (void)v; }

}  // namespace kiln
