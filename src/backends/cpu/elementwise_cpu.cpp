// Optimized CPU tactics: elementwise family.
#include "backends/cpu/cpu_tactics.h"

namespace kiln {

void addElementwiseCpuTactics(std::vector<CpuTacticDef>& v) { (void)v; }

}  // namespace kiln
