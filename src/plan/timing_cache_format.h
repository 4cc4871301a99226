// Timing-cache file internals shared with tests and fuzzers (the format is in timing_cache.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

namespace kiln {

//! Recomputes a timing cache file's checksum in place, so a tampered payload reaches the parser
//! behind it (tests, fuzzing). Throws kiln::Error for data that is no timing cache.
void rewriteTimingCacheChecksum(uint8_t* data, size_t size);

}  // namespace kiln
