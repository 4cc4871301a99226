// Op definitions (shape inference + naive reference kernels + ONNX normalization): recurrent family.
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerRecurrentOps(OpRegistry& r) { (void)r; }

}  // namespace kiln
