// In-place execution: which input buffer a layer's output may be written over, as declared for
// the op and the tactic chosen to run it. The memory planner (runtime/memory_plan.cpp) asks this,
// then checks the rest itself: the input dies at this layer (every other access ordered before
// it), is read through no other operand, and has the output's dims, type and byte size.
#pragma once
#include <string>

namespace kiln {

//! The input whose bytes output 0 of a layer of `op` with `inputs` inputs may overwrite when run
//! by `tactic` (a tactic-table name, "ref", or "" when none is known); -1: none. It holds only
//! when every kernel it covers reads element i of that input before it writes element i of the
//! output, and reads no other element of that input afterwards.
int inPlaceInput(const std::string& op, const std::string& tactic, size_t inputs);

}  // namespace kiln
