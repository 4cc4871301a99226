// Built cuDNN graphs shared by the tactics that differ only in which engine config they run.
// "conv_fp_cudnn_<i>" runs the i-th engine config that builds; without sharing, tactic i built
// its own graph, asked the heuristics again and built plans 0..i, so a conv layer's four tactics
// built ten plans (runtime-fusion engines compile kernels for each) where four suffice, and
// layers of one shape (repeated blocks) built the same plans again. Header-only and generic over
// the graph type, so that the bookkeeping is tested without a GPU (test_plan_cache.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kiln::cuda {

//! One graph (or why it could not be made) and the plans of it tried so far.
template <typename G>
struct PlanCacheEntry {
  std::shared_ptr<G> graph;     //!< null: making it failed (`failure` says why)
  std::string failure;
  std::vector<int64_t> built;   //!< indices of the plans that built, ascending
  int64_t next = 0;             //!< the next plan index not yet tried
};

//! The `index`-th plan of `e` that builds, or its first one when fewer build (the tactics past the
//! last config then repeat the best heuristic's, as before); -1 when none of the `count` builds.
//! Tries plans from e.next on with `build(i)` (true: plan i built) only as far as needed.
template <typename G>
int64_t nthBuiltPlan(PlanCacheEntry<G>& e, int64_t index, int64_t count, const std::function<bool(int64_t)>& build) {
  while (static_cast<int64_t>(e.built.size()) <= index && e.next < count) {
    const int64_t i = e.next++;
    if (build(i)) e.built.push_back(i);
  }
  if (e.built.empty()) return -1;
  return static_cast<int64_t>(e.built.size()) > index ? e.built[static_cast<size_t>(index)] : e.built.front();
}

//! The last `capacity` entries by key, most recently used first. Entries stay alive while a
//! kernel state holds their graph; the cache only bounds what it keeps for later tactics (a
//! server building many engines must not grow without end). Not thread-safe: callers hold the
//! cuDNN handle's mutex.
template <typename G>
class PlanCache {
 public:
  using Entry = PlanCacheEntry<G>;
  explicit PlanCache(size_t capacity) : capacity_(capacity) {}

  //! The entry of `key`, made by `make` (which fills graph or failure) when absent.
  std::shared_ptr<Entry> get(const std::string& key, const std::function<void(Entry&)>& make) {
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (it->first != key) continue;
      lru_.splice(lru_.begin(), lru_, it);
      return lru_.front().second;
    }
    auto e = std::make_shared<Entry>();
    make(*e);
    lru_.emplace_front(key, e);
    while (lru_.size() > capacity_) lru_.pop_back();
    return e;
  }

  size_t size() const { return lru_.size(); }

 private:
  size_t capacity_;
  std::list<std::pair<std::string, std::shared_ptr<Entry>>> lru_;
};

}  // namespace kiln::cuda
