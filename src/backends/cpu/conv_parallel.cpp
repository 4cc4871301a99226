#include "backends/cpu/conv_parallel.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>

#include "core/thread_pool.h"

namespace kiln::cpu {

namespace {

// libgomp's entry point behind `#pragma omp parallel` (stable ABI since GCC 4.9), looked up at
// run time so kiln does not link OpenMP itself.
using GompParallel = void (*)(void (*)(void*), void*, unsigned, unsigned);

GompParallel gompParallel() {
  static GompParallel fn = [] {
    void* s = dlsym(RTLD_DEFAULT, "GOMP_parallel");
    if (!s)
      if (void* h = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD)) s = dlsym(h, "GOMP_parallel");
    return reinterpret_cast<GompParallel>(s);
  }();
  return fn;
}

struct TeamJob {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t n, chunk;
  std::atomic<int64_t> next{0};
};

void runTeamJob(void* p) {
  auto* job = static_cast<TeamJob*>(p);
  for (;;) {
    int64_t b = job->next.fetch_add(job->chunk, std::memory_order_relaxed);
    if (b >= job->n) return;
    (*job->fn)(b, std::min(job->n, b + job->chunk));
  }
}

}  // namespace

void convParallelFor(ThreadPool* pool, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int threads = pool->size();
  GompParallel team = gompParallel();
  if (!team || threads <= 1 || n <= grain) {
    pool->parallelFor(n, grain, fn);
    return;
  }
  // Same chunking as ThreadPool::parallelFor: about 4 chunks per thread for load balance.
  int64_t chunks = std::min<int64_t>(int64_t(threads) * 4, (n + grain - 1) / grain);
  TeamJob job{&fn, n, (n + chunks - 1) / chunks};
  team(runTeamJob, &job, static_cast<unsigned>(threads), 0);
}

}  // namespace kiln::cpu
