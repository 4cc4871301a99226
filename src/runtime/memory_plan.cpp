// Activation memory planning: offsets of every intermediate tensor in one arena.
//
// Two tensors may share bytes when every access of one completes before the other is first
// written. "Completes before" is the execution's happens-before order: layers on one stream run in
// index order, and a layer waits for the event recorded after each producer on another stream
// (ContextImpl::createStreams), so lifetimes are exact across auxiliary streams (a tensor is free
// once the layers ordered after its last reader start), not pinned for the whole run.
//
// In place: a layer whose op and tactic allow it (backends/in_place.h: elementwise ops over input
// 0, convs over their residual) writes its output over that input when the input has the output's
// dims and type and every other access of it happens before the layer.
//
// Placement (arena_placement.cpp): greedy in several orders (each block at the lowest offset, or
// the tightest gap, free of conflicting blocks), then a local search from the best.
// It stays close to the lower bound reported beside it: the peak, over the layers in index order,
// of the bytes of the tensors live there, or with auxiliary streams the heaviest set of tensors
// found that may be live at once (concurrent branches).
#include <algorithm>
#include <cstdint>
#include <cstddef>

#include "backends/in_place.h"
#include "runtime/arena_placement.h"
#include "runtime/engine_graph.h"

namespace kiln {

namespace {

constexpr size_t kAlign = 64;

//! Bit sets over layers: reach[i] holds the layers that start only after layer i completed.
class HappensBefore {
 public:
  HappensBefore(const EngineGraph& g) : n_(g.layers.size()), words_((n_ + 63) / 64), bits_(n_ * words_, 0) {
    std::vector<int> producer(g.tensors.size(), -1);
    for (size_t i = 0; i < n_; ++i)
      for (int t : g.layers[i].outputs) producer[t] = static_cast<int>(i);
    std::vector<std::vector<int>> succ(n_);
    std::vector<int> lastOnStream;
    for (size_t i = 0; i < n_; ++i) {
      const int s = g.layers[i].stream;
      if (s >= static_cast<int>(lastOnStream.size())) lastOnStream.resize(s + 1, -1);
      if (lastOnStream[s] >= 0) succ[lastOnStream[s]].push_back(static_cast<int>(i));
      lastOnStream[s] = static_cast<int>(i);
      for (int t : g.layers[i].inputs) {  // an event wait (ContextImpl::createStreams)
        const int p = t >= 0 ? producer[t] : -1;
        if (p >= 0 && g.layers[p].stream != s) succ[p].push_back(static_cast<int>(i));
      }
    }
    // Layers are topologically ordered: successors have larger indices, so one backward sweep.
    for (size_t i = n_; i-- > 0;)
      for (int j : succ[i]) {
        set(i, j);
        uint64_t* dst = row(i);
        const uint64_t* src = row(j);
        for (size_t w = 0; w < words_; ++w) dst[w] |= src[w];
      }
  }
  //! Whether layer a completes before layer b starts.
  bool before(int a, int b) const { return (row(a)[b / 64] >> (b % 64)) & 1; }

