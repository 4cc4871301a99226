// Without VNNI, x64's int8 multiply (vpmaddubsw) sums pairs of u8 x s8 products in saturating
// int16: exact only while |w| <= 64 (2 * 255 * 64 = 32640). Shared by the int8 tactics that run
// there (qlinear_onednn.cpp, qlinear_conv_avx2.cpp): the bound, its check, and the split of a wider
// weight into two halves that each respect it.
#pragma once
#include <algorithm>
#include <cstdint>
#include <utility>

#include "kiln/types.h"

namespace kiln::cpu {

constexpr int kPairSafeWeight = 64;

inline bool weightsPairSafe(const HostTensor& w) {
  const int8_t* p = w.as<int8_t>();
  return std::all_of(p, p + w.count(), [](int8_t v) { return v >= -kPairSafeWeight && v <= kPairSafeWeight; });
}

//! w = floor(w / 2) + ceil(w / 2), both halves in [-64, 64] (arithmetic shift for the floor).
inline std::pair<int8_t, int8_t> splitWeight(int8_t w) {
  const auto hi = static_cast<int8_t>(w >> 1);
  return {hi, static_cast<int8_t>(w - hi)};
}

}  // namespace kiln::cpu
