// Stream planning: a layer that is not the first consumer of its first input's producer starts
// a branch that may run on an auxiliary stream; a layer otherwise continues the stream of that
// producer. Cross-stream dependencies become event waits in the context.
#include <map>

#include "runtime/engine_graph.h"

namespace kiln {

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
    if (!continued[src]) {
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
