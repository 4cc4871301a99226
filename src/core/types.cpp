#include "kiln/types.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "kiln/logger.h"

namespace kiln {

size_t elementSize(DataType t) {
  switch (t) {
    case DataType::kFLOAT: case DataType::kINT32: case DataType::kUINT32: return 4;
    case DataType::kHALF: case DataType::kBF16: case DataType::kINT16: case DataType::kUINT16: return 2;
    case DataType::kINT64: case DataType::kDOUBLE: case DataType::kUINT64: return 8;
    case DataType::kINT8: case DataType::kUINT8: case DataType::kBOOL: return 1;
    case DataType::kFP8E4M3FN: case DataType::kFP8E4M3FNUZ: case DataType::kFP8E5M2: case DataType::kFP8E5M2FNUZ:
    case DataType::kINT4: case DataType::kUINT4: case DataType::kFP4E2M1: case DataType::kINT2: case DataType::kUINT2:
    case DataType::kFP8E8M0:
      return 1;  // unpacked: one element per byte (types.h)
  }
  throw Error("invalid data type " + std::to_string(static_cast<int>(t)));
}

const char* toString(DataType t) {
  switch (t) {
    case DataType::kFLOAT: return "float32";
    case DataType::kHALF: return "float16";
    case DataType::kBF16: return "bfloat16";
    case DataType::kINT64: return "int64";
    case DataType::kINT32: return "int32";
    case DataType::kINT8: return "int8";
    case DataType::kUINT8: return "uint8";
    case DataType::kBOOL: return "bool";
    case DataType::kDOUBLE: return "float64";
    case DataType::kINT16: return "int16";
    case DataType::kUINT16: return "uint16";
    case DataType::kUINT32: return "uint32";
    case DataType::kUINT64: return "uint64";
    case DataType::kFP8E4M3FN: return "float8e4m3fn";
    case DataType::kFP8E4M3FNUZ: return "float8e4m3fnuz";
    case DataType::kFP8E5M2: return "float8e5m2";
    case DataType::kFP8E5M2FNUZ: return "float8e5m2fnuz";
    case DataType::kINT4: return "int4";
    case DataType::kUINT4: return "uint4";
    case DataType::kFP4E2M1: return "float4e2m1";
    case DataType::kINT2: return "int2";
    case DataType::kUINT2: return "uint2";
    case DataType::kFP8E8M0: return "float8e8m0";
  }
  return "invalid";
}

bool isFloat(DataType t) {
  return t == DataType::kFLOAT || t == DataType::kHALF || t == DataType::kBF16 || t == DataType::kDOUBLE;
}
bool isInteger(DataType t) {
  return !isFloat(t) && !isNarrowFloat(t) && t != DataType::kBOOL && static_cast<int>(t) < kNumDataTypes;
}

std::string toString(const Dims& d) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < d.size(); ++i) s << (i ? "," : "") << d[i];
  s << "]";
  return s.str();
}

int64_t volume(const Dims& d) {
  int64_t v = 1;
  for (int64_t x : d) {
    if (x < 0) throw Error("volume of dims with unknown or negative size " + toString(d));
    if (x != 0 && v > std::numeric_limits<int64_t>::max() / x)
      throw Error("tensor size overflows: dims " + toString(d));
    v *= x;
  }
  return v;
}

bool isStatic(const Dims& d) {
  for (int64_t x : d)
    if (x < 0) return false;
  return true;
}

HostTensor::HostTensor(DataType type, Dims dims) : type_(type), dims_(std::move(dims)), valid_(true) {
  count_ = volume(dims_);
  size_t es = elementSize(type_);
  if (count_ > 0 && static_cast<uint64_t>(count_) > (uint64_t(1) << 40) / es)
    throw Error("host tensor too large: dims " + toString(dims_));
  size_t bytes = static_cast<size_t>(count_) * es;
  size_t alloc = (bytes + 63) / 64 * 64;
  if (alloc == 0) alloc = 64;
  void* p = std::aligned_alloc(64, alloc);
  if (!p) throw Error("out of host memory allocating " + std::to_string(alloc) + " bytes");
  std::memset(p, 0, alloc);
  buf_ = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
}

