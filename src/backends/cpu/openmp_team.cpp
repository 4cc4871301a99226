#include "backends/cpu/openmp_team.h"

#include <dlfcn.h>

namespace kiln::cpu {

namespace {

// libgomp's entry point behind `#pragma omp parallel` (stable ABI since GCC 4.9).
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

void runOnTeam(void (*body)(void*), void* arg, unsigned threads) { gompParallel()(body, arg, threads, 0); }

}  // namespace

TeamRunner openMpTeam() { return gompParallel() ? runOnTeam : nullptr; }

}  // namespace kiln::cpu
