// Per-tensor statistics of implicit INT8 calibration and the three ways to turn them into a range
// (amax): minmax, percentile, entropy (TensorRT's KL-divergence search).
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/calibrator.h"

namespace kiln {

//! A histogram of |x| over [0, range) in kBins equal bins, and the extremes of x. The range is
//! set by the first non-zero batch and doubles (merging bin pairs) whenever a value exceeds it,
//! so one pass over the batches suffices and the result does not depend on how they are split
//! beyond the first one.
class TensorHistogram {
 public:
  static constexpr int kBins = 2048;
  void add(const float* x, int64_t n);
  double minValue() const { return min_; }
  double maxValue() const { return max_; }
  double absMax() const { return absMax_; }
  double binWidth() const { return width_; }
  //! Bin counts, zeros in bin 0.
  std::vector<double> counts() const;
  int64_t seen() const { return seen_; }
  bool hasNonFinite() const { return nonFinite_; }

 private:
  std::vector<double> counts_ = std::vector<double>(kBins, 0.0);
  double width_ = 0;  //!< 0 until a non-zero value is seen (zeros are counted in zeros_)
  double zeros_ = 0;
  double min_ = 0, max_ = 0, absMax_ = 0;
  int64_t seen_ = 0;
  bool nonFinite_ = false;
};

//! The amax of a tensor's values by `algo`; `isUnsigned` (every value >= 0) selects the entropy
//! search's 256 levels instead of 128. 0 when every value was 0.
double calibratedAmax(const TensorHistogram& h, CalibrationAlgoType algo, double percentile, bool isUnsigned);

//! TensorRT's entropy threshold on a histogram of magnitudes (bins of equal width): the bin count
//! i (>= levels) minimizing KL(P_i || Q_i), P_i = the first i bins with the rest added to bin i-1,
//! Q_i = those i bins quantized to `levels` levels and expanded back over their non-empty bins;
//! the last minimum wins, as in pytorch-quantization's _compute_amax_entropy. Returns i.
int entropyThresholdBin(const std::vector<double>& counts, int levels);

}  // namespace kiln
