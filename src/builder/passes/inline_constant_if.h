// If layers whose condition is known at build time become their taken branch (inline_constant_if.cpp).
#pragma once
#include "kiln/network.h"

namespace kiln {

//! Runs before the network's first shape propagation: for each If layer, infers (and folds) only
//! the layers its condition depends on; when the condition is then a constant, the If's outputs
//! become Identity copies of the taken branch's tensors and the other branch, now dead, goes
//! without ever being inferred (it may be invalid for these shapes: torch exports guard reshapes
//! with `if x.shape[1] > 4`). Returns true when it changed the network.
bool inlineConstantIfs(Network& net);

}  // namespace kiln
