// The bookkeeping behind the shared cuDNN conv graphs (backends/cuda/plan_cache.h): which plan the
// i-th tactic runs, how many plan builds the tactics of a layer cost, and the LRU's bounds.
#include <gtest/gtest.h>

#include <set>

#include "backends/cuda/plan_cache.h"

namespace kiln {
namespace {

struct FakeGraph {};
using Entry = cuda::PlanCacheEntry<FakeGraph>;

TEST(PlanCache, TacticIndexPicksTheIthPlanThatBuilds) {
  // Plans 1 and 3 fail to build: the buildable ones are 0, 2, 4, 5.
  const std::set<int64_t> failing{1, 3};
  std::vector<int64_t> tried;
  auto build = [&](int64_t i) {
    tried.push_back(i);
    return failing.count(i) == 0;
  };
  Entry e;
  EXPECT_EQ(cuda::nthBuiltPlan(e, 0, 6, build), 0);
  EXPECT_EQ(tried, (std::vector<int64_t>{0}));
  EXPECT_EQ(cuda::nthBuiltPlan(e, 2, 6, build), 4);
  EXPECT_EQ(tried, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  // Tactic 1 after tactic 2: nothing is built again.
  EXPECT_EQ(cuda::nthBuiltPlan(e, 1, 6, build), 2);
  EXPECT_EQ(tried.size(), 5u);
  EXPECT_EQ(cuda::nthBuiltPlan(e, 3, 6, build), 5);
  // Past the last buildable plan: the first one (the best heuristic's), every plan tried once.
  EXPECT_EQ(cuda::nthBuiltPlan(e, 4, 6, build), 0);
  EXPECT_EQ(tried, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
}

TEST(PlanCache, FourTacticsBuildFourPlansNotTen) {
  int builds = 0;
  auto build = [&](int64_t) {
    ++builds;
    return true;
  };
  Entry e;
  for (int64_t tactic = 0; tactic < 4; ++tactic) EXPECT_EQ(cuda::nthBuiltPlan(e, tactic, 8, build), tactic);
  EXPECT_EQ(builds, 4);  // each tactic building its own graph's plans 0..i would have been 1+2+3+4
}

TEST(PlanCache, NoPlanBuilds) {
  int builds = 0;
  auto build = [&](int64_t) {
    ++builds;
    return false;
  };
  Entry e;
  EXPECT_EQ(cuda::nthBuiltPlan(e, 0, 3, build), -1);
  EXPECT_EQ(cuda::nthBuiltPlan(e, 2, 3, build), -1);
  EXPECT_EQ(builds, 3);
  Entry none;
  EXPECT_EQ(cuda::nthBuiltPlan(none, 0, 0, build), -1);
}

TEST(PlanCache, MakesEachKeyOnceAndEvictsTheLeastRecentlyUsed) {
  cuda::PlanCache<FakeGraph> cache(2);
  int made = 0;
  auto make = [&](Entry& e) {
    ++made;
    e.graph = std::make_shared<FakeGraph>();
  };
  auto a = cache.get("a", make);
  auto b = cache.get("b", make);
  EXPECT_EQ(made, 2);
  EXPECT_EQ(cache.get("a", make), a);  // a is now the most recent
  EXPECT_EQ(made, 2);
  auto c = cache.get("c", make);  // evicts b
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.get("a", make), a);
  EXPECT_EQ(made, 3);
  auto b2 = cache.get("b", make);  // made again, evicting c
  EXPECT_NE(b2, b);
  EXPECT_EQ(made, 4);
  EXPECT_NE(b->graph, nullptr);  // an evicted entry lives on while someone holds it
}

TEST(PlanCache, RemembersFailures) {
  cuda::PlanCache<FakeGraph> cache(4);
  int made = 0;
  auto fail = [&](Entry& e) {
    ++made;
    e.failure = "no engine";
  };
  EXPECT_EQ(cache.get("k", fail)->graph, nullptr);
  EXPECT_EQ(cache.get("k", fail)->failure, "no engine");
  EXPECT_EQ(made, 1);  // the next tactic of the layer does not ask cuDNN again
}

}  // namespace
}  // namespace kiln
