// Op definitions (shape inference + naive reference kernels + ONNX normalization): conv_pool family.
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerConvPoolOps(OpRegistry& r) { (void)r; }

}  // namespace kiln
