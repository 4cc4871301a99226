// Comma-separated words from an environment variable, for the debugging switches
// (KILN_SKIP_PASSES, KILN_DISABLE_TACTICS).
#pragma once
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace kiln {

//! The non-empty comma-separated words of environment variable `name` (none when it is unset).
inline std::vector<std::string> envWords(const char* name) {
  std::vector<std::string> words;
  if (const char* env = std::getenv(name)) {
    std::istringstream in(env);
    for (std::string w; std::getline(in, w, ',');)
      if (!w.empty()) words.push_back(w);
  }
  return words;
}

}  // namespace kiln