double HostTensor::getDouble(int64_t i) const {
  const void* p = data();
  switch (type_) {
    case DataType::kFLOAT: return static_cast<const float*>(p)[i];
    case DataType::kHALF: return halfToFloat(static_cast<const uint16_t*>(p)[i]);
    case DataType::kBF16: return bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
    case DataType::kDOUBLE: return static_cast<const double*>(p)[i];
    case DataType::kINT64: return static_cast<double>(static_cast<const int64_t*>(p)[i]);
    case DataType::kINT32: return static_cast<const int32_t*>(p)[i];
    case DataType::kINT16: return static_cast<const int16_t*>(p)[i];
    case DataType::kINT8: return static_cast<const int8_t*>(p)[i];
    case DataType::kUINT8: return static_cast<const uint8_t*>(p)[i];
    case DataType::kUINT16: return static_cast<const uint16_t*>(p)[i];
    case DataType::kUINT32: return static_cast<const uint32_t*>(p)[i];
    case DataType::kUINT64: return static_cast<double>(static_cast<const uint64_t*>(p)[i]);
    case DataType::kBOOL: return static_cast<const uint8_t*>(p)[i] ? 1.0 : 0.0;
    case DataType::kINT4: case DataType::kINT2: return static_cast<const int8_t*>(p)[i];
    case DataType::kUINT4: case DataType::kUINT2: return static_cast<const uint8_t*>(p)[i];
    case DataType::kFP8E4M3FN: case DataType::kFP8E4M3FNUZ: case DataType::kFP8E5M2: case DataType::kFP8E5M2FNUZ:
    case DataType::kFP4E2M1: case DataType::kFP8E8M0: return narrowToFloat(type_, static_cast<const uint8_t*>(p)[i]);
  }
  return 0;
}

int64_t HostTensor::getInt(int64_t i) const {
  const void* p = data();
  switch (type_) {
    case DataType::kINT64: return static_cast<const int64_t*>(p)[i];
    case DataType::kINT32: return static_cast<const int32_t*>(p)[i];
    case DataType::kUINT64: return static_cast<int64_t>(static_cast<const uint64_t*>(p)[i]);
    default: {
      double d = getDouble(i);
      if (!std::isfinite(d)) throw Error("non-finite value where an integer is needed");
      return static_cast<int64_t>(d);
    }
  }
}

std::vector<int64_t> HostTensor::toInts() const {
  std::vector<int64_t> v(static_cast<size_t>(count_));
  for (int64_t i = 0; i < count_; ++i) v[i] = getInt(i);
  return v;
}

HostTensor HostTensor::clone() const {
  if (!valid_) return HostTensor();
  HostTensor t(type_, dims_);
  if (bytes()) std::memcpy(t.data(), data(), bytes());
  return t;
}

HostTensor HostTensor::reshaped(Dims d) const {
  if (volume(d) != count_) throw Error("reshape of host tensor changes its size");
  HostTensor t = *this;
  t.dims_ = std::move(d);
  return t;
}

float halfToFloat(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) bits = sign;
    else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) { mant <<= 1; --exp; }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) bits = sign | 0x7f800000u | (mant << 13);
  else bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {  // subnormal or zero in half: round to nearest even
    float af;
    std::memcpy(&af, &absx, 4);
    float scaled = af * 16777216.0f;  // 2^24: half subnormal unit
    uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t exp = ((absx >> 23) - 127 + 15);
  uint32_t mant = absx & 0x7fffffu;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // round to nearest even
  return static_cast<uint16_t>(sign | h);
}

float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return static_cast<uint16_t>(x >> 16);
}

void StderrLogger::log(Severity s, const std::string& msg) noexcept {
  if (static_cast<int>(s) > static_cast<int>(threshold_.load(std::memory_order_relaxed))) return;
  const char* tag = s == Severity::kERROR ? "[E] " : s == Severity::kWARNING ? "[W] " : s == Severity::kINFO ? "[I] " : "[V] ";
  std::fprintf(stderr, "%s%s\n", tag, msg.c_str());
}

namespace {
StderrLogger& defaultStderrLogger() {
  static StderrLogger logger;
  return logger;
}
}  // namespace

ILogger& defaultLogger() { return defaultStderrLogger(); }
void setDefaultLoggerThreshold(ILogger::Severity threshold) { defaultStderrLogger().setThreshold(threshold); }

}  // namespace kiln
