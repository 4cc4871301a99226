// Small engines of several kinds (CNN, LSTM, a BERT-style encoder with two profiles, shape-tensor
// input, dynamic MLP), built in-process on the CPU: the valid plans that plan fuzzing mutates.
#pragma once
#include <string>
#include <vector>

#include "plan/plan_io.h"

namespace kiln::fuzz {

struct SeedPlan {
  std::string name;
  std::vector<uint8_t> bytes;
  std::vector<PlanField> fields;  //!< every field of the plan, with its offset in `bytes`
};

//! Builds every seed engine and serializes it with its field map. Deterministic weights.
std::vector<SeedPlan> makeSeedPlans();

}  // namespace kiln::fuzz
