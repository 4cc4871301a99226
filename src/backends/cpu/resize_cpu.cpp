// Optimized CPU tactics: resize family.
#include "backends/cpu/cpu_tactics.h"

namespace kiln {

void addResizeCpuTactics(std::vector<CpuTacticDef>& v) { (void)v; }

}  // namespace kiln
