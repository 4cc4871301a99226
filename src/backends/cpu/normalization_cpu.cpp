// Optimized CPU tactics: normalization family.
#include "backends/cpu/cpu_tactics.h"

namespace kiln {

void addNormalizationCpuTactics(std::vector<CpuTacticDef>& v) { (void)v; }

}  // namespace kiln
