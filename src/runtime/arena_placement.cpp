// Arena placement (arena_placement.h). Dynamic storage allocation is NP-hard; greedy orders get
// close on chains, and the local search closes most of what they miss on transformer blocks.
#include "runtime/arena_placement.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>

namespace kiln {

size_t conflictBound(const ArenaBlocks& b) {
  const size_t nb = b.bytes.size();
  std::vector<std::vector<int>> sorted = b.conflicts;
  for (auto& c : sorted) std::sort(c.begin(), c.end());
  auto conflicting = [&](int x, int y) { return std::binary_search(sorted[x].begin(), sorted[x].end(), y); };
  size_t bound = 0;
  std::vector<int> set, candidates;
  for (size_t seed = 0; seed < nb; ++seed) {
    candidates = b.conflicts[seed];
    std::sort(candidates.begin(), candidates.end(), [&](int x, int y) { return b.bytes[x] > b.bytes[y]; });
    set.assign(1, static_cast<int>(seed));
    size_t bytes = b.bytes[seed];
    for (int c : candidates)
      if (std::all_of(set.begin(), set.end(), [&](int m) { return conflicting(c, m); })) {
        set.push_back(c);
        bytes += b.bytes[c];
      }
    bound = std::max(bound, bytes);
  }
  return bound;
}

namespace {

//! Places the blocks in `order`, each at the lowest offset (or the tightest gap) where it
//! conflicts with no placed block; returns the arena.
size_t placeInOrder(const ArenaBlocks& b, const std::vector<int>& order, bool tightest, std::vector<size_t>& offset) {
  const size_t nb = b.bytes.size();
  offset.assign(nb, 0);
  std::vector<char> isPlaced(nb, 0);
  size_t arena = 0;
  std::vector<std::pair<size_t, size_t>> busy;
  for (int k : order) {
    busy.clear();
    for (int q : b.conflicts[k])
      if (isPlaced[q]) busy.emplace_back(offset[q], offset[q] + b.bytes[q]);
    std::sort(busy.begin(), busy.end());
    const size_t need = b.bytes[k];
    size_t off = 0, best = SIZE_MAX, bestGap = SIZE_MAX;
    for (auto& [lo, hi] : busy) {
      if (off + need <= lo) {
        if (!tightest) break;
        if (lo - off < bestGap) bestGap = lo - off, best = off;
      }
      off = std::max(off, hi);
    }
    if (!tightest || best == SIZE_MAX) best = off;  // lowest fit, or above everything
    offset[k] = best;
    isPlaced[k] = 1;
    arena = std::max(arena, best + need);
  }
  return arena;
}

}  // namespace

size_t placeBlocks(const ArenaBlocks& b, size_t lowerBound, std::vector<size_t>& offsets) {
  const size_t nb = b.bytes.size();
  offsets.assign(nb, 0);
  if (nb == 0) return 0;
  auto length = [&](int k) { return b.last[k] - b.first[k]; };
  std::vector<int> bySize(nb);
  std::iota(bySize.begin(), bySize.end(), 0);
  std::vector<int> bySizeThenLength = bySize, byFirst = bySize, byLength = bySize;
  std::stable_sort(bySize.begin(), bySize.end(), [&](int x, int y) { return b.bytes[x] > b.bytes[y]; });
  std::stable_sort(bySizeThenLength.begin(), bySizeThenLength.end(), [&](int x, int y) {
    return b.bytes[x] != b.bytes[y] ? b.bytes[x] > b.bytes[y] : length(x) > length(y);
  });
  std::stable_sort(byFirst.begin(), byFirst.end(), [&](int x, int y) { return b.first[x] < b.first[y]; });
  std::stable_sort(byLength.begin(), byLength.end(), [&](int x, int y) {
    return length(x) != length(y) ? length(x) > length(y) : b.bytes[x] > b.bytes[y];
  });
  size_t arena = SIZE_MAX;
  std::vector<size_t> trial;
  std::vector<int> order;
  bool tightest = false;
  for (const std::vector<int>* o : {&bySize, &bySizeThenLength, &byLength, &byFirst})
    for (bool t : {false, true}) {
      const size_t a = placeInOrder(b, *o, t, trial);
      if (a < arena) arena = a, offsets = trial, order = *o, tightest = t;
    }
  // Local search: a block reaching the top of the arena moves to a random earlier place in the
  // order; the move is kept when the arena does not grow (equal arenas let the search drift), and
  // one time in 20 when it does (DeiT-S's CPU graph at batch 8 reaches its bound only so: 18.47
  // MiB without, 16.34 = the bound with).
  // Greedy orders miss packings where alternating blocks trade places (a transformer's residual
  // stream beside its MLP). Seeded, so the same graph and shapes always get the same plan; the
  // work (conflict visits) is bounded for big graphs.
  size_t work = nb;
  for (const auto& c : b.conflicts) work += c.size();
  std::mt19937 rng(12345);
  size_t current = arena, budget = size_t(1) << 24;
  std::vector<size_t> currentOffsets = offsets;
  std::vector<int> tops;
  for (size_t iter = 0; iter < 40 * nb + 2000 && current > lowerBound && budget >= work; ++iter, budget -= work) {
    tops.clear();
    for (size_t k = 0; k < nb; ++k)
      if (currentOffsets[k] + b.bytes[k] == current) tops.push_back(static_cast<int>(k));
    const int top = tops[rng() % tops.size()];
    const auto at = std::find(order.begin(), order.end(), top) - order.begin();
    std::vector<int> next = order;
    next.erase(next.begin() + at);
    next.insert(next.begin() + static_cast<std::ptrdiff_t>(rng() % static_cast<size_t>(at + 1)), top);
    const size_t a = placeInOrder(b, next, tightest, trial);
    if (a > current && rng() % 20 != 0) continue;  // now and then a worse order, to leave a local optimum
    order = std::move(next), current = a, currentOffsets = trial;
    if (a < arena) arena = a, offsets = trial;
  }
  return arena;
}

}  // namespace kiln
