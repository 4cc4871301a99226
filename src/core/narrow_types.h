// Narrow element types (float8, float4e2m1, int4/uint4, int2/uint2): ONNX's packed layout.
// kiln keeps one element per byte (include/kiln/types.h); ONNX packs the 4-bit types two and the
// 2-bit types four to a byte, first element in the lowest bits. These convert between the two.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/minifloat.h"
#include "kiln/types.h"

namespace kiln {

//! int4 / uint4 / int2 / uint2.
inline bool isSubByteInt(DataType t) {
  return t == DataType::kINT4 || t == DataType::kUINT4 || t == DataType::kINT2 || t == DataType::kUINT2;
}
//! int4 / int2: the signed sub-byte integers (sign-extended in their byte).
inline bool isSignedSubByte(DataType t) { return t == DataType::kINT4 || t == DataType::kINT2; }
//! The standard type whose bytes hold a sub-byte integer's values: int8 for the signed ones, else uint8.
inline DataType subByteStorageType(DataType t) { return isSignedSubByte(t) ? DataType::kINT8 : DataType::kUINT8; }

//! The minifloat format of a float8 kind (not float8e8m0) or float4e2m1; throws kiln::Error for other types.
MiniFloat miniFloatOf(DataType t);

//! Bytes ONNX needs for `count` elements of `t` packed (ceil for the sub-byte types).
size_t packedBytes(DataType t, int64_t count);
//! Unpacks `count` elements of sub-byte type `t` from `packed` (packedBytes(t, count) bytes) into
//! one byte each, sign-extending int4/int2. Throws kiln::Error when the padding bits of the last
//! byte are not zero (a corrupt or mis-sized tensor).
void unpackSubByte(DataType t, const uint8_t* packed, int64_t count, uint8_t* out);
//! The inverse: packs `count` one-byte elements (low bits kept) into packedBytes(t, count) bytes.
void packSubByte(DataType t, const uint8_t* in, int64_t count, uint8_t* packed);
//! Whether `code` is a valid one-byte element of `t` (int4 in [-8,7], float4 in [0,15], ...):
//! plan loading and raw input buffers check this, every byte is valid for the 8-bit types.
bool validNarrowCode(DataType t, uint8_t code);

}  // namespace kiln
