// Calibration cache format (calib_table.h).
#include "builder/calib_table.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "kiln/types.h"

namespace kiln {

namespace {
constexpr const char* kMagic = "kiln-int8-calibration";
constexpr int kVersion = 1;
}  // namespace

std::vector<uint8_t> serializeCalibrationTable(const CalibrationTable& t) {
  std::string s = std::string(kMagic) + " " + std::to_string(kVersion) + " " + t.algorithm + "\n";
  for (const auto& [name, a] : t.scales) {
    uint32_t bits;
    std::memcpy(&bits, &a.scale, 4);
    char hex[16];
    std::snprintf(hex, sizeof hex, "%08x", bits);
    s += std::string(hex) + (a.isUnsigned ? " u8 " : " i8 ") + name + "\n";
  }
  return {s.begin(), s.end()};
}

CalibrationTable parseCalibrationTable(const std::vector<uint8_t>& bytes) {
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  std::string line;
  CalibrationTable t;
  auto bad = [](int n, const std::string& why) {
    return Error("calibration cache, line " + std::to_string(n) + ": " + why);
  };
  if (!std::getline(in, line)) throw bad(1, "empty");
  {
    std::istringstream h(line);
    std::string magic;
    int version = 0;
    if (!(h >> magic >> version >> t.algorithm) || magic != kMagic)
      throw bad(1, "not a kiln calibration cache (expected '" + std::string(kMagic) + " " + std::to_string(kVersion) + " <algorithm>')");
    if (version != kVersion) throw bad(1, "version " + std::to_string(version) + "; this kiln reads version " + std::to_string(kVersion));
  }
  for (int n = 2; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    if (line.size() < 13 || line[8] != ' ' || line[11] != ' ') throw bad(n, "expected '<8 hex digits> <u8|i8> <tensor name>'");
    uint32_t bits = 0;
    for (int k = 0; k < 8; ++k) {
      const char c = line[k];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) throw bad(n, "'" + line.substr(0, 8) + "' is not 8 lower-case hex digits");
      bits = bits << 4 | static_cast<uint32_t>(d);
    }
    ActivationScale a;
    std::memcpy(&a.scale, &bits, 4);
    if (!(a.scale > 0) || !std::isfinite(a.scale)) throw bad(n, "scale must be positive and finite, got " + std::to_string(a.scale));
    const std::string type = line.substr(9, 2);
    if (type != "u8" && type != "i8") throw bad(n, "type must be u8 or i8, got '" + type + "'");
    a.isUnsigned = type == "u8";
    if (!t.scales.emplace(line.substr(12), a).second) throw bad(n, "tensor '" + line.substr(12) + "' is listed twice");
  }
  return t;
}

}  // namespace kiln
