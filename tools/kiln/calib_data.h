// --calibData / --calib / --calibAlgo: the CLI's calibrator, reading batches from a directory.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "kiln/calibrator.h"
#include "kiln/network.h"

namespace kiln::cli {

//! Batches from `dir`: one file per network input and batch, named `<input>.npy` (batch 0) or
//! `<input>.<k>.npy` (batch k; ONNX TensorProto `.pb` alike). The constructor checks the names
//! (every file names an input, every batch has every input); getBatch checks each file's type and
//! dims against the input. `cacheFile` (may be empty): read when it exists, written after.
class DirectoryCalibrator : public IInt8Calibrator {
 public:
  DirectoryCalibrator(const Network& net, const std::string& dir, const std::string& cacheFile, CalibrationAlgoType algo,
                      double percentile);
  bool getBatch(std::map<std::string, HostTensor>& batch) override;
  std::vector<uint8_t> readCalibrationCache() override;
  void writeCalibrationCache(const void* data, size_t size) override;
  CalibrationAlgoType getAlgorithm() const override { return algo_; }
  double getPercentile() const override { return percentile_; }
  size_t batchCount() const { return files_.size(); }

 private:
  struct Input {
    DataType type;
    Dims dims;
  };
  std::map<std::string, Input> inputs_;
  std::vector<std::map<std::string, std::string>> files_;  //!< per batch: input -> path
  size_t next_ = 0;
  std::string cacheFile_;
  CalibrationAlgoType algo_;
  double percentile_;
};

//! --calibAlgo's names.
CalibrationAlgoType parseCalibAlgo(const std::string& name);

}  // namespace kiln::cli
