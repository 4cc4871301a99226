// libFuzzer target: any bytes as a plan, with the checksum check skipped so that mutations reach
// the parser, the engine's validation and a run. Built by `make fuzz` (clang, -fsanitize=fuzzer).
#include <cstdio>
#include <cstdlib>

#include "load_and_run.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::PlanOutcome o = kiln::fuzz::loadAndRunPlan(data, size, /*verifyChecksum=*/false);
  if (!o.violation.empty()) {
    std::fprintf(stderr, "violation: %s\n", o.violation.c_str());
    std::abort();
  }
  return 0;
}
