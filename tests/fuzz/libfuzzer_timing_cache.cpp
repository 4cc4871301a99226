// libFuzzer target: any bytes as a timing cache (its checksum rewritten, so that mutations reach
// the parser), then a build that uses it. Built by `make fuzz`.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "load_and_run.h"
#include "kiln/types.h"
#include "plan/timing_cache_format.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> b(data, data + size);
  try {
    kiln::rewriteTimingCacheChecksum(b.data(), b.size());
  } catch (const kiln::Error&) {
    return 0;  // no magic: refused before any parsing
  }
  kiln::fuzz::CacheOutcome o = kiln::fuzz::loadAndUseTimingCache(b.data(), b.size());
  if (!o.violation.empty()) {
    std::fprintf(stderr, "violation: %s\n", o.violation.c_str());
    std::abort();
  }
  return 0;
}
