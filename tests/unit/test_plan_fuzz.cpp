// Plan files past their checksum: every field class of the format set to values that index or
// size out of range must be refused with an error that says what is wrong (never a crash or a
// wrong read), and a seeded structure-aware fuzz campaign over several kinds of engines must give
// only refusals and clean runs. The same campaign runs under ASan/UBSan (`make sanitize`), with
// more mutants from `kiln_plan_fuzz`, and as libFuzzer targets (`make fuzz`).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <limits>

#include "campaign.h"
#include "kiln/kiln.h"
#include "load_and_run.h"
#include "plan/timing_cache_format.h"
#include "runtime/engine_graph.h"
#include "seed_plans.h"

using namespace kiln;
using namespace kiln::fuzz;

namespace {

const std::vector<SeedPlan>& seeds() {
  static const std::vector<SeedPlan> s = makeSeedPlans();
  return s;
}

const SeedPlan& seedNamed(const std::string& name) {
  for (const SeedPlan& s : seeds())
    if (s.name == name) return s;
  throw std::runtime_error("no seed plan " + name);
}

// The `occurrence`-th field named `what` in the seed plan.
const PlanField& field(const SeedPlan& s, const std::string& what, int occurrence = 0) {
  for (const PlanField& f : s.fields)
    if (what == f.what && occurrence-- == 0) return f;
  throw std::runtime_error("seed plan " + s.name + " has no field " + what);
}

// Sets the field to `value` (its width), rewrites the checksum, loads and runs the plan, and
// expects a refusal whose message contains `expected`.
void expectRefused(const std::string& plan, const std::string& what, uint64_t value, const std::string& expected, int occurrence = 0) {
  const SeedPlan& s = seedNamed(plan);
  const PlanField& f = field(s, what, occurrence);
  std::vector<uint8_t> b = s.bytes;
  std::memcpy(b.data() + f.offset, &value, f.size);
  rewritePlanChecksum(b.data(), b.size());
  PlanOutcome o = loadAndRunPlan(b.data(), b.size(), true);
  EXPECT_TRUE(o.violation.empty()) << plan << " " << what << ": " << o.violation;
  EXPECT_FALSE(o.ran) << plan << " " << what << " := " << value << " was not refused";
  EXPECT_NE(o.error.find(expected), std::string::npos) << plan << " " << what << " := " << value << ": \"" << o.error
                                                        << "\" does not say \"" << expected << "\"";
}

// Replaces the first byte of a string field's text (a name the registries do not know).
void expectRefusedName(const std::string& plan, const std::string& what, const std::string& expected, int occurrence = 0) {
  const SeedPlan& s = seedNamed(plan);
  const PlanField& f = field(s, what, occurrence);
  std::vector<uint8_t> b = s.bytes;
  b[f.offset + 4] = '#';
  rewritePlanChecksum(b.data(), b.size());
  PlanOutcome o = loadAndRunPlan(b.data(), b.size(), true);
  EXPECT_TRUE(o.violation.empty()) << o.violation;
  EXPECT_FALSE(o.loaded) << what << " with an unknown name was loaded";
  EXPECT_NE(o.error.find(expected), std::string::npos) << what << ": \"" << o.error << "\" does not say \"" << expected << "\"";
}

constexpr uint64_t kMinI32 = 0x80000000u;

}  // namespace

TEST(PlanFields, SeedPlansLoadAndRun) {
  for (const SeedPlan& s : seeds()) {
    PlanOutcome o = loadAndRunPlan(s.bytes.data(), s.bytes.size(), true);
    EXPECT_TRUE(o.ran) << s.name << ": " << o.error << o.violation;
  }
}

