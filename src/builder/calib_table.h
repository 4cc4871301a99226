// The result of implicit INT8 calibration: one activation scale per tensor, and its cache file
// format (text, one tensor per line, scales as the hex bits of their float32 so that a rebuild
// from the cache quantizes with exactly the same scales).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln {

struct ActivationScale {
  float scale = 1.f;       //!< real value of one integer step
  bool isUnsigned = false; //!< uint8 (every calibrated value >= 0) or int8; zero point 0 either way
};

struct CalibrationTable {
  std::string algorithm;  //!< "entropy", "minmax", "percentile:99.99"
  std::map<std::string, ActivationScale> scales;
};

//! "kiln-int8-calibration 1 <algorithm>\n" then "<hex float bits> <u8|i8> <tensor name>\n" per
//! tensor, sorted by name: the same table always gives the same bytes.
std::vector<uint8_t> serializeCalibrationTable(const CalibrationTable& t);
//! Throws kiln::Error naming the line for anything else.
CalibrationTable parseCalibrationTable(const std::vector<uint8_t>& bytes);

}  // namespace kiln
