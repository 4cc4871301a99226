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

// Outputs start poisoned, so an element a kernel never writes cannot match the reference: not
// where the reference is zero, NaN or an integer of the poison's own bytes, nor a bool `true`.
TEST(OpHarness, PoisonedOutputsNeverMatch) {
  HostTensor zeros(DataType::kFLOAT, {4});
  EXPECT_NONFATAL_FAILURE(test::expectClose(test::poisoned(DataType::kFLOAT, {4}, &zeros), zeros, 1, 1), "4 of 4");
  HostTensor nans = test::poisoned(DataType::kFLOAT, {4});  // a reference of NaNs
  EXPECT_NONFATAL_FAILURE(test::expectClose(test::poisoned(DataType::kFLOAT, {4}, &nans), nans, 0, 0), "4 of 4");
  HostTensor marker = test::poisoned(DataType::kINT32, {3});  // 0xA5A5A5A5 expected
  EXPECT_NONFATAL_FAILURE(test::expectClose(test::poisoned(DataType::kINT32, {3}, &marker), marker, 0, 0), "3 of 3");
  HostTensor trues(DataType::kBOOL, {5});
  for (int i = 0; i < 5; ++i) trues.as<uint8_t>()[i] = 1;
  EXPECT_NONFATAL_FAILURE(test::expectClose(test::poisoned(DataType::kBOOL, {5}, &trues), trues, 0, 0), "5 of 5");
}

// Integers (and indices, masks) compare exactly whatever the float tolerance passed.
TEST(OpHarness, IntegersCompareExactly) {
  HostTensor want(DataType::kINT32, {2}), got(DataType::kINT32, {2});
  want.as<int32_t>()[0] = got.as<int32_t>()[0] = 7;
  want.as<int32_t>()[1] = 1000001;
  got.as<int32_t>()[1] = 1000000;  // within rtol 1e-3 of the expected value
  EXPECT_NONFATAL_FAILURE(test::expectClose(got, want, 1e-3, 1e-3, "int"), "1 of 2");
}
