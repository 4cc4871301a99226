// Op definitions (shape inference + naive reference kernels + ONNX normalization): matmul family.
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerMatMulOps(OpRegistry& r) { (void)r; }

}  // namespace kiln
