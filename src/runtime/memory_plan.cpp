// Activation memory planning: offsets of every intermediate tensor in one arena.
//
// Two tensors may share bytes when every access of one completes before the other is first
// written. "Completes before" is the execution's happens-before order: layers on one stream run in
// index order, and a layer waits for the event recorded after each producer on another stream
// (ContextImpl::createStreams), so lifetimes are exact across auxiliary streams (a tensor is free
// once the layers ordered after its last reader start), not pinned for the whole run.
//
// In place: an elementwise layer whose input has the output's size and type, and which is that
// input's last reader, writes its output over the input (each element is read before it is
// written, at the same index, by every kernel of these ops).
//
// Placement is greedy (each block at the lowest offset, or the tightest gap, free of conflicting
// blocks), tried in several orders (by size, by lifetime, by first use); the smallest arena wins.
// It stays close to the lower bound reported beside it: the peak, over the layers in index order,
// of the bytes of the tensors live there.
#include <algorithm>
#include <cstdint>
#include <cstddef>
#include <numeric>

#include "runtime/engine_graph.h"

namespace kiln {

namespace {

constexpr size_t kAlign = 64;

//! Ops whose every kernel reads element i of input 0 before writing element i of the output, and
//! nothing else of input 0 afterwards: they may run in place on input 0.
bool runsInPlace(const std::string& op) {
  static const char* kOps[] = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Gelu", "HardSwish", "HardSigmoid", "Elu",
                               "Selu", "Celu", "Softplus", "Softsign", "Mish", "Erf", "Exp", "Log", "Sqrt", "Neg",
                               "Abs", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Clip", "Add",
                               "Sub", "Mul", "Div", "Pow", "Max", "Min", "PointwiseChain"};
  for (const char* o : kOps)
    if (op == o) return true;
  return false;
}

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
  bool hostValue = false;     //!< holds a host-computed value: written once per shape change, read by every run
};

}  // namespace

