// A seeded fuzz campaign over plan or timing-cache mutants (shared by the unit test, the
// kiln_plan_fuzz tool and CI's sanitizer run): every mutant is refused with a clear kiln::Error,
// or loads and runs; anything else is a violation, reported with the mutation that caused it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::fuzz {

struct CampaignResult {
  int mutants = 0, refused = 0, loadedNotRun = 0, ran = 0;
  std::vector<std::string> violations;  //!< "seed plan / mutation: what happened"
  std::string summary() const;
};

//! `mutants` plan mutants from the seed plans (round robin), mutation stream seeded by `seed`.
//! `trace`: print each mutant to stderr before it runs (to find one that crashes or hangs).
CampaignResult runPlanCampaign(uint64_t seed, int mutants, bool trace = false, int first = 0);
//! The same for timing-cache files.
CampaignResult runTimingCacheCampaign(uint64_t seed, int mutants);

}  // namespace kiln::fuzz
