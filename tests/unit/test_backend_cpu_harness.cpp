// The op test harness itself, on the CPU: an optimized tactic and the reference agree, and a
// corrupted result is caught (so the harness can fail).
#include <gtest/gtest-spi.h>

#include "op_test_util.h"
#include "reference_eval.h"

using namespace kiln;

TEST(OpHarness, CpuTacticMatchesReferenceAndCatchesErrors) {
  test::OpCase c;
  c.op = "Relu";
  c.inputs = {test::randomTensor({3, 7}, 1)};
  auto backend = getBackend(DeviceType::kCPU, 2);
  auto names = test::tacticNames(*backend, c);
  ASSERT_FALSE(names.empty());
  auto ref = test::runReference(c);
  auto got = test::runTactic(*backend, names[0], c);
  test::expectClose(got[0], ref[0], 0, 0, "relu");
  got[0].as<float>()[3] += 1.f;
  EXPECT_NONFATAL_FAILURE(test::expectClose(got[0], ref[0], 1e-6, 1e-6, "relu"), "differ");
}
