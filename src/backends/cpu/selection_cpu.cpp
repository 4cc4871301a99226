// Optimized CPU tactics: selection family.
#include "backends/cpu/cpu_tactics.h"

namespace kiln {

void addSelectionCpuTactics(std::vector<CpuTacticDef>& v) { (void)v; }

}  // namespace kiln
