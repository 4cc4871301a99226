#include "campaign.h"

#include <cstdio>
#include <random>

#include "kiln/timing_cache.h"
#include "load_and_run.h"
#include "plan_mutator.h"
#include "seed_plans.h"

namespace kiln::fuzz {

std::string CampaignResult::summary() const {
  return std::to_string(mutants) + " mutants: " + std::to_string(refused) + " refused with an error, " + std::to_string(ran) +
         " ran, " + std::to_string(loadedNotRun) + " loaded (too large to run here), " + std::to_string(violations.size()) +
         " violations";
}

CampaignResult runPlanCampaign(uint64_t seed, int mutants, bool trace, int first) {
  CampaignResult r;
  const std::vector<SeedPlan> seeds = makeSeedPlans();
  for (const SeedPlan& s : seeds) {  // the seeds themselves must load and run
    PlanOutcome o = loadAndRunPlan(s.bytes.data(), s.bytes.size(), true);
    if (!o.ran) r.violations.push_back(s.name + " (unmutated): " + (o.violation.empty() ? o.error : o.violation));
  }
  for (int i = first; i < first + mutants; ++i) {
    const SeedPlan& s = seeds[static_cast<size_t>(i) % seeds.size()];
    std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(i));
    std::vector<uint8_t> bytes = s.bytes;
    const std::string what = mutatePlan(bytes, s.fields, rng);
    if (trace) std::fprintf(stderr, "%s mutant %d [%s]\n", s.name.c_str(), i, what.c_str());
    PlanOutcome o = loadAndRunPlan(bytes.data(), bytes.size(), true);
    ++r.mutants;
    if (!o.violation.empty()) r.violations.push_back(s.name + " mutant " + std::to_string(i) + " [" + what + "]: " + o.violation);
    else if (!o.error.empty()) ++r.refused;
    else if (o.ran) ++r.ran;
    else ++r.loadedNotRun;
  }
  return r;
}

CampaignResult runTimingCacheCampaign(uint64_t seed, int mutants) {
  CampaignResult r;
  TimingCache c;
  c.insert("cpu:x86", "MatMul|float32[2,4]|float32[4,3]", "matmul_f32_gemm", 0.012f);
  c.insert("cpu:x86", "Relu|float32[2,3]", "relu_f32_avx2", 0.001f);
  c.insert("gpu:H200", "Conv|float16[32,64,56,56]", "conv_nhwc_f16_cudnn", 0.25f);
  const std::vector<uint8_t> valid = c.serialize();
  const std::vector<PlanField> fields = timingCacheFields(valid);
  for (int i = 0; i < mutants; ++i) {
    std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(i));
    std::vector<uint8_t> bytes = valid;
    const std::string what = mutateTimingCache(bytes, fields, rng);
    CacheOutcome o = loadAndUseTimingCache(bytes.data(), bytes.size());
    ++r.mutants;
    if (!o.violation.empty()) r.violations.push_back("timing cache mutant " + std::to_string(i) + " [" + what + "]: " + o.violation);
    else if (!o.error.empty()) ++r.refused;
    else ++r.ran;
  }
  return r;
}

}  // namespace kiln::fuzz
