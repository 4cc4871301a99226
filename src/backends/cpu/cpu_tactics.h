// The CPU backend's inventory of optimized kernels. Every op also has its naive reference
// kernel (OpDef::ref), used as the only tactic when no optimized tactic supports a layer.
// Each op family adds its tactics from one function, listed in cpu_backend.cpp.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace kiln {

using CpuTacticDef = TacticDef;

void addElementwiseCpuTactics(std::vector<CpuTacticDef>& v);
void addConvPoolCpuTactics(std::vector<CpuTacticDef>& v);
void addMatMulCpuTactics(std::vector<CpuTacticDef>& v);
void addNormalizationCpuTactics(std::vector<CpuTacticDef>& v);
void addReductionCpuTactics(std::vector<CpuTacticDef>& v);
void addShapeCpuTactics(std::vector<CpuTacticDef>& v);
void addResizeCpuTactics(std::vector<CpuTacticDef>& v);
void addSelectionCpuTactics(std::vector<CpuTacticDef>& v);
void addFusedCpuTactics(std::vector<CpuTacticDef>& v);

}  // namespace kiln
