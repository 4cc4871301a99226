// kiln_plan_fuzz: structure-aware fuzzing of plan and timing-cache files from the command line
// (the unit test runs a few hundred mutants; run this with more, under the sanitizer build:
// `make sanitize`, then `build-asan/bin/kiln_plan_fuzz --seed 7 --mutants 20000`).
// --write-seeds DIR writes the seed plans and a timing cache: the libFuzzer corpus. --trace prints
// each mutant before it runs and --first I starts at mutant I, to reproduce one finding.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "campaign.h"
#include "kiln/timing_cache.h"
#include "seed_plans.h"

using namespace kiln::fuzz;

namespace {
int usage() {
  std::fprintf(stderr, "usage: kiln_plan_fuzz [--seed N] [--mutants N] [--cache-mutants N] [--write-seeds DIR] [--trace] [--first I]\n");
  return 2;
}
void write(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!f) throw kiln::Error("cannot write " + path);
}
}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 1;
  int mutants = 1000, cacheMutants = 300;
  std::string seedsDir;
  bool trace = false;
  int first = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--trace") {
      trace = true;
      continue;
    }
    if (i + 1 >= argc) return usage();
    if (a == "--seed") seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--mutants") mutants = std::atoi(argv[++i]);
    else if (a == "--cache-mutants") cacheMutants = std::atoi(argv[++i]);
    else if (a == "--write-seeds") seedsDir = argv[++i];
    else if (a == "--first") first = std::atoi(argv[++i]);
    else return usage();
  }
  try {
    if (!seedsDir.empty()) {
      for (const SeedPlan& s : makeSeedPlans()) write(seedsDir + "/" + s.name + ".plan", s.bytes);
      kiln::TimingCache c;
      c.insert("cpu", "MatMul|float32[2,4]", "matmul_f32_gemm", 0.01f);
      write(seedsDir + "/cache.timing", c.serialize());
      return 0;
    }
    auto t0 = std::chrono::steady_clock::now();
    CampaignResult plans = runPlanCampaign(seed, mutants, trace, first);
    CampaignResult caches = runTimingCacheCampaign(seed, cacheMutants);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& v : plans.violations) std::printf("VIOLATION %s\n", v.c_str());
    for (const auto& v : caches.violations) std::printf("VIOLATION %s\n", v.c_str());
    std::printf("plans (seed %llu): %s\ntiming caches: %s\n%.1f s\n", static_cast<unsigned long long>(seed), plans.summary().c_str(),
                caches.summary().c_str(), s);
    return plans.violations.empty() && caches.violations.empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_plan_fuzz: %s\n", e.what());
    return 1;
  }
}
