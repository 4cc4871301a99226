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
enum class DataType : uint8_t {
  kFLOAT = 0, kHALF = 1, kBF16 = 2, kINT64 = 3, kINT32 = 4, kINT8 = 5, kUINT8 = 6, kBOOL = 7,
  kDOUBLE = 8, kINT16 = 9, kUINT16 = 10, kUINT32 = 11, kUINT64 = 12,
};
constexpr int kNumDataTypes = 13;

size_t elementSize(DataType t);
const char* toString(DataType t);
bool isFloat(DataType t);    //!< float, half, bf16, double
bool isInteger(DataType t);  //!< signed/unsigned integers (not bool)

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
