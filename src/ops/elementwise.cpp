// Op definitions (shape inference + naive reference kernels + ONNX normalization): elementwise family.
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerElementwiseOps(OpRegistry& r) { (void)r; }

}  // namespace kiln
