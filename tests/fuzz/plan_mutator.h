// Structure-aware mutation of plan and timing-cache files: fields are changed to values chosen
// for their kind (indices and counts to boundaries, floats to NaN/inf, lengths to overflows),
// same-kind fields are swapped, raw payload bytes are flipped; then the checksum is rewritten so
// that the mutant reaches the parser behind it.
#pragma once
#include <random>
#include <string>
#include <vector>

#include "plan/plan_io.h"

namespace kiln::fuzz {

//! Mutates `bytes` (a valid plan whose fields are `fields`) with 1-4 mutations and rewrites its
//! checksum. Returns a description of what changed, to reproduce a finding.
std::string mutatePlan(std::vector<uint8_t>& bytes, const std::vector<PlanField>& fields, std::mt19937_64& rng);

//! The fields of a valid timing-cache file (walks its format).
std::vector<PlanField> timingCacheFields(const std::vector<uint8_t>& bytes);
//! As mutatePlan, for a timing-cache file.
std::string mutateTimingCache(std::vector<uint8_t>& bytes, const std::vector<PlanField>& fields, std::mt19937_64& rng);

}  // namespace kiln::fuzz
