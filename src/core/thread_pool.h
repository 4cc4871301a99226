// A fixed pool of worker threads for CPU kernels. parallelFor splits [0, n) into chunks and
// runs them on the workers and the calling thread; it returns when all are done.
// A pool made with a TeamRunner owns no threads: it hands every loop to that runner (the CPU
// backend passes the OpenMP team oneDNN runs on, cpu_backend.cpp), so that kiln's kernels and
// oneDNN's primitives run on one set of threads instead of two taking turns on the cores.
// An exception thrown by a chunk (on any thread) stops the handing out of chunks and is rethrown
// by parallelFor on the calling thread once every thread is done: it never terminates the process.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

//! A fork-join runner: calls body(arg) on `threads` threads (the caller among them) and returns
//! when every call has returned (libgomp's GOMP_parallel without its flags argument).
using TeamRunner = void (*)(void (*body)(void*), void* arg, unsigned threads);

class ThreadPool {
 public:
  explicit ThreadPool(int threads, TeamRunner team = nullptr);  //!< total threads including the caller; 0 = hardware
  ~ThreadPool();
  int size() const { return threads_; }
  //! Whether the loops run on a TeamRunner (no threads of the pool's own).
  bool usesTeam() const { return team_ != nullptr; }
  //! Runs fn(begin, end) over [0, n) in chunks of at least `grain` items.
  void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void workerLoop(int index);
  void teamFor(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn);
  int threads_ = 1;
  TeamRunner team_ = nullptr;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0, chunk_ = 0, next_ = 0;
  int active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;  // the first exception of the running loop (under mu_)
  std::mutex callMu_;  // one parallelFor at a time per pool
};

}  // namespace kiln
