#include "plan_mutator.h"

#include <cstring>
#include <limits>

#include "plan/timing_cache_format.h"
#include "runtime/engine_graph.h"

namespace kiln::fuzz {

namespace {

uint64_t readField(const std::vector<uint8_t>& b, const PlanField& f) {
  uint64_t v = 0;
  std::memcpy(&v, b.data() + f.offset, std::min<size_t>(f.size, 8));
  return v;
}

void writeField(std::vector<uint8_t>& b, const PlanField& f, uint64_t v) { std::memcpy(b.data() + f.offset, &v, std::min<size_t>(f.size, 8)); }

// Values that break index, count and size checks: boundaries of every width and sign.
uint64_t interestingInt(uint64_t old, uint8_t width, std::mt19937_64& rng) {
  const uint64_t pick[] = {0,
                           1,
                           2,
                           old + 1,
                           old - 1,
                           old * 2,
                           old ^ (uint64_t(1) << (rng() % (width * 8))),
                           rng() % 64,
                           0x7f,
                           0x80,
                           0xff,
                           0x7fff,
                           0xffff,
                           0x7fffffff,
                           0x80000000,
                           0xffffffff,
                           uint64_t(1) << 40,
                           uint64_t(std::numeric_limits<int64_t>::max()),
                           uint64_t(std::numeric_limits<int64_t>::min()),
                           ~uint64_t(0),
                           ~uint64_t(0) - 1};
  return pick[rng() % (sizeof(pick) / sizeof(pick[0]))];
}

float interestingFloat(float old, std::mt19937_64& rng) {
  const float pick[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(), -1.f, -2.f, 0.f, -0.f, 1e30f, -1e30f,
                        std::numeric_limits<float>::denorm_min(), old * -1.f, old * 1e6f};
  return pick[rng() % (sizeof(pick) / sizeof(pick[0]))];
}

std::string hex(uint64_t v) {
  char b[24];
  std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
  return b;
}

// One mutation; returns its description.
std::string mutateOnce(std::vector<uint8_t>& b, const std::vector<PlanField>& fields, size_t payloadAt, std::mt19937_64& rng) {
  const size_t payloadBytes = b.size() - payloadAt;
  const unsigned strategy = static_cast<unsigned>(rng() % 10);
  if (fields.empty() || strategy >= 8) {  // raw bytes near the payload's start or end (as a hand edit)
    if (!payloadBytes) return "nothing";
    size_t window = std::min<size_t>(payloadBytes, 256);
    size_t pos = rng() % 2 ? payloadAt + rng() % window : b.size() - 1 - rng() % window;
    uint8_t old = b[pos];
    b[pos] = static_cast<uint8_t>(rng() % 3 == 0 ? old ^ (1u << (rng() % 8)) : rng());
    return "byte@" + std::to_string(pos) + " " + hex(old) + "->" + hex(b[pos]);
  }
  const PlanField& f = fields[rng() % fields.size()];
  if (strategy >= 6) {  // copy the value of another field of the same name (a plausible wrong value)
    std::vector<const PlanField*> same;
    for (const PlanField& g : fields)
      if (std::strcmp(g.what, f.what) == 0 && g.size == f.size && g.offset != f.offset) same.push_back(&g);
    if (!same.empty()) {
      const PlanField& g = *same[rng() % same.size()];
      std::memcpy(b.data() + f.offset, b.data() + g.offset, f.size);
      return std::string(f.what) + "@" + std::to_string(f.offset) + " := " + f.what + "@" + std::to_string(g.offset);
    }
  }
  switch (f.kind) {
    case PlanField::kFloat: {
      float old, v;
      std::memcpy(&old, b.data() + f.offset, 4);
      v = interestingFloat(old, rng);
      std::memcpy(b.data() + f.offset, &v, 4);
      return std::string(f.what) + "@" + std::to_string(f.offset) + " := " + std::to_string(v);
    }
    case PlanField::kData: {
      size_t pos = f.offset + rng() % f.size;
      b[pos] = static_cast<uint8_t>(rng());
      return std::string(f.what) + "@" + std::to_string(pos) + " byte := " + hex(b[pos]);
    }
    default: {
      uint64_t old = readField(b, f), v = interestingInt(old, f.size, rng);
      writeField(b, f, v);
      return std::string(f.what) + "@" + std::to_string(f.offset) + " " + hex(old) + " := " + hex(readField(b, f));
    }
  }
}

std::string mutate(std::vector<uint8_t>& b, const std::vector<PlanField>& fields, size_t payloadAt, std::mt19937_64& rng) {
  std::string what;
  const int n = 1 + static_cast<int>(rng() % 4);
  for (int i = 0; i < n; ++i) what += (i ? "; " : "") + mutateOnce(b, fields, payloadAt, rng);
  return what;
}

}  // namespace

std::string mutatePlan(std::vector<uint8_t>& bytes, const std::vector<PlanField>& fields, std::mt19937_64& rng) {
  size_t payloadAt = bytes.size();
  for (const PlanField& f : fields) payloadAt = std::min(payloadAt, f.offset);
  std::string what = mutate(bytes, fields, payloadAt, rng);
  rewritePlanChecksum(bytes.data(), bytes.size());
  return what;
}

std::vector<PlanField> timingCacheFields(const std::vector<uint8_t>& b) {
  constexpr size_t kHeader = 28;  // magic, version, payload bytes, checksum
  std::vector<PlanField> f;
  if (b.size() < kHeader + 4) return f;
  size_t pos = kHeader;
  uint32_t n;
  std::memcpy(&n, b.data() + pos, 4);
  f.push_back({pos, 4, PlanField::kLength, "entries.count"});
  pos += 4;
  for (uint32_t i = 0; i < n && pos + 4 <= b.size(); ++i) {
    uint32_t len;
    std::memcpy(&len, b.data() + pos, 4);
    f.push_back({pos, 4, PlanField::kLength, "entry.key"});
    if (len) f.push_back({pos + 4, static_cast<uint8_t>(std::min<uint32_t>(len, 255)), PlanField::kData, "entry.key.bytes"});
    pos += 4 + len;
    if (pos + 4 > b.size()) break;
    f.push_back({pos, 4, PlanField::kFloat, "entry.ms"});
    pos += 4;
  }
  return f;
}

std::string mutateTimingCache(std::vector<uint8_t>& bytes, const std::vector<PlanField>& fields, std::mt19937_64& rng) {
  std::string what = mutate(bytes, fields, 28, rng);
  rewriteTimingCacheChecksum(bytes.data(), bytes.size());
  return what;
}

}  // namespace kiln::fuzz
