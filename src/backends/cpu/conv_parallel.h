// Parallel loops for the conv_pool family's own kernels (depthwise, pooling).
// When oneDNN is in the process it runs on its OpenMP team; kiln's ThreadPool is a second set of
// threads. Right after a oneDNN layer the OpenMP workers still spin (GOMP_SPINCOUNT) and would
// compete for the cores with kiln's workers; running the next small kernel on the same OpenMP
// team (already awake) avoids that oversubscription. Without an OpenMP runtime in the process
// the loop runs on kiln's ThreadPool.
#pragma once
#include <cstdint>
#include <functional>

namespace kiln {
class ThreadPool;
namespace cpu {

//! Runs fn(begin, end) over [0, n) in chunks of at least `grain`, on pool->size() threads.
void convParallelFor(ThreadPool* pool, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace cpu
}  // namespace kiln
