// Implicit INT8 quantization: the calibrator the builder reads calibration batches from
// (TensorRT's IInt8Calibrator, IInt8EntropyCalibrator2, IInt8MinMaxCalibrator; kiln adds the
// percentile algorithm). BuilderConfig::setInt8Calibrator with BuilderFlag::kINT8.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "kiln/types.h"

namespace kiln {

//! How a tensor's range (amax) is chosen from the values it took over the calibration batches.
enum class CalibrationAlgoType : int {
  kENTROPY_CALIBRATION_2 = 0,  //!< TensorRT's: the threshold whose 128-level (256 unsigned) histogram is closest in KL divergence
  kMINMAX_CALIBRATION = 1,     //!< the largest magnitude seen
  kPERCENTILE = 2,             //!< the getPercentile()-th percentile of the magnitudes
};
const char* toString(CalibrationAlgoType a);

class IInt8Calibrator {
 public:
  virtual ~IInt8Calibrator() = default;
  //! Fills `batch` with one float32 tensor per network input (dims within optimization profile
  //! 0) and returns true, or returns false when there are no more batches. Called until false.
  virtual bool getBatch(std::map<std::string, HostTensor>& batch) = 0;
  //! A cache written by writeCalibrationCache earlier; empty: none, so the builder calibrates.
  //! A non-empty cache is used instead of the batches (its scales are taken bit for bit).
  virtual std::vector<uint8_t> readCalibrationCache() { return {}; }
  //! Called once after a calibration ran (not when the cache was used). Optional.
  virtual void writeCalibrationCache(const void* /*data*/, size_t /*size*/) {}
  virtual CalibrationAlgoType getAlgorithm() const = 0;
  //! kPERCENTILE only: in (0, 100].
  virtual double getPercentile() const { return 99.99; }
};

//! TensorRT's names for the two algorithms it had.
class IInt8EntropyCalibrator2 : public IInt8Calibrator {
 public:
  CalibrationAlgoType getAlgorithm() const override { return CalibrationAlgoType::kENTROPY_CALIBRATION_2; }
};
class IInt8MinMaxCalibrator : public IInt8Calibrator {
 public:
  CalibrationAlgoType getAlgorithm() const override { return CalibrationAlgoType::kMINMAX_CALIBRATION; }
};

}  // namespace kiln
