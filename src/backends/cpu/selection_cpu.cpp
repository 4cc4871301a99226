// Optimized CPU tactics: selection family.
// ArgMax/ArgMin, TopK and CumSum have no optimized tactic yet: the CPU backend runs their
// reference kernels (ops/selection.cpp), which is what this empty inventory means.
#include "backends/cpu/cpu_tactics.h"

namespace kiln {

void addSelectionCpuTactics(std::vector<CpuTacticDef>& v) { (void)v; }

}  // namespace kiln
