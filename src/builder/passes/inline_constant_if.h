// If layers whose condition is known at build time become their taken branch (inline_constant_if.cpp).
#pragma once
#include <functional>

#include "builder/passes/symbolic_dims.h"
#include "kiln/network.h"

namespace kiln {

//! Runs before the network's first shape propagation: for each If layer, infers (and folds) only
//! the layers its condition depends on; when the condition is then a constant, the If's outputs
//! become Identity copies of the taken branch's tensors and the other branch, now dead, goes
//! without ever being inferred (it may be invalid for these shapes: torch exports guard reshapes
//! with `if x.shape[1] > 4`). Under dynamic shapes a condition that depends on a dynamic dim
//! has no value then, although it may have the same one at every shape the profiles allow
//! (torch's LocalResponseNorm under a dynamic batch tests a static dim of a tensor whose batch is
//! dynamic): with `samples` (the profiles' sample input shapes, asked for only when such an If
//! is left), a condition that is known and equal at every sample is taken as that constant, as
//! the shape-arithmetic folding does (symbolic_dims.h). Returns true when it changed the network.
bool inlineConstantIfs(Network& net, const std::function<InputSamples()>& samples = nullptr);

}  // namespace kiln
