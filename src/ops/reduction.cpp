// Op definitions (shape inference + naive reference kernels + ONNX normalization): reduction family.
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerReductionOps(OpRegistry& r) { (void)r; }

}  // namespace kiln
