// Optimized CPU tactics: shape family.
#include "backends/cpu/cpu_tactics.h"

namespace kiln {

void addShapeCpuTactics(std::vector<CpuTacticDef>& v) { (void)v; }

}  // namespace kiln