// The finding of issue 21: a layer's stream index was read unchecked and indexed the context's
// auxiliary streams (signed overflow at -2^31, an out-of-bounds read otherwise).
TEST(PlanFields, OutOfRangeStreamIndexIsRefused) {
  expectRefused("cnn", "layer.stream", kMinI32, "runs on stream 2147483648 but the engine has 0 auxiliary streams");
  expectRefused("bert", "layer.stream", 1, "auxiliary streams", 3);
  expectRefused("lstm", "layer.stream", 0xffffffffu, "auxiliary streams");
  // With two aux streams, stream 2 is the last valid one and 3 is refused.
  const SeedPlan& s = seedNamed("mlp");
  std::vector<uint8_t> b = s.bytes;
  uint32_t two = 2, three = 3;
  std::memcpy(b.data() + field(s, "auxStreams").offset, &two, 4);
  std::memcpy(b.data() + field(s, "layer.stream").offset, &two, 4);
  rewritePlanChecksum(b.data(), b.size());
  EXPECT_TRUE(loadAndRunPlan(b.data(), b.size(), true).ran);
  std::memcpy(b.data() + field(s, "layer.stream").offset, &three, 4);
  rewritePlanChecksum(b.data(), b.size());
  try {
    Engine::deserialize(b.data(), b.size());
    FAIL() << "stream 3 of 2 aux streams was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("runs on stream 3 but the engine has 2 auxiliary streams"), std::string::npos) << e.what();
  }
}

TEST(PlanFields, EngineCountsAreBounded) {
  expectRefused("cnn", "threads", kMinI32, "thread count");
  expectRefused("cnn", "auxStreams", 65, "aux stream count");
  expectRefused("cnn", "arenaBytes", uint64_t(1) << 62, "arena size");
  expectRefused("cnn", "choice.considered", kMinI32, "tactics considered");
  expectRefused("cnn", "choice.buckets.count", 17, "tactic buckets 17 is out of range");
  expectRefused("cnn", "choice.buckets.count", 1, "a single tactic bucket");
}

TEST(PlanFields, TensorLayerAndBindingIndicesAreBounded) {
  expectRefused("cnn", "layer.input", 100000, "out of range");
  expectRefused("cnn", "layer.input", uint64_t(-2), "out of range");
  expectRefused("cnn", "layer.output", 0, "produced twice");  // tensor 0 is the input x
  expectRefused("cnn", "input.index", 100000, "out of range");
  expectRefused("cnn", "output.index", 0, "not a produced output");
  expectRefused("cnn", "tensor.flags", 3 | 4, "both an input and a constant");
  expectRefused("cnn", "tensor.flags", 0, "reads a tensor before it is produced", 0);  // the input x, unflagged
  // An activation flagged as a network output that no binding lists.
  const SeedPlan& s = seedNamed("cnn");
  int activation = 0;
  for (const PlanField& f : s.fields)
    if (std::string(f.what) == "tensor.flags") {
      if (s.bytes[f.offset] == 0) break;
      ++activation;
    }
  expectRefused("cnn", "tensor.flags", 2, "is flagged as I/O but not bound", activation);
  expectRefused("lstm", "output.index", 0, "not a produced output", 1);
}

TEST(PlanFields, ProfileTablesAreChecked) {
  expectRefused("bert", "profiles.count", 0, "optimization profile count");
  expectRefused("bert", "profiles.count", 5000, "");
  expectRefused("bert", "profile.input", 3, "profile for a non-input tensor");
  expectRefused("bert", "profile.entries.count", 0, "has no range for dynamic input 'ids'");
  // Profile 0's min of the first dim (the dims after the first profile.input) above its opt.
  const SeedPlan& s = seedNamed("bert");
  int minDim = 0;
  for (size_t i = 0, seen = 0; i < s.fields.size(); ++i) {
    if (std::string(s.fields[i].what) == "profile.input") seen = 1;
    if (seen && std::string(s.fields[i].what) == "dims.dim") break;
    if (std::string(s.fields[i].what) == "dims.dim") ++minDim;
  }
  expectRefused("bert", "dims.dim", 100, "min/opt/max out of order", minDim);
  expectRefused("mlp", "layer.choices.count", 1, "corrupt plan file");  // the fields after it no longer parse
}

