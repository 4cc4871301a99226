#include "backend_parameters.h"

#include <charconv>
#include <set>
#include <sstream>

#include "triton_util.h"

namespace kiln::triton {
namespace {

[[noreturn]] void badParameter(const std::string& key, const std::string& value, const std::string& expected) {
  throw TritonError(TRITONSERVER_ERROR_INVALID_ARG,
                    "parameters '" + key + "': '" + value + "' is not valid (expected " + expected + ")");
}

int64_t readInt(const std::string& key, const std::string& text, int64_t lo, int64_t hi) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi)
    badParameter(key, text, "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

bool readBool(const std::string& key, const std::string& text) {
  if (text == "true" || text == "1") return true;
  if (text == "false" || text == "0") return false;
  badParameter(key, text, "true or false");
}

// "x:1x3x224x224,mask:1x128" -> {x: [1,3,224,224], mask: [1,128]}
std::map<std::string, Dims> readShapes(const std::string& key, const std::string& text) {
  const std::string expected = "name:AxBxC entries separated by commas";
  std::map<std::string, Dims> shapes;
  std::istringstream entries(text);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    const size_t colon = entry.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == entry.size()) badParameter(key, text, expected);
    Dims dims;
    std::istringstream parts(entry.substr(colon + 1));
    std::string part;
    while (std::getline(parts, part, 'x')) dims.push_back(readInt(key, part, 0, int64_t(1) << 40));
    if (!shapes.emplace(entry.substr(0, colon), dims).second) badParameter(key, text, "each input once");
  }
  if (shapes.empty()) badParameter(key, text, expected);
  return shapes;
}

}  // namespace

BackendParameters readBackendParameters(const std::map<std::string, std::string>& params,
                                        std::vector<std::string>& warnings) {
  static const std::set<std::string> kBuildOnly = {"precision", "tf32", "min_shapes", "opt_shapes", "max_shapes",
                                                   "builder_optimization_level", "timing_cache_file",
                                                   "max_aux_streams"};
  BackendParameters p;
  for (const auto& [key, value] : params) {
    if (kBuildOnly.count(key)) p.onnxOnlyGiven = true;
    if (key == "precision") {
      if (value != "fp32" && value != "fp16" && value != "bf16") badParameter(key, value, "fp32, fp16 or bf16");
      p.precision = value;
    } else if (key == "tf32") {
      p.tf32 = readBool(key, value);
    } else if (key == "min_shapes") {
      p.minShapes = readShapes(key, value);
    } else if (key == "opt_shapes") {
      p.optShapes = readShapes(key, value);
    } else if (key == "max_shapes") {
      p.maxShapes = readShapes(key, value);
    } else if (key == "builder_optimization_level") {
      p.optimizationLevel = static_cast<int>(readInt(key, value, 0, 5));
    } else if (key == "timing_cache_file") {
      p.timingCacheFile = value;
    } else if (key == "threads") {
      p.threads = static_cast<int>(readInt(key, value, 0, 4096));
    } else if (key == "max_aux_streams") {
      p.maxAuxStreams = static_cast<int>(readInt(key, value, 0, 64));
    } else if (key == "cuda_graphs") {
      p.cudaGraphs = readBool(key, value);
    } else if (key == "cuda_graph_shapes") {
      p.cudaGraphShapes = static_cast<int>(readInt(key, value, 1, 1024));
    } else if (key == "batches_in_flight") {
      p.batchesInFlight = static_cast<int>(readInt(key, value, 1, 8));
    } else {
      warnings.push_back("parameters '" + key + "' is not a kiln backend parameter and has no effect");
    }
  }
  return p;
}

}  // namespace kiln::triton
