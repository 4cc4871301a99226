// trtexec drop-in: the trtexec flags kiln accepts beyond its own (options.cpp). Each is either
// mapped to a kiln feature, accepted with one warning saying that it has no effect, or refused
// with the reason (docs/trtexec_flags.md lists them all).
#pragma once
#include <CLI/CLI.hpp>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "kiln/logger.h"
#include "options.h"

namespace kiln {
class Engine;
}

namespace kiln::cli {

//! What the trtexec flags left on the command line, read back after parsing.
struct TrtexecFlags {
  std::map<std::string, std::vector<std::string>> noEffect;  //!< flag -> its values (once per occurrence)
  std::map<std::string, std::vector<std::string>> refused;
  std::vector<std::string> staticPlugins, dynamicPlugins;
  int infStreams = 0;
  int avgTiming = 0;
  bool best = false, separateProfileRun = false, includeDataTransfers = false, noCudaGraph = false;
  bool buildOnly = false, timeDeserialize = false;
  std::string backend;  //!< --backend=cpu|gpu
};

//! argv without trtexec's bare `--threads` (a boolean there; kiln's --threads=N takes a count),
//! which is recorded as a no-effect warning in o.compatWarnings. The pointers stay argv's.
std::vector<char*> stripTrtexecBareFlags(int argc, char** argv, Options& o);
//! Registers the trtexec flags on `app`.
void addTrtexecFlags(CLI::App& app, TrtexecFlags& t, Options& o);
//! After parsing: maps the implemented flags onto `o`, records one warning per no-effect flag in
//! o.compatWarnings, resolves --device (a GPU index, or cpu|gpu as before) and --backend, and
//! throws UnsupportedError for a refused flag.
void applyTrtexecFlags(const TrtexecFlags& t, const std::string& device, Options& o);

//! The engine's layer information (kiln's JSON) with trtexec's keys added: "Layers" (Name,
//! LayerType, Inputs/Outputs with Name, Dimensions, Format/Datatype, TacticName) and "Bindings"
//! (the I/O tensor names), so that tools written for trtexec's --exportLayerInfo read it.
std::string addTrtexecLayerInfo(const std::string& kilnLayerInfo, const Engine& engine);
//! --dumpOptimizationProfile: each input's min/opt/max in every profile.
void printOptimizationProfiles(std::ostream& os, const Engine& engine);

}  // namespace kiln::cli
