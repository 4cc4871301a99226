// Op definitions (shape inference + naive reference kernels + ONNX normalization): attention family.
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerAttentionOps(OpRegistry& r) { (void)r; }

}  // namespace kiln
