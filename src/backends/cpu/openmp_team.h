// The OpenMP team as the CPU backend's thread pool (core/thread_pool.h, TeamRunner).
// oneDNN (Debian's build) runs its primitives on libgomp's threads. When kiln's own kernels ran on
// a second set of threads (kiln's ThreadPool workers, woken through a condition variable), the two
// took turns on the cores: after each oneDNN primitive its OpenMP workers keep spinning for a while
// (GOMP_SPINCOUNT) and compete with the pool's workers for the next layer, and every kiln loop
// paid a futex wake-up. With the backend's pool running its loops on the same OpenMP team, a layer
// of either kind finds the same threads awake.
#pragma once
#include "core/thread_pool.h"

namespace kiln::cpu {

//! libgomp's GOMP_parallel as a TeamRunner, looked up at run time (kiln does not link OpenMP
//! itself; oneDNN brings libgomp into the process); nullptr when no OpenMP runtime is loaded.
TeamRunner openMpTeam();

}  // namespace kiln::cpu
