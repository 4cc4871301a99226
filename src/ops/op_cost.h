// What a layer computes and moves, from its op and concrete shapes: the model behind the per-layer
// roofline (ExecutionContext::getLayerCosts, the CLI's --dumpProfile). Counts are the work the op
// defines (a multiply-add is 2 FLOPs; every input, weight and output crosses memory once), not
// what a particular kernel does: a kernel that re-reads its inputs shows as below its roofline.
#pragma once

#include "ir/layer_desc.h"

namespace kiln {

struct OpCost {
  double flops = 0;
  double bytes = 0;
  bool matrix = false;  //!< matrix-multiply shaped work (tensor cores can run it)
};

//! The cost of one layer with concrete dims (dims still unknown count as 0).
OpCost opCost(const LayerDesc& layer);

}  // namespace kiln
