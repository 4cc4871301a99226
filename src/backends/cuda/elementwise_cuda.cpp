// CUDA tactics: elementwise family.
#include "backends/cuda/cuda_tactics.h"

namespace kiln {

void addElementwiseCudaTactics(std::vector<CudaTacticDef>& v) { (void)v; }

}  // namespace kiln