 private:
  uint64_t* row(size_t i) { return bits_.data() + i * words_; }
  const uint64_t* row(size_t i) const { return bits_.data() + i * words_; }
  void set(size_t i, size_t j) { row(i)[j / 64] |= uint64_t(1) << (j % 64); }
  size_t n_, words_;
  std::vector<uint64_t> bits_;
};

//! A block of arena memory: one tensor, or several sharing bytes (views, in-place outputs).
struct Block {
  size_t bytes = 0;
  std::vector<int> writers;   //!< layers writing it (the producer, in-place layers)
  std::vector<int> accesses;  //!< every layer reading or writing it
  int first = -1, last = -1;  //!< index range of the accesses
};

}  // namespace

MemoryPlan planMemory(const EngineGraph& g, const ResolvedShapes& r, size_t profile) {
  const size_t n = g.tensors.size();
  MemoryPlan p;
  p.offsets.assign(n, -1);
  p.liveBytes.assign(g.layers.size(), 0);
  auto root = [&](int t) { return r.aliasOf[t] >= 0 ? r.aliasOf[t] : t; };
  // The tactic of `profile` decides in-place execution; a graph without choices (tests) has none.
  // (at these shapes: the choice's size bucket).
  auto tacticOf = [&](const EngineLayer& l, size_t li) {
    if (profile >= l.choices.size()) return std::string();
    return li < r.layers.size() ? l.choices[profile].tacticFor(tacticBucketSize(r.layers[li])) : l.choices[profile].tactic;
  };
  auto inArena = [&](int t) {
    const EngineTensor& et = g.tensors[t];
    return !et.isInput && !et.isOutput && !et.value.valid() && r.aliasOf[t] < 0 && isStatic(r.tensors[t].dims);
  };
  auto bytesOf = [&](int t) {
    const size_t b = static_cast<size_t>(volume(r.tensors[t].dims)) * elementSize(r.tensors[t].type);
    return (b + kAlign - 1) / kAlign * kAlign;
  };

  // Blocks: one per arena tensor; in-place outputs join their input's block.
  std::vector<int> blockOf(n, -1);
  std::vector<Block> blocks;
  auto blockFor = [&](int t) {
    if (blockOf[t] < 0) {
      blockOf[t] = static_cast<int>(blocks.size());
      blocks.push_back(Block{bytesOf(t), {}, {}, -1, -1});
    }
    return blockOf[t];
  };
  auto touch = [&](int b, int layer, bool write) {
    Block& k = blocks[b];
    k.accesses.push_back(layer);
    if (write) k.writers.push_back(layer);
    k.first = k.first < 0 ? layer : std::min(k.first, layer);
    k.last = std::max(k.last, layer);
  };
  // Readers of each tensor (after view resolution), to know a layer is an input's last reader.
  std::vector<std::vector<int>> readers(n);
  for (size_t i = 0; i < g.layers.size(); ++i)
    if (!r.skipped(i))
      for (int t : g.layers[i].inputs)
        if (t >= 0) readers[root(t)].push_back(static_cast<int>(i));
  const HappensBefore hb(g);
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const EngineLayer& l = g.layers[i];
    const int li = static_cast<int>(i);
    if (r.skipped(i)) continue;
    for (int t : l.inputs) {
      if (t < 0) continue;
      const int s = root(t);
      if (!inArena(s)) continue;
      // A host-computed value read by a runtime layer is materialized once when shapes change,
      // not before every run: it is written "before layer 0" and must survive every layer, or the
      // next run reads what a later layer wrote over it (a dynamic BERT's mask indices, on its
      // second enqueue). Accessed by the last layer too, it shares bytes with nothing.
      if (blockOf[s] < 0) {
        touch(blockFor(s), 0, true);
        touch(blockOf[s], static_cast<int>(g.layers.size()) - 1, false);
      }
      touch(blockOf[s], li, false);
    }
    for (size_t k = 0; k < l.outputs.size(); ++k) {
      const int t = l.outputs[k];
      if (r.aliasOf[t] >= 0) {  // a Concat's input: this layer writes into the Concat's output
        const int s = root(t);
        if (inArena(s)) touch(blockFor(s), li, true);
        continue;
      }
      if (!inArena(t)) continue;
      int b = -1;
      const int over = k == 0 ? inPlaceInput(l.op, tacticOf(l, li), l.inputs.size()) : -1;
      if (over >= 0 && static_cast<size_t>(over) < l.inputs.size() && l.inputs[over] >= 0) {
        const int x = root(l.inputs[over]);
        bool lastReader = inArena(x) && blockOf[x] >= 0 && bytesOf(x) == bytesOf(t) &&
                          r.tensors[x].dims == r.tensors[t].dims && r.tensors[x].type == r.tensors[t].type;
        for (size_t j = 0; lastReader && j < l.inputs.size(); ++j)  // x read again as another operand
          lastReader = static_cast<int>(j) == over || l.inputs[j] < 0 || root(l.inputs[j]) != x;
        // Every reader of x, and every access of the other tensors of x's block (earlier in-place
        // results), happens before this layer.
        if (lastReader)
          for (int rd : readers[x]) lastReader = lastReader && (rd == li || hb.before(rd, li));
        if (lastReader)
          for (int a : blocks[blockOf[x]].accesses) lastReader = lastReader && (a == li || hb.before(a, li));
        if (lastReader) b = blockOf[x];
      }
      if (b >= 0) blockOf[t] = b;
      else b = blockFor(t);
      touch(b, li, true);
    }
  }

  // Two blocks conflict unless every access of one happens before every write of the other.
  auto allBefore = [&](const Block& a, const Block& b) {
    for (int x : a.accesses)
      for (int w : b.writers)
        if (!hb.before(x, w)) return false;
    return true;
  };
  auto conflict = [&](const Block& a, const Block& b) {
    if (a.last < b.first) return !allBefore(a, b);  // index order: only a before b is possible
    if (b.last < a.first) return !allBefore(b, a);
    return true;
  };
  // Conflicts once (blocks that overlap in index range always conflict); then the lower bound
  // (arena_placement.h: the live peak, or with auxiliary streams the heaviest set of blocks found
  // that may be live at once), then the placement, which stops searching once it reaches it.
  const size_t nb = blocks.size();
  ArenaBlocks ab;
  ab.conflicts.resize(nb);
  for (size_t a2 = 0; a2 < nb; ++a2) {
    ab.bytes.push_back(blocks[a2].bytes);
    ab.first.push_back(blocks[a2].first);
    ab.last.push_back(blocks[a2].last);
    for (size_t b2 = a2 + 1; b2 < nb; ++b2)
      if (conflict(blocks[a2], blocks[b2])) {
        ab.conflicts[a2].push_back(static_cast<int>(b2));
        ab.conflicts[b2].push_back(static_cast<int>(a2));
      }
  }
  // The live curve in index order and its peak: no placement of these blocks can be smaller.
  for (const Block& k : blocks)
    for (int i = std::max(k.first, 0); i <= k.last; ++i) p.liveBytes[i] += k.bytes;
  for (size_t b : p.liveBytes) p.lowerBound = std::max(p.lowerBound, b);
  // With auxiliary streams, blocks of concurrent branches conflict although their index ranges do
  // not overlap, so that peak can be out of reach; sets of pairwise conflicting blocks bound it.
  // (On one stream the conflicts are the index overlaps: the same peak.)
  if (g.auxStreams > 0) p.lowerBound = std::max(p.lowerBound, conflictBound(ab));
  std::vector<size_t> offset;
  p.arenaBytes = placeBlocks(ab, p.lowerBound, offset);
  for (size_t t = 0; t < n; ++t)
    if (blockOf[t] >= 0) p.offsets[t] = static_cast<int64_t>(offset[blockOf[t]]);
  for (size_t t = 0; t < n; ++t)
    if (r.aliasOf[t] >= 0 && p.offsets[r.aliasOf[t]] >= 0) p.offsets[t] = p.offsets[r.aliasOf[t]] + r.aliasOffset[t];
  p.freedAfter.assign(g.layers.size(), {});
  for (size_t b = 0; b < blocks.size(); ++b)
    if (blocks[b].last >= 0) p.freedAfter[blocks[b].last].emplace_back(offset[b], blocks[b].bytes);
  return p;
}

}  // namespace kiln
