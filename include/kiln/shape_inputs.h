// Which engine inputs decide output shapes by their values (TensorRT's isShapeInferenceIO).
#pragma once
#include <string>

#include "kiln/runtime.h"

namespace kiln {

//! True when the values (not only the shape) of input `name` decide tensor shapes: a context reads
//! such an input from its memory (a synchronous copy) before it resolves shapes or runs, so the
//! data must be there first. Throws kiln::Error for a name that is not an input.
bool isShapeInferenceInput(const Engine& engine, const std::string& name);

}  // namespace kiln
