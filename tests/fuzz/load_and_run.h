// Loads a (possibly damaged) plan, timing cache or ONNX model and, when it loads, runs it on the CPU in each of its first
// optimization profiles at the profile's min shapes, as a user would: the contract under test is
// that a plan is refused with a kiln::Error that says why, or runs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::fuzz {

struct PlanOutcome {
  bool loaded = false;  //!< deserialized and instantiated
  bool ran = false;     //!< every profile tried ran to the end
  std::string error;    //!< the kiln::Error that refused it (load or run)
  //! Not the contract: an exception other than kiln::Error, or an Error with an empty message.
  std::string violation;
};

//! `verifyChecksum` false skips the plan checksum (libFuzzer: random bytes reach the parser).
PlanOutcome loadAndRunPlan(const uint8_t* data, size_t size, bool verifyChecksum);

struct CacheOutcome {
  bool loaded = false;
  std::string error, violation;
};
//! Loads a timing cache and, when it loads, builds a small network with it.
CacheOutcome loadAndUseTimingCache(const uint8_t* data, size_t size);

struct ImportOutcome {
  bool imported = false;  //!< parsed into a Network
  bool built = false;     //!< built into a CPU engine
  bool ran = false;       //!< ran at its inputs' (min) shapes
  std::string error, violation;
};
//! Any bytes as an ONNX ModelProto: imported, and when it imports (and is small), built for the
//! CPU and run once, as `kiln --onnx=...` would. The contract: a kiln::Error that says why, or
//! an engine that runs.
ImportOutcome importBuildAndRunOnnx(const uint8_t* data, size_t size);

}  // namespace kiln::fuzz