TEST(PlanFields, DimsAndSizesAreChecked) {
  expectRefused("cnn", "dims.rank", 17, "rank 17 is implausible");
  expectRefused("cnn", "dims.dim", uint64_t(1) << 41, "out of range");
  expectRefused("cnn", "value.bytes", 3, "does not match its dims");
  expectRefused("cnn", "tensors.count", 0xffffffffu, "exceeds the plan's size");
  expectRefused("cnn", "attrs.count", 0x7fffffffu, "exceeds the plan's size");
  expectRefused("cnn", "tensor.name", 0xfffffff0u, "implausible");
  // A stored activation whose dims disagree with what its layer computes (dims of a tensor that
  // kernels would size their work from): refused before any kernel is created.
  const SeedPlan& s = seedNamed("cnn");
  int found = -1;
  for (size_t i = 0; i < s.fields.size() && found < 0; ++i)
    if (std::string(s.fields[i].what) == "tensor.flags") {
      uint8_t flags = s.bytes[s.fields[i].offset];
      if (flags == 0) found = static_cast<int>(i);  // an activation (not I/O, not constant)
    }
  ASSERT_GE(found, 0);
  // Its dims are the fields just before its flags: rank then dims; grow the last dim by one.
  const PlanField& lastDim = s.fields[static_cast<size_t>(found) - 1];
  ASSERT_STREQ(lastDim.what, "dims.dim");
  std::vector<uint8_t> b = s.bytes;
  int64_t d;
  std::memcpy(&d, b.data() + lastDim.offset, 8);
  d += 1;
  std::memcpy(b.data() + lastDim.offset, &d, 8);
  rewritePlanChecksum(b.data(), b.size());
  PlanOutcome o = loadAndRunPlan(b.data(), b.size(), true);
  EXPECT_FALSE(o.loaded);
  EXPECT_NE(o.error.find("is stored with dims"), std::string::npos) << o.error;
}

TEST(PlanFields, NamesAreCheckedAgainstTheRegistries) {
  expectRefusedName("cnn", "layer.op", "unknown op");
  expectRefusedName("cnn", "choice.tactic", "is not available in this build");
  expectRefusedName("lstm", "choice.tactic", "is not available in this build");
}

TEST(PlanFields, AttributesAndTimesAreChecked) {
  expectRefused("cnn", "attr.kind", 9, "invalid attribute kind");
  expectRefused("cnn", "choice.timeMs", 0x7fc00000u, "invalid tactic time");  // NaN
  expectRefused("cnn", "choice.timeMs", 0xff800000u, "invalid tactic time");  // -inf
  expectRefused("cnn", "layer.precision", 200, "invalid data type");
}

TEST(PlanFuzz, MutantsAreRefusedOrRun) {
  const char* n = std::getenv("KILN_TEST_PLAN_MUTANTS");  // more in the sanitizer run
  const char* seed = std::getenv("KILN_TEST_PLAN_SEED");
  CampaignResult r = runPlanCampaign(seed ? std::strtoull(seed, nullptr, 10) : 21, n ? std::atoi(n) : 2000);
  for (const std::string& v : r.violations) ADD_FAILURE() << v;
  std::printf("%s\n", r.summary().c_str());
  EXPECT_GT(r.refused, r.mutants / 10);  // the mutator does reach the checks
  EXPECT_GT(r.ran, 0);                    // and leaves some plans valid
}

TEST(PlanFuzz, TimingCacheMutantsAreRefusedOrLoad) {
  CampaignResult r = runTimingCacheCampaign(5, 300);
  for (const std::string& v : r.violations) ADD_FAILURE() << v;
  std::printf("%s\n", r.summary().c_str());
  EXPECT_GT(r.refused, 0);
  EXPECT_GT(r.ran, 0);
}

TEST(PlanFuzz, TimingCacheChecksumIsVerified) {
  TimingCache c;
  c.insert("cpu", "sig", "tactic", 1.f);
  std::vector<uint8_t> b = c.serialize();
  b.back() ^= 1;
  EXPECT_THROW(TimingCache::deserialize(b.data(), b.size()), Error);
  rewriteTimingCacheChecksum(b.data(), b.size());
  EXPECT_NO_THROW(TimingCache::deserialize(b.data(), b.size()));
}
