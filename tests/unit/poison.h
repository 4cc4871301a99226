// Output buffers of kernels under test start poisoned, so that a kernel (or a tactic in a loop over
// tactics) that leaves its output unwritten fails instead of passing on zeros or on the previous
// tactic's result: quiet NaN for floats, 0xA5 bytes for integers and bool (0xA5 is neither 0 nor 1).
#pragma once
#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/types.h"

namespace kiln::test {

//! Writes poison number `which` (0: the usual, 1: an alternative) into element i of t.
inline void poisonElement(HostTensor& t, int64_t i, int which) {
  switch (t.type()) {
    case DataType::kFLOAT: t.as<float>()[i] = which ? -7777.f : std::numeric_limits<float>::quiet_NaN(); return;
    case DataType::kDOUBLE: t.as<double>()[i] = which ? -7777.0 : std::numeric_limits<double>::quiet_NaN(); return;
    case DataType::kHALF: t.as<uint16_t>()[i] = which ? floatToHalf(-7777.f) : 0x7E00; return;
    case DataType::kBF16: t.as<uint16_t>()[i] = which ? floatToBf16(-7777.f) : 0x7FC0; return;
    default: {
      const size_t n = elementSize(t.type());
      std::memset(static_cast<char*>(t.data()) + i * n, which ? 0x5A : 0xA5, n);
    }
  }
}

//! Fills t with poison; where `avoid` (same type and count, e.g. the reference output) holds the
//! poison itself (a NaN, an int of 0xA5 bytes), the element gets the alternative poison, so that an
//! unwritten element can never match.
inline void poison(HostTensor& t, const HostTensor* avoid = nullptr) {
  const bool check = avoid && avoid->valid() && avoid->type() == t.type() && avoid->count() == t.count();
  const size_t n = elementSize(t.type());
  for (int64_t i = 0; i < t.count(); ++i) {
    poisonElement(t, i, 0);
    if (!check) continue;
    const bool same = isFloat(t.type()) ? std::isnan(avoid->getDouble(i))
                                        : std::memcmp(static_cast<const char*>(t.data()) + i * n,
                                                      static_cast<const char*>(avoid->data()) + i * n, n) == 0;
    if (same) poisonElement(t, i, 1);
  }
}

//! A new host tensor of `type` and `dims`, poisoned.
inline HostTensor poisoned(DataType type, const Dims& dims, const HostTensor* avoid = nullptr) {
  HostTensor t(type, dims);
  poison(t, avoid);
  return t;
}

}  // namespace kiln::test
