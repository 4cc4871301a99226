// Optimized CPU tactics: matmul family.
#include "backends/cpu/cpu_tactics.h"

namespace kiln {

void addMatMulCpuTactics(std::vector<CpuTacticDef>& v) { (void)v; }

}  // namespace kiln
