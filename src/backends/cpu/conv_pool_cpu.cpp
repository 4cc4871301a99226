// Optimized CPU tactics: conv_pool family.
#include "backends/cpu/cpu_tactics.h"

namespace kiln {

void addConvPoolCpuTactics(std::vector<CpuTacticDef>& v) { (void)v; }

}  // namespace kiln
