// Placing the activation arena's blocks (runtime/memory_plan.cpp builds them): offsets at which
// blocks that may be live at once never share bytes, and a lower bound on any such placement.
#pragma once
#include <cstddef>
#include <vector>

namespace kiln {

//! The blocks to place: sizes, index ranges of their accesses, and which pairs conflict (may be
//! live at once; symmetric lists).
struct ArenaBlocks {
  std::vector<size_t> bytes;
  std::vector<int> first, last;
  std::vector<std::vector<int>> conflicts;
};

//! The heaviest set of pairwise conflicting blocks found (grown greedily from each block, largest
//! first): no placement is smaller.
size_t conflictBound(const ArenaBlocks& b);

//! Sets `offsets` (one per block) and returns the arena size. Greedy placements (a block at the
//! lowest offset, or the tightest gap, free of conflicting placed blocks) in several orders, then
//! a seeded local search from the best, which stops at `lowerBound`.
size_t placeBlocks(const ArenaBlocks& b, size_t lowerBound, std::vector<size_t>& offsets);

}  // namespace kiln
