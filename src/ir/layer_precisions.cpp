// setLayerPrecisions / setLayerOutputTypes (include/kiln/layer_precisions.h).
#include "kiln/layer_precisions.h"

#include <functional>
#include <optional>

namespace kiln {

bool matchesLayerPattern(const std::string& pattern, const std::string& name) {
  // Iterative glob with backtracking to the last '*': linear in practice, no recursion.
  size_t p = 0, n = 0, star = std::string::npos, mark = 0;
  while (n < name.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = n;
    } else if (p < pattern.size() && pattern[p] == name[n]) {
      ++p, ++n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

namespace {

//! Applies `entries` to every matching layer through `set`: exact names beat patterns, longer
//! patterns beat shorter ones.
void applyByName(Network& network, const std::map<std::string, DataType>& entries,
                 const std::function<void(Layer&, DataType)>& set) {
  auto rank = [](const std::string& e) { return e.find('*') == std::string::npos ? 1u << 30 : e.size(); };
  for (const auto& [entry, _] : entries) {
    bool any = false;
    for (auto& l : network.layers()) any = any || matchesLayerPattern(entry, l->name);
    if (!any) {
      std::string some;
      for (int i = 0; i < network.nbLayers() && i < 5; ++i)
        some += (i ? ", " : "") + std::string("'") + network.layer(i)->name + "'";
      throw Error(std::string("the model has no layer ") + (entry.find('*') != std::string::npos ? "matching '" : "named '") +
                  entry + "' (layers are named after the ONNX nodes, e.g. " + some + ")");
    }
  }
  for (auto& l : network.layers()) {
    std::optional<size_t> best;
    DataType type = DataType::kFLOAT;
    for (const auto& [entry, t] : entries)
      if (matchesLayerPattern(entry, l->name) && (!best || rank(entry) > *best)) best = rank(entry), type = t;
    if (best) set(*l, type);
  }
}

}  // namespace

void setLayerPrecisions(Network& network, const std::map<std::string, DataType>& precisions) {
  applyByName(network, precisions, [](Layer& l, DataType t) { l.precision = t; });
}

void setLayerOutputTypes(Network& network, const std::map<std::string, DataType>& types) {
  applyByName(network, types, [](Layer& l, DataType t) { l.outputType = t; });
}

}  // namespace kiln
