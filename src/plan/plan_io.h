// Bounds-checked binary reader/writer used by plan files.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kiln/types.h"

namespace kiln {

//! The checksum of plan and timing-cache files: XXH3-64 (libxxhash's header, inlined), fast
//! enough that checking a multi-GB plan costs little next to reading it.
uint64_t planChecksum(const uint8_t* p, size_t n);

//! One field a PlanWriter wrote, for structure-aware fuzzing and per-field tests: where it is,
//! how wide, what kind of value, and which field of the format it is ("layer.stream", ...).
struct PlanField {
  enum Kind : uint8_t { kInt, kFloat, kLength, kData };
  size_t offset = 0;
  uint8_t size = 0;
  Kind kind = kInt;
  const char* what = "";
};

class PlanWriter {
 public:
  //! Records every field written from now on into `fields` (offsets relative to this writer).
  void trace(std::vector<PlanField>* fields) { trace_ = fields; }
  void u8(uint8_t v, const char* what = "u8") { note(1, PlanField::kInt, what); buf_.push_back(v); }
  void u32(uint32_t v, const char* what = "u32") { note(4, PlanField::kInt, what); raw(&v, 4); }
  void u64(uint64_t v, const char* what = "u64") { note(8, PlanField::kInt, what); raw(&v, 8); }
  void i64(int64_t v, const char* what = "i64") { note(8, PlanField::kInt, what); raw(&v, 8); }
  void f32(float v, const char* what = "f32") { note(4, PlanField::kFloat, what); raw(&v, 4); }
  void str(const std::string& s, const char* what = "string") {
    note(4, PlanField::kLength, what);
    u32raw(static_cast<uint32_t>(s.size()));
    raw(s.data(), s.size());
  }
  //! A count of the items that follow.
  void count(size_t n, const char* what) { note(4, PlanField::kLength, what); u32raw(static_cast<uint32_t>(n)); }
  //! Bulk data (constants): traced as one field.
  void data(const void* p, size_t n, const char* what) {
    if (n) note(static_cast<uint8_t>(n < 255 ? n : 255), PlanField::kData, what);
    raw(p, n);
  }
  void raw(const void* p, size_t n) { auto* b = static_cast<const uint8_t*>(p); buf_.insert(buf_.end(), b, b + n); }
  void align(size_t a) { while (buf_.size() % a) buf_.push_back(0); }
  size_t size() const { return buf_.size(); }
  std::vector<uint8_t>& bytes() { return buf_; }

 private:
  void u32raw(uint32_t v) { raw(&v, 4); }
  void note(uint8_t size, PlanField::Kind kind, const char* what) {
    if (trace_) trace_->push_back(PlanField{buf_.size(), size, kind, what});
  }
  std::vector<uint8_t> buf_;
  std::vector<PlanField>* trace_ = nullptr;
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
  //! A u32 that must be at most `max` (counts of streams, threads, ...).
  uint32_t u32Max(uint32_t max, const std::string& what) {
    uint32_t v = u32();
    if (v > max) fail(what + " " + std::to_string(v) + " is out of range (at most " + std::to_string(max) + ")");
    return v;
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
