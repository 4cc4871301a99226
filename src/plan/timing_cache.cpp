// Timing cache file format (little-endian):
//   "KILNTC01" | u32 format version | u64 payload bytes | u64 payload XXH3-64 |
//   payload: u32 entries | entries: str key | f32 ms
// Every size is checked on load; a file that does not check out is refused as a whole.
// Version 2: XXH3-64 checksum (version 1 had a mis-seeded FNV-1a).
#include "kiln/timing_cache.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "kiln/types.h"
#include "plan/plan_io.h"
#include "plan/timing_cache_format.h"

namespace kiln {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'T', 'C', '0', '1'};
constexpr uint32_t kVersion = 3;  // 3: the tactic names of the tactic tables (keys hold the name)
constexpr size_t kHeaderBytes = 8 + 4 + 8 + 8;  // magic, version, payload bytes, checksum
constexpr char kSep = '\x1f';

std::string makeKey(const std::string& device, const std::string& signature, const std::string& tactic) {
  return device + kSep + signature + kSep + tactic;
}

}  // namespace

TimingCache::TimingCache(const TimingCache& o) {
  std::lock_guard<std::mutex> lock(o.mu_);
  entries_ = o.entries_;
}

TimingCache& TimingCache::operator=(const TimingCache& o) {
  if (this == &o) return *this;
  std::map<std::string, float> copy;
  {
    std::lock_guard<std::mutex> lock(o.mu_);
    copy = o.entries_;
  }
  std::lock_guard<std::mutex> lock(mu_);
  entries_ = std::move(copy);
  return *this;
}

float TimingCache::find(const std::string& device, const std::string& signature, const std::string& tactic) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(makeKey(device, signature, tactic));
  if (it == entries_.end()) {
    ++misses_;
    return -1.f;
  }
  ++hits_;
  return it->second;
}

void TimingCache::insert(const std::string& device, const std::string& signature, const std::string& tactic, float ms) {
  if (!(ms >= 0.f) || !std::isfinite(ms)) return;
  std::lock_guard<std::mutex> lock(mu_);
  entries_[makeKey(device, signature, tactic)] = ms;
}

size_t TimingCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

std::vector<uint8_t> TimingCache::serialize() const {
  PlanWriter payload;
  {
    std::lock_guard<std::mutex> lock(mu_);
    payload.count(entries_.size(), "entries.count");
    for (const auto& [k, ms] : entries_) {
      payload.str(k, "entry.key");
      payload.f32(ms, "entry.ms");
    }
  }
  PlanWriter out;
  out.raw(kMagic, sizeof(kMagic));
  out.u32(kVersion);
  out.u64(payload.size());
  out.u64(planChecksum(payload.bytes().data(), payload.size()));
  out.raw(payload.bytes().data(), payload.size());
  return out.bytes();
}

TimingCache TimingCache::deserialize(const void* data, size_t size) {
  TimingCache c;
  try {
    PlanReader r(static_cast<const uint8_t*>(data), size);
    if (size < sizeof(kMagic) || std::memcmp(r.take(sizeof(kMagic)), kMagic, sizeof(kMagic)) != 0)
      throw Error("not a kiln timing cache (bad magic)");
    uint32_t version = r.u32();
    if (version != kVersion)
      throw Error("timing cache format version " + std::to_string(version) + " is not supported (this kiln writes " +
                  std::to_string(kVersion) + ")");
    uint64_t bytes = r.u64(), sum = r.u64();
    if (bytes != r.remaining()) throw Error("timing cache is truncated or has trailing bytes");
    const uint8_t* payload = r.take(bytes);
    if (planChecksum(payload, bytes) != sum) throw Error("timing cache checksum mismatch (corrupt file)");
    PlanReader p(payload, bytes);
    uint32_t n = p.count(8, "timing entries");
    for (uint32_t i = 0; i < n; ++i) {
      std::string key = p.str(1 << 16);
      float ms = p.f32();
      if (!(ms >= 0.f) || !std::isfinite(ms)) throw Error("timing cache holds an invalid time");
      c.entries_[key] = ms;
    }
    if (p.remaining()) throw Error("timing cache has trailing bytes");
  } catch (const Error& e) {
    std::string m = e.what();
    if (m.rfind("corrupt plan file", 0) == 0) m = "corrupt timing cache" + m.substr(17);
    throw Error(m);
  }
  return c;
}

void rewriteTimingCacheChecksum(uint8_t* data, size_t size) {
  if (size < kHeaderBytes || std::memcmp(data, kMagic, sizeof(kMagic)) != 0) throw Error("not a kiln timing cache (bad magic)");
  uint64_t sum = planChecksum(data + kHeaderBytes, size - kHeaderBytes);
  std::memcpy(data + kHeaderBytes - 8, &sum, 8);
}

TimingCache TimingCache::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return TimingCache();
  std::vector<char> buf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  try {
    return deserialize(buf.data(), buf.size());
  } catch (const Error& e) {
    throw Error("timing cache '" + path + "': " + e.what() + "; delete it to start a new one");
  }
}

void TimingCache::save(const std::string& path) const {
  std::vector<uint8_t> bytes = serialize();
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw Error("cannot write timing cache '" + tmp + "'");
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!f) throw Error("failed writing timing cache '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw Error("cannot rename '" + tmp + "' to '" + path + "'");
}

}  // namespace kiln
