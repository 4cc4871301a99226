// Op definitions (shape inference + naive reference kernels + ONNX normalization): resize family.
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerResizeOps(OpRegistry& r) { (void)r; }

}  // namespace kiln
