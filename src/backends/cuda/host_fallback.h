// The CUDA backend's tactic of last resort: a layer's reference kernel on the host, between
// copies, in stream order (host_fallback.cpp).
#pragma once
#include <vector>

#include "backends/backend.h"

namespace kiln::cuda {

//! The fallback's tactic name (stored in plans like any other).
constexpr const char* kHostFallbackTactic = "host_reference_fallback";
//! Whether the fallback can run the layer: an op with a reference kernel whose output sizes do not
//! depend on computed data, no plugin, plain layouts.
bool hostFallbackSupports(const LayerDesc& l);
//! {the fallback tactic} when it supports the layer, else empty.
std::vector<Tactic> hostFallbackTactics(const LayerDesc& l);

}  // namespace kiln::cuda
