// BuilderConfig.calibrator: a Python object as kiln's IInt8Calibrator (implicit INT8).
#pragma once
#include <pybind11/pybind11.h>

#include <memory>

#include "kiln/calibrator.h"
#include "py_callbacks.h"

namespace kiln::python {

//! `obj.get_batch()` returns {input name: array} or None when done; optional
//! `obj.read_calibration_cache()` returns bytes or None, `obj.write_calibration_cache(data: bytes)`
//! keeps them. Called from the build with the GIL released: each call takes it; an exception the
//! object raises stops the build and reaches the caller.
class PyCalibrator : public IInt8Calibrator {
 public:
  PyCalibrator(std::shared_ptr<PyCallable> obj, CalibrationAlgoType algo, double percentile)
      : obj_(std::move(obj)), algo_(algo), percentile_(percentile) {}
  bool getBatch(std::map<std::string, HostTensor>& batch) override;
  std::vector<uint8_t> readCalibrationCache() override;
  void writeCalibrationCache(const void* data, size_t size) override;
  CalibrationAlgoType getAlgorithm() const override { return algo_; }
  double getPercentile() const override { return percentile_; }

 private:
  std::shared_ptr<PyCallable> obj_;
  CalibrationAlgoType algo_;
  double percentile_;
};

//! "entropy", "minmax", "percentile"; throws kiln::Error for anything else.
CalibrationAlgoType calibrationAlgorithm(const std::string& name);

}  // namespace kiln::python
