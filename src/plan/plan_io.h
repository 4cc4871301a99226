// Bounds-checked binary reader/writer used by plan files.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/types.h"

namespace kiln {

//! FNV-1a 64-bit hash: the checksum of plan and timing-cache files.
inline uint64_t fnv1a64(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

class PlanWriter {
 public:
  void u8(uint8_t v) { buf_.push_back(v); }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i64(int64_t v) { raw(&v, 8); }
  void f32(float v) { raw(&v, 4); }
  void str(const std::string& s) { u32(static_cast<uint32_t>(s.size())); raw(s.data(), s.size()); }
  void raw(const void* p, size_t n) { auto* b = static_cast<const uint8_t*>(p); buf_.insert(buf_.end(), b, b + n); }
  void align(size_t a) { while (buf_.size() % a) buf_.push_back(0); }
  size_t size() const { return buf_.size(); }
  std::vector<uint8_t>& bytes() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

class PlanReader {
 public:
  PlanReader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  uint8_t u8() { return get<uint8_t>(); }
  uint32_t u32() { return get<uint32_t>(); }
  uint64_t u64() { return get<uint64_t>(); }
  int64_t i64() { return get<int64_t>(); }
  float f32() { return get<float>(); }
  std::string str(size_t maxLen = 1 << 20) {
    uint32_t n = u32();
    if (n > maxLen) fail("string length " + std::to_string(n) + " is implausible");
    need(n);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n;
    return s;
  }
  //! A count of items each at least `minItemBytes` long: refused if the rest cannot hold them.
  uint32_t count(size_t minItemBytes, const char* what) {
    uint32_t n = u32();
    if (minItemBytes && n > remaining() / minItemBytes)
      fail(std::string("count of ") + what + " (" + std::to_string(n) + ") exceeds the plan's size");
    return n;
  }
  const uint8_t* take(size_t n) {
    need(n);
    const uint8_t* q = p_ + pos_;
    pos_ += n;
    return q;
  }
  //! Skips alignment padding, which must be zero (so that no byte of a plan goes unchecked).
  void align(size_t a) {
    size_t pad = (a - pos_ % a) % a;
    const uint8_t* q = take(pad);
    for (size_t i = 0; i < pad; ++i)
      if (q[i] != 0) fail("non-zero padding");
  }
  size_t remaining() const { return n_ - pos_; }
  size_t pos() const { return pos_; }
  [[noreturn]] void fail(const std::string& m) const {
    throw Error("corrupt plan file at byte " + std::to_string(pos_) + ": " + m);
  }

 private:
  template <typename T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  void need(size_t n) const {
    if (n > n_ - pos_) fail("truncated (needs " + std::to_string(n) + " more bytes, " + std::to_string(n_ - pos_) + " left)");
  }
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

}  // namespace kiln
