// Op definitions (shape inference + naive reference kernels + ONNX normalization): normalization family.
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerNormalizationOps(OpRegistry& r) { (void)r; }

}  // namespace kiln
