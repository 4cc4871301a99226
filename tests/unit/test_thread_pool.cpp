// ThreadPool (src/core/thread_pool.h): every index runs exactly once, whoever calls and however the
// calls overlap. Also built into kiln_tsan_tests (`make tsan`), where ThreadSanitizer checks the
// pool's hand-offs between the caller and its workers.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

using kiln::ThreadPool;

namespace {
//! Runs parallelFor over [0, n) and returns how many times each index ran.
std::vector<int> coverage(ThreadPool& pool, int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  pool.parallelFor(n, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
  });
  std::vector<int> out;
  for (auto& h : hits) out.push_back(h.load());
  return out;
}
}  // namespace

TEST(ThreadPool, EveryIndexRunsOnce) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.size(), 4);
  for (int64_t n : {1, 3, 17, 1000, 10007})
    for (int64_t grain : {1, 7, 64}) {
      std::vector<int> hits = coverage(pool, n, grain);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << "n " << n << " grain " << grain << " index " << i;
    }
}

TEST(ThreadPool, WritesOfTheWorkersAreSeenByTheCaller) {
  // Plain (non-atomic) writes in the workers, read by the caller after parallelFor returns: the
  // pool's completion must order them (ThreadSanitizer reports it if not).
  ThreadPool pool(3);
  for (int round = 0; round < 50; ++round) {
    std::vector<int64_t> v(4096, -1);
    pool.parallelFor(static_cast<int64_t>(v.size()), 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) v[static_cast<size_t>(i)] = i * round;
    });
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], static_cast<int64_t>(i) * round) << "round " << round;
  }
}

TEST(ThreadPool, TwoCallersShareOnePool) {
  ThreadPool pool(3);
  std::atomic<int> wrong{0};
  auto caller = [&](int64_t n) {
    for (int i = 0; i < 100; ++i) {
      std::vector<int> hits = coverage(pool, n + i, 4);
      for (int h : hits) wrong += h != 1;
    }
  };
  std::thread a(caller, 500), b(caller, 777);
  a.join();
  b.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(ThreadPool, NestedParallelForRunsInline) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(64 * 32);
  pool.parallelFor(64, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallelFor(32, 1, [&](int64_t b2, int64_t e2) {
        for (int64_t j = b2; j < e2; ++j) hits[static_cast<size_t>(i * 32 + j)].fetch_add(1);
      });
  });
  for (auto& h : hits) ASSERT_EQ(h.load(), 1);
}

TEST(ThreadPool, CreatedAndDestroyedRepeatedly) {
  for (int i = 0; i < 50; ++i) {
    auto pool = std::make_unique<ThreadPool>(1 + i % 4);
    if (i % 2) {
      std::vector<int> hits = coverage(*pool, 100, 1);
      for (int h : hits) ASSERT_EQ(h, 1);
    }
    pool.reset();  // some pools never ran a job: their workers still wait and must stop
  }
}

namespace {
//! A TeamRunner made of fresh std::threads (the CPU backend passes libgomp's team instead):
//! counts its calls and the threads it was asked for.
std::atomic<int> gTeamCalls{0};
std::atomic<unsigned> gTeamThreads{0};
void threadTeam(void (*body)(void*), void* arg, unsigned threads) {
  gTeamCalls.fetch_add(1);
  gTeamThreads.store(threads);
  std::vector<std::thread> others;
  for (unsigned i = 1; i < threads; ++i) others.emplace_back(body, arg);
  body(arg);
  for (auto& t : others) t.join();
}
}  // namespace

// A pool on a TeamRunner owns no threads and hands each loop to the runner, with its thread count;
// the loops keep the pool's guarantees (every index once, nested loops inline, concurrent callers).
TEST(ThreadPool, TeamRunnerRunsEveryLoop) {
  ThreadPool pool(3, threadTeam);
  EXPECT_TRUE(pool.usesTeam());
  EXPECT_EQ(pool.size(), 3);
  gTeamCalls = 0;
  for (int64_t n : {3, 17, 1000})
    for (int64_t grain : {1, 7}) {
      std::vector<int> hits = coverage(pool, n, grain);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)], 1) << "n " << n << " grain " << grain;
    }
  EXPECT_EQ(gTeamCalls.load(), 5);  // not n = 3 with grain 7: one chunk runs on the caller
  EXPECT_EQ(gTeamThreads.load(), 3u);
  gTeamCalls = 0;
  coverage(pool, 5, 8);  // one chunk: runs on the caller, no team
  EXPECT_EQ(gTeamCalls.load(), 0);
  std::vector<std::atomic<int>> nested(16 * 16);
  pool.parallelFor(16, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pool.parallelFor(16, 1, [&](int64_t b2, int64_t e2) {
        for (int64_t j = b2; j < e2; ++j) nested[static_cast<size_t>(i * 16 + j)].fetch_add(1);
      });
  });
  for (auto& h : nested) ASSERT_EQ(h.load(), 1);
  EXPECT_EQ(gTeamCalls.load(), 1);  // the inner loops ran inline
  std::atomic<int> wrong{0};
  auto caller = [&](int64_t n) {
    for (int i = 0; i < 20; ++i)
      for (int h : coverage(pool, n + i, 4)) wrong += h != 1;
  };
  std::thread a(caller, 300), b(caller, 301);
  a.join();
  b.join();
  EXPECT_EQ(wrong.load(), 0);
}

// An exception thrown by a chunk, on a worker or on the caller, comes back from parallelFor on the
// calling thread (a std::thread or an OpenMP region that it left would terminate the process), and
// the pool runs the next loop normally.
TEST(ThreadPool, AChunksExceptionIsRethrownOnTheCaller) {
  ThreadPool own(4), team(4, threadTeam);
  for (ThreadPool* pool : {&own, &team})
    for (int64_t bad : {0, 37, 999}) {  // the caller's first chunk, a middle one, the last one
      EXPECT_THROW(pool->parallelFor(1000, 1,
                                     [&](int64_t b, int64_t e) {
                                       if (b <= bad && bad < e) throw std::length_error("chunk failed");
                                     }),
                   std::length_error)
          << (pool->usesTeam() ? "team" : "own workers") << ", bad index " << bad;
      for (int h : coverage(*pool, 1000, 1)) ASSERT_EQ(h, 1);
    }
}
