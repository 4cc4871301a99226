// Stream planning: a layer that is not the first consumer of its first input's producer starts
// a branch that may run on an auxiliary stream, unless it is large enough to fill the GPU alone; a
// layer otherwise continues the stream of that producer. Cross-stream dependencies become event
// waits in the context.
#include <algorithm>
#include <map>

#include "runtime/engine_graph.h"

namespace kiln {

namespace {

//! A layer writing this many elements has the blocks to occupy every SM by itself (H100 / H200:
//! 132 SMs x 2048 threads = 270K threads, 16 elements each), so a branch it starts gains nothing
//! from an auxiliary stream and would cost memory: the tensors the branch and the main stream read
//! stay live until the streams join (ResNet-50-GN's and ResNeXt-50's downsample convs at batch 64 kept
//! the block's 24.5 MiB input live through the whole block, 10% over PyTorch's compiled peak).
constexpr int64_t kGpuFillingElements = int64_t(1) << 22;

bool fillsTheGpu(const EngineGraph& g, const EngineLayer& l) {
  int64_t elements = 0;
  for (int t : l.outputs) {
    const Dims& d = g.tensors[t].dims;
    if (std::any_of(d.begin(), d.end(), [](int64_t v) { return v < 0; })) return false;  // dynamic: unknown
    elements += volume(d);
  }
  return elements >= kGpuFillingElements;
}

}  // namespace

void planStreams(EngineGraph& g, int maxAux) {
  for (auto& l : g.layers) l.stream = 0;
  g.auxStreams = 0;
  if (maxAux <= 0 || g.device != DeviceType::kGPU) return;
  std::vector<int> producer(g.tensors.size(), -1);
  for (size_t i = 0; i < g.layers.size(); ++i)
    for (int t : g.layers[i].outputs) producer[t] = static_cast<int>(i);
  // Continuation is tracked per source tensor: the first layer reading a tensor continues its
  // producer's stream (the main stream for network inputs); each later reader starts a branch.
  std::map<int, bool> continued;
  int next = 0, used = 0;
  for (size_t i = 0; i < g.layers.size(); ++i) {
    EngineLayer& l = g.layers[i];
    int src = -1;
    for (int t : l.inputs)
      if (t >= 0 && !g.tensors[t].value.valid()) {
        src = t;
        break;
      }
    if (src < 0) continue;  // reads only constants: the main stream
    const int from = producer[src] >= 0 ? g.layers[producer[src]].stream : 0;
    if (!continued[src] || fillsTheGpu(g, l)) {
      continued[src] = true;
      l.stream = from;
    } else {
      l.stream = 1 + (next++ % maxAux);  // a new branch: round-robin over the aux streams
      used = std::max(used, l.stream);
    }
  }
  g.auxStreams = used;
}

}  // namespace kiln
