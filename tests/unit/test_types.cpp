#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kiln/types.h"

using namespace kiln;

TEST(Types, HalfRoundTripIsExactForAllFiniteHalves) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if (((h >> 10) & 0x1f) == 0x1f) continue;  // inf/nan
    float f = halfToFloat(static_cast<uint16_t>(h));
    EXPECT_EQ(floatToHalf(f), h) << h;
  }
}

TEST(Types, HalfRoundsToNearest) {
  // Between two adjacent halves, the conversion must choose the nearer one.
  for (uint32_t h = 0x0400; h < 0x7bff; h += 97) {
    float a = halfToFloat(static_cast<uint16_t>(h)), b = halfToFloat(static_cast<uint16_t>(h + 1));
    EXPECT_EQ(floatToHalf(a + (b - a) * 0.25f), h);
    EXPECT_EQ(floatToHalf(a + (b - a) * 0.75f), h + 1);
  }
}

TEST(Types, Bf16RoundTrip) {
  for (uint32_t h = 0; h < 0x7f80; h += 3) EXPECT_EQ(floatToBf16(bf16ToFloat(static_cast<uint16_t>(h))), h);
}

TEST(Types, VolumeOverflowIsAnError) {
  EXPECT_THROW(volume({int64_t(1) << 40, int64_t(1) << 40}), Error);
  EXPECT_THROW(volume({-1, 3}), Error);
  EXPECT_EQ(volume({2, 3, 4}), 24);
  EXPECT_EQ(volume({}), 1);
}

TEST(Types, HostTensorRefusesAbsurdSizes) {
  EXPECT_THROW(HostTensor(DataType::kFLOAT, {int64_t(1) << 62}), Error);
}
