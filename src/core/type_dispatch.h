// One type-dispatch helper for every floor: dispatchType<Set>(t, f) calls f(T{}) with the C++
// type of element type `t` when `t` is in `Set`, and throws UnsupportedError otherwise. Host code
// has no C++ type for float16/bfloat16 and gets the tags below; CUDA code passes __half and
// __nv_bfloat16 (cuda/cuda_util.h). Also the "is a float type" predicates, declared once here.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "kiln/types.h"

namespace kiln {

//! float32, float16 or bfloat16: the float types kiln computes (the GPU kernels' types, the
//! builder's precisions).
constexpr bool isFloatType(DataType t) { return t == DataType::kFLOAT || t == DataType::kHALF || t == DataType::kBF16; }
//! float16 or bfloat16 (2-byte floats).
constexpr bool isHalfType(DataType t) { return t == DataType::kHALF || t == DataType::kBF16; }

//! Type sets for dispatchType: bit i = DataType i.
constexpr uint32_t typeBit(DataType t) { return 1u << static_cast<unsigned>(t); }
constexpr uint32_t kFloatTypes = typeBit(DataType::kFLOAT) | typeBit(DataType::kHALF) | typeBit(DataType::kBF16);
constexpr uint32_t kIntTypes = typeBit(DataType::kINT8) | typeBit(DataType::kINT16) | typeBit(DataType::kINT32) |
                               typeBit(DataType::kINT64) | typeBit(DataType::kUINT8) | typeBit(DataType::kUINT16) |
                               typeBit(DataType::kUINT32) | typeBit(DataType::kUINT64);
//! float32 and float64: what the float-only reference kernels compute.
constexpr uint32_t kRefFloatTypes = typeBit(DataType::kFLOAT) | typeBit(DataType::kDOUBLE);
//! Every type with a host C++ type (no float16/bfloat16): what the reference kernels compute.
constexpr uint32_t kHostTypes = typeBit(DataType::kFLOAT) | typeBit(DataType::kDOUBLE) | kIntTypes | typeBit(DataType::kBOOL);
constexpr uint32_t kAllTypes = kHostTypes | kFloatTypes;
constexpr bool inTypeSet(uint32_t set, DataType t) { return (set & typeBit(t)) != 0; }

//! Host tags for the 2-byte floats (no arithmetic: dispatch on them to pick storage or kernels).
struct Float16Tag {};
struct BFloat16Tag {};

//! Calls f(T{}) with T the C++ type of `t` (Half / BF16 for the 2-byte floats) and returns what
//! it returns. When `t` is not in `Set`: `fail` is either a name (throws UnsupportedError naming
//! it) or a callable that throws the caller's own error (so kernels keep their messages and
//! error classes, which callers catch apart).
template <uint32_t Set = kHostTypes, typename Half = Float16Tag, typename BF16 = BFloat16Tag, typename F,
          typename Fail = const char*>
decltype(auto) dispatchType(DataType t, F&& f, const Fail& fail = "this op") {
  switch (t) {
#define KILN_DISPATCH_CASE(dt, T) \
  case DataType::dt:              \
    if constexpr ((Set & typeBit(DataType::dt)) != 0) return f(T{}); \
    break;
    KILN_DISPATCH_CASE(kFLOAT, float)
    KILN_DISPATCH_CASE(kHALF, Half)
    KILN_DISPATCH_CASE(kBF16, BF16)
    KILN_DISPATCH_CASE(kDOUBLE, double)
    KILN_DISPATCH_CASE(kINT64, int64_t)
    KILN_DISPATCH_CASE(kINT32, int32_t)
    KILN_DISPATCH_CASE(kINT16, int16_t)
    KILN_DISPATCH_CASE(kINT8, int8_t)
    KILN_DISPATCH_CASE(kUINT8, uint8_t)
    KILN_DISPATCH_CASE(kUINT16, uint16_t)
    KILN_DISPATCH_CASE(kUINT32, uint32_t)
    KILN_DISPATCH_CASE(kUINT64, uint64_t)
    KILN_DISPATCH_CASE(kBOOL, bool)
#undef KILN_DISPATCH_CASE
    default: break;  // the narrow types (float8, 4/2-bit) have no C++ type
  }
  if constexpr (std::is_invocable_v<const Fail&>) {
    fail();
    throw Error("dispatchType: the failure handler returned");  // it must throw
  } else {
    throw UnsupportedError(std::string("unsupported data type for ") + fail + ": " + toString(t));
  }
}

}  // namespace kiln
