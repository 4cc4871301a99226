// libFuzzer target: the CLI's value parsers (tools/kiln/options.cpp): --shapes (and the
// --minShapes/--optShapes/--maxShapes forms), --loadInputs, --layerPrecisions and
// --percentile. The first byte picks the parser; the rest is the flag's text. Contract: a
// UsageError (a kiln::Error) that says why, or a value that respects the parser's promises.
// Seeds in tests/fuzz/corpus/cli_specs.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <typeinfo>

#include "options.h"

namespace {

[[noreturn]] void violation(const std::string& what) {
  std::fprintf(stderr, "violation: %s\n", what.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    switch (data[0] % 4) {
      case 0:
        for (const auto& [name, dims] : cli::parseShapeSpec("--shapes", text)) {
          if (name.empty()) violation("--shapes gave an empty name");
          for (int64_t d : dims)
            if (d < 0) violation("--shapes gave a negative dim");
        }
        break;
      case 1:
        for (const auto& [name, file] : cli::parseInputSpec(text))
          if (name.empty() || file.empty()) violation("--loadInputs gave an empty name or file");
        break;
      case 2: cli::parseLayerPrecisions(text); break;
      default:
        for (double p : cli::parsePercentiles(text))
          if (!(p >= 0 && p <= 100)) violation("--percentile gave a value outside [0, 100]");
        break;
    }
  } catch (const Error& e) {
    if (std::string(e.what()).empty()) violation("kiln::Error with an empty message");
  } catch (const std::exception& e) {
    violation(std::string("not a kiln::Error: ") + typeid(e).name() + ": " + e.what());
  }
  return 0;
}
