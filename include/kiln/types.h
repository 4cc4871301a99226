// kiln public types: data types, dimensions, host tensors (weights), errors.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln {

//! Element types. The numeric values are part of the plan format: append only.
//! The narrow types (13..22) take one byte per element in kiln's buffers and plans: a float8 or
//! float4 code (float4e2m1 in the low 4 bits), or the integer value (int4/int2 sign-extended).
//! ONNX packs the 4-bit types two and the 2-bit types four to a byte; kiln unpacks them at import.
enum class DataType : uint8_t {
  kFLOAT = 0, kHALF = 1, kBF16 = 2, kINT64 = 3, kINT32 = 4, kINT8 = 5, kUINT8 = 6, kBOOL = 7,
  kDOUBLE = 8, kINT16 = 9, kUINT16 = 10, kUINT32 = 11, kUINT64 = 12,
  kFP8E4M3FN = 13, kFP8E4M3FNUZ = 14, kFP8E5M2 = 15, kFP8E5M2FNUZ = 16,
  kINT4 = 17, kUINT4 = 18, kFP4E2M1 = 19, kINT2 = 20, kUINT2 = 21,
  kFP8E8M0 = 22,  //!< float8e8m0fnu: an exponent alone (2^(code-127)), no sign, 0xFF = NaN (MX scales)
};
constexpr int kNumDataTypes = 23;

size_t elementSize(DataType t);
const char* toString(DataType t);
bool isFloat(DataType t);    //!< float, half, bf16, double (the types kiln computes in)
bool isInteger(DataType t);  //!< signed/unsigned integers, int4/int2 included (not bool)
bool isNarrowFloat(DataType t);  //!< the float8 kinds (float8e8m0 too) and float4e2m1 (storage only, no arithmetic)
//! Bits per element in ONNX's packed form: 4 (int4, uint4, float4e2m1), 2 (int2, uint2), else 8 x elementSize.
int packedBits(DataType t);

//! Narrow float code -> float (exact). NaN codes give NaN, E5M2's infinities give infinity.
float narrowToFloat(DataType t, uint8_t code);
//! float/double -> narrow float code as ONNX Cast: round to nearest even. saturate: values beyond the
//! largest finite value (infinities included) clamp to it; otherwise they become infinity (E5M2)
//! or NaN (the other float8 kinds). NaN stays NaN. float4e2m1 has neither and always saturates.
//! float8e8m0 follows floatToE8M0 with rounding kUp (Cast's default round_mode).
uint8_t floatToNarrow(DataType t, double x, bool saturate);
//! ONNX Cast's round_mode, which only float8e8m0 targets use.
enum class E8M0Rounding { kUp, kDown, kNearest };
//! float -> float8e8m0 code as ONNX Cast (the reference's to_float8e8m0): the float32 value's
//! biased exponent, the sign and the mantissa dropped (so 0 and the subnormals of exponent 0 give
//! code 0, 2^-127, when not rounded up), rounded by the mantissa: kUp adds one for any nonzero
//! mantissa, kNearest for a mantissa of at least one half (exactly one half rounds to even, with
//! exponent 0 counting as even), kDown never. Infinity and NaN give 0xFF (NaN); so does rounding
//! up past 0xFE unless `saturate`, which keeps 0xFE (2^127).
uint8_t floatToE8M0(float x, bool saturate, E8M0Rounding rounding);

//! Dimensions; -1 marks a dynamic dimension (only before shapes are resolved).
using Dims = std::vector<int64_t>;
std::string toString(const Dims& d);
//! Product of dims; throws kiln::Error on overflow or negative dims.
int64_t volume(const Dims& d);
bool isStatic(const Dims& d);

//! Every failure in kiln is reported as a kiln::Error with a human-readable message.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& m) : std::runtime_error(m) {}
};

//! A well-formed model uses something kiln does not support (an op, a data type, an attribute
//! value). Distinguished so that tools can report "unsupported" rather than "failed".
class UnsupportedError : public Error {
 public:
  explicit UnsupportedError(const std::string& m) : Error(m) {}
};

//! A dense, row-major host tensor (weights, constants, host-side values). Cheap to copy
//! (shares its buffer). Buffers are 64-byte aligned.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DataType type, Dims dims);  //!< zero-initialized
  DataType type() const { return type_; }
  const Dims& dims() const { return dims_; }
  int64_t count() const { return count_; }
  size_t bytes() const { return static_cast<size_t>(count_) * elementSize(type_); }
  void* data() { return buf_ ? buf_.get() : nullptr; }
  const void* data() const { return buf_ ? buf_.get() : nullptr; }
  template <typename T> T* as() { return static_cast<T*>(data()); }
  template <typename T> const T* as() const { return static_cast<const T*>(data()); }
  bool empty() const { return !buf_ && count_ == 0 && dims_.empty() && !valid_; }
  bool valid() const { return valid_; }
  //! Reads element i converted to double / int64 (any type).
  double getDouble(int64_t i) const;
  int64_t getInt(int64_t i) const;
  std::vector<int64_t> toInts() const;
  //! A copy with new dims (same element count) sharing nothing.
  HostTensor clone() const;
  HostTensor reshaped(Dims d) const;  //!< shares the buffer

 private:
  DataType type_ = DataType::kFLOAT;
  Dims dims_;
  int64_t count_ = 0;
  bool valid_ = false;
  std::shared_ptr<uint8_t> buf_;
};

//! Numeric conversions used across kiln (IEEE half and bfloat16).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bf16ToFloat(uint16_t h);
uint16_t floatToBf16(float f);

}  // namespace kiln
