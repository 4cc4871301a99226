#include "core/thread_pool.h"

#include <algorithm>
#include <atomic>

namespace kiln {

namespace {
thread_local bool tInsidePool = false;  // nested parallelFor runs inline (no deadlock)
}

ThreadPool::ThreadPool(int threads, TeamRunner team) : team_(team) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads_ = threads;
  if (!team_)
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { workerLoop(i); });
}

namespace {
struct TeamJob {
  const std::function<void(int64_t, int64_t)>* fn;
  int64_t n, chunk;
  std::atomic<int64_t> next{0};
  std::mutex errorMu;
  std::exception_ptr error;  // the first exception of any team thread
};

//! One team thread: takes chunks until none is left (dynamic, like the workers).
void runTeamJob(void* p) {
  auto* job = static_cast<TeamJob*>(p);
  const bool outer = !tInsidePool;
  tInsidePool = true;
  for (;;) {
    int64_t b = job->next.fetch_add(job->chunk, std::memory_order_relaxed);
    if (b >= job->n) break;
    try {
      (*job->fn)(b, std::min(job->n, b + job->chunk));
    } catch (...) {  // an exception may not leave an OpenMP region: keep it for the caller
      std::lock_guard<std::mutex> lk(job->errorMu);
      if (!job->error) job->error = std::current_exception();
      job->next.store(job->n, std::memory_order_relaxed);  // no more chunks
    }
  }
  if (outer) tInsidePool = false;
}
}  // namespace

void ThreadPool::teamFor(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn) {
  TeamJob job{&fn, n, chunk};
  team_(runTeamJob, &job, static_cast<unsigned>(threads_));
  if (job.error) std::rethrow_exception(job.error);
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::workerLoop(int) {
  tInsidePool = true;
  uint64_t seen = 0;
  for (;;) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    const auto* job = job_;
    ++active_;
    for (;;) {
      int64_t b = next_;
      if (b >= n_) break;
      next_ = std::min(n_, b + chunk_);
      int64_t e = next_;
      lk.unlock();
      std::exception_ptr err;
      try {
        (*job)(b, e);
      } catch (...) {  // an exception may not leave a std::thread: keep it for the caller
        err = std::current_exception();
      }
      lk.lock();
      if (err) {
        if (!error_) error_ = err;
        next_ = n_;  // no more chunks
      }
    }
    if (--active_ == 0) done_cv_.notify_all();
  }
}

void ThreadPool::parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int threads = size();
  if (threads <= 1 || tInsidePool || n <= grain) {
    fn(0, n);
    return;
  }
  int64_t chunks = std::min<int64_t>(threads * 4, (n + grain - 1) / grain);
  int64_t chunk = (n + chunks - 1) / chunks;
  if (team_) {  // the team runner keeps its own threads per caller: no lock
    teamFor(n, chunk, fn);
    return;
  }
  std::lock_guard<std::mutex> call(callMu_);
  std::unique_lock<std::mutex> lk(mu_);
  job_ = &fn;
  n_ = n;
  chunk_ = chunk;
  next_ = 0;
  error_ = nullptr;
  ++generation_;
  cv_.notify_all();
  ++active_;
  tInsidePool = true;
  for (;;) {
    int64_t b = next_;
    if (b >= n_) break;
    next_ = std::min(n_, b + chunk_);
    int64_t e = next_;
    lk.unlock();
    try {
      fn(b, e);
    } catch (...) {  // finish the loop with the workers first: they still read job_
      lk.lock();
      if (!error_) error_ = std::current_exception();
      next_ = n_;
      continue;
    }
    lk.lock();
  }
  tInsidePool = false;
  --active_;
  done_cv_.wait(lk, [&] { return active_ == 0; });
  job_ = nullptr;
  if (error_) {
    std::exception_ptr err = error_;
    error_ = nullptr;
    lk.unlock();
    std::rethrow_exception(err);
  }
}

}  // namespace kiln
