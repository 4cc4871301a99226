// The CLI's view of a network's / engine's inputs: optimization profiles from the shape flags,
// runtime input data, and the I/O listing.
#pragma once
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/builder.h"
#include "kiln/network.h"
#include "kiln/runtime.h"
#include "options.h"

namespace kiln::cli {

//! The optimization profiles for the network's dynamic inputs from --min/opt/maxShapes (one per
//! repetition; a missing one of the three is taken from the others). With a single profile,
//! --shapes stands in for missing ones, and an input with none of them gets its dims with -1
//! replaced by 1, with a warning; with several, an input missing from one is an error. Empty when
//! every input is static. Throws UsageError for names that are not inputs or shapes that
//! contradict static dims.
std::vector<OptimizationProfile> makeProfiles(const Network& network, const Options& opts, ILogger& logger);

//! Host data for every engine input, with its runtime dims: loaded from --loadInputs or random
//! (seeded), shaped by --shapes, else the static dims, else the opt dims of --useProfile's profile.
std::map<std::string, HostTensor> prepareInputs(const Engine& engine, const Options& opts, ILogger& logger);

//! Prints the engine's inputs and outputs (type, dims, profile) to `os`.
void printEngineIO(std::ostream& os, const Engine& engine);

}  // namespace kiln::cli
