// Optimized CPU tactics: reduction family.
#include "backends/cpu/cpu_tactics.h"

namespace kiln {

void addReductionCpuTactics(std::vector<CpuTacticDef>& v) { (void)v; }

}  // namespace kiln
