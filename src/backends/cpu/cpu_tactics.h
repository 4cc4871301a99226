// The CPU backend's inventory of optimized kernels. Every op also has its naive reference
// kernel (OpDef::ref), used as the only tactic when no optimized tactic supports a layer.
// Each op family adds its tactics from one function, listed in cpu_backend.cpp.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace kiln {

struct CpuTacticDef {
  std::string op;    //!< op name this tactic implements
  std::string name;  //!< tactic name, unique per op, e.g. "onednn", "gemm_avx2", "avx2"
  //! Whether this tactic can run the layer (types, attributes, build-time dims).
  bool (*supports)(const LayerDesc& layer) = nullptr;
  //! Creates the kernel (packs weights). Throws kiln::Error on failure.
  std::unique_ptr<Kernel> (*create)(const LayerDesc& layer) = nullptr;
};

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
