// A fixed pool of worker threads for CPU kernels. parallelFor splits [0, n) into chunks and
// runs them on the workers and the calling thread; it returns when all are done.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);  //!< total threads including the caller; 0 = hardware
  ~ThreadPool();
  int size() const { return static_cast<int>(workers_.size()) + 1; }
  //! Runs fn(begin, end) over [0, n) in chunks of at least `grain` items.
  void parallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void workerLoop(int index);
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t, int64_t)>* job_ = nullptr;
  int64_t n_ = 0, chunk_ = 0, next_ = 0;
  int active_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
  std::mutex callMu_;  // one parallelFor at a time per pool
};

}  // namespace kiln
