// The conv_pool op family: Conv/ConvTranspose (ops/conv.cpp) and the pooling ops + LRN
// (ops/pool.cpp). Window geometry shared with the CPU tactics lives in ops/conv_geometry.h.
#include "ops/op_registry.h"

namespace kiln {

void registerConvOps(OpRegistry& r);
void registerPoolOps(OpRegistry& r);

void registerConvPoolOps(OpRegistry& r) {
  registerConvOps(r);
  registerPoolOps(r);
}

}  // namespace kiln
