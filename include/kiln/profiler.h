#pragma once
#include <string>

namespace kiln {

//! Per-layer timing callback: called after each layer of an enqueue with the time it took.
//! Set on an ExecutionContext; while set, enqueue measures every layer (slower).
class IProfiler {
 public:
  virtual ~IProfiler() = default;
  virtual void reportLayerTime(const std::string& layerName, float ms) noexcept = 0;
};

}  // namespace kiln
