// Op definitions (shape inference + naive reference kernels + ONNX normalization): shape family.
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerShapeOps(OpRegistry& r) { (void)r; }

}  // namespace kiln
