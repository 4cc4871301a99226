// XXH3-64 from libxxhash (Debian libxxhash-dev), compiled in: no run-time library to carry.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "plan/plan_io.h"

namespace kiln {

uint64_t planChecksum(const uint8_t* p, size_t n) { return XXH3_64bits(p, n); }

}  // namespace kiln
