// Timing cache: tactic timings the builder measured, keyed by (device, layer signature, tactic),
// reusable by later builds so that a rebuild does not time again (`--timingCacheFile`).
// A layer signature is its op, attributes (tensor attributes by type and dims only), and the
// types, opt-shape dims and constness of its inputs and outputs: two layers with the same
// signature run the same kernels at the same speed, whatever their weights.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kiln {

class TimingCache {
 public:
  TimingCache() = default;
  //! Reads a cache written by serialize(). Throws kiln::Error when the data is not a valid
  //! cache (bad magic/version/checksum, truncated).
  static TimingCache deserialize(const void* data, size_t size);
  std::vector<uint8_t> serialize() const;

  //! Loads `path`; a missing file gives an empty cache. Throws kiln::Error on a corrupt file.
  static TimingCache load(const std::string& path);
  //! Writes atomically (temporary file + rename). Throws kiln::Error on failure.
  void save(const std::string& path) const;

  //! Time in ms of `tactic` for a layer signature on a device, or a negative value.
  float find(const std::string& device, const std::string& signature, const std::string& tactic) const;
  void insert(const std::string& device, const std::string& signature, const std::string& tactic, float ms);
  size_t size() const;
  //! Lookups that found / did not find an entry since construction.
  size_t hits() const { return hits_; }
  size_t misses() const { return misses_; }

  TimingCache(const TimingCache& o);
  TimingCache& operator=(const TimingCache& o);

 private:
  mutable std::mutex mu_;
  std::map<std::string, float> entries_;  // key: device \x1f signature \x1f tactic
  mutable size_t hits_ = 0, misses_ = 0;
};

}  // namespace kiln
