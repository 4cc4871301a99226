// Op definitions (shape inference + naive reference kernels + ONNX normalization): selection family.
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerSelectionOps(OpRegistry& r) { (void)r; }

}  // namespace kiln