MemoryPlan planMemory(const EngineGraph& g, const ResolvedShapes& r) {
  const size_t n = g.tensors.size();
  MemoryPlan p;
  p.offsets.assign(n, -1);
  p.liveBytes.assign(g.layers.size(), 0);
  auto root = [&](int t) { return r.aliasOf[t] >= 0 ? r.aliasOf[t] : t; };
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
  // Host-computed values read by runtime layers: a context materializes them once per shape
  // change (user-managed arenas: per enqueue), so their bytes must survive every run: no layer
  // runs in place over one and no other tensor shares its bytes, or every enqueue after the
  // first would read what a later layer of the previous run wrote there.
  std::vector<bool> hostValue(n, false);
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
      // A host-computed value read by a runtime layer is materialized before the run: it is
      // written "before layer 0".
      if (blockOf[s] < 0) {
        touch(blockFor(s), 0, true);
        hostValue[s] = true;
        blocks[blockOf[s]].hostValue = true;
      }
      touch(blockOf[s], li, false);
    }
    for (size_t k = 0; k < l.outputs.size(); ++k) {
      const int t = l.outputs[k];
      if (!inArena(t)) continue;
      int b = -1;
      if (k == 0 && runsInPlace(l.op) && !l.inputs.empty() && l.inputs[0] >= 0) {
        const int x = root(l.inputs[0]);
        bool lastReader = inArena(x) && blockOf[x] >= 0 && !hostValue[x] && bytesOf(x) == bytesOf(t) &&
                          r.tensors[x].dims == r.tensors[t].dims && r.tensors[x].type == r.tensors[t].type;
        for (size_t j = 1; lastReader && j < l.inputs.size(); ++j)  // x read again as another operand
          lastReader = l.inputs[j] < 0 || root(l.inputs[j]) != x;
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
    if (a.hostValue || b.hostValue) return true;
    if (a.last < b.first) return !allBefore(a, b);  // index order: only a before b is possible
    if (b.last < a.first) return !allBefore(b, a);
    return true;
  };
  // Conflicts once (blocks that overlap in index range always conflict), then several placement
  // orders; the smallest arena wins. Each is greedy: a block takes the lowest offset (or the
  // tightest gap) where it conflicts with nothing placed.
  const size_t nb = blocks.size();
  std::vector<std::vector<int>> conflicts(nb);
  for (size_t a2 = 0; a2 < nb; ++a2)
    for (size_t b2 = a2 + 1; b2 < nb; ++b2)
      if (conflict(blocks[a2], blocks[b2])) {
        conflicts[a2].push_back(static_cast<int>(b2));
        conflicts[b2].push_back(static_cast<int>(a2));
      }
  auto place = [&](const std::vector<int>& order, bool tightest, std::vector<size_t>& offset) {
    offset.assign(nb, 0);
    std::vector<char> isPlaced(nb, 0);
    size_t arena = 0;
    std::vector<std::pair<size_t, size_t>> busy;
    for (int b2 : order) {
      busy.clear();
      for (int q : conflicts[b2])
        if (isPlaced[q]) busy.emplace_back(offset[q], offset[q] + blocks[q].bytes);
      std::sort(busy.begin(), busy.end());
      const size_t need = blocks[b2].bytes;
      size_t off = 0, best = SIZE_MAX, bestGap = SIZE_MAX;
      for (auto& [lo, hi] : busy) {
        if (off + need <= lo) {
          if (!tightest) break;
          if (lo - off < bestGap) bestGap = lo - off, best = off;
        }
        off = std::max(off, hi);
      }
      if (!tightest || best == SIZE_MAX) best = off;  // lowest fit, or above everything
      offset[b2] = best;
      isPlaced[b2] = 1;
      arena = std::max(arena, best + need);
    }
    return arena;
  };
  std::vector<int> bySize(nb), byFirst(nb), byLength(nb);
  std::iota(bySize.begin(), bySize.end(), 0);
  byFirst = byLength = bySize;
  std::stable_sort(bySize.begin(), bySize.end(), [&](int a2, int b2) { return blocks[a2].bytes > blocks[b2].bytes; });
  std::stable_sort(byFirst.begin(), byFirst.end(), [&](int a2, int b2) { return blocks[a2].first < blocks[b2].first; });
  std::stable_sort(byLength.begin(), byLength.end(), [&](int a2, int b2) {
    const int la = blocks[a2].last - blocks[a2].first, lb = blocks[b2].last - blocks[b2].first;
    return la != lb ? la > lb : blocks[a2].bytes > blocks[b2].bytes;
  });
  std::vector<size_t> offset, trial;
  p.arenaBytes = SIZE_MAX;
  for (const std::vector<int>* order : {&bySize, &byLength, &byFirst})
    for (bool tightest : {false, true}) {
      const size_t arena = place(*order, tightest, trial);
      if (arena < p.arenaBytes) p.arenaBytes = arena, offset = trial;
    }
  if (nb == 0) p.arenaBytes = 0;
  for (size_t t = 0; t < n; ++t)
    if (blockOf[t] >= 0) p.offsets[t] = static_cast<int64_t>(offset[blockOf[t]]);
  for (size_t t = 0; t < n; ++t)
    if (r.aliasOf[t] >= 0) p.offsets[t] = p.offsets[r.aliasOf[t]];
  // The live curve in index order and its peak: no placement of these blocks can be smaller.
  for (const Block& k : blocks)
    for (int i = std::max(k.first, 0); i <= k.last; ++i) p.liveBytes[i] += k.bytes;
  for (size_t b : p.liveBytes) p.lowerBound = std::max(p.lowerBound, b);
  p.freedAfter.assign(g.layers.size(), {});
  for (size_t b = 0; b < blocks.size(); ++b)
    if (blocks[b].last >= 0) p.freedAfter[blocks[b].last].emplace_back(offset[b], blocks[b].bytes);
  return p;
}

}  // namespace kiln
