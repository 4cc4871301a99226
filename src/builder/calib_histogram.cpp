// Calibration statistics (calib_histogram.h).
#include "builder/calib_histogram.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln {

const char* toString(CalibrationAlgoType a) {
  switch (a) {
    case CalibrationAlgoType::kENTROPY_CALIBRATION_2: return "entropy";
    case CalibrationAlgoType::kMINMAX_CALIBRATION: return "minmax";
    case CalibrationAlgoType::kPERCENTILE: return "percentile";
  }
  return "unknown";
}

void TensorHistogram::add(const float* x, int64_t n) {
  double batchMax = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    if (!std::isfinite(v)) {
      nonFinite_ = true;
      continue;
    }
    if (seen_ == 0) min_ = max_ = v;
    min_ = std::min(min_, v), max_ = std::max(max_, v);
    batchMax = std::max(batchMax, std::fabs(v));
    ++seen_;
  }
  if (batchMax == 0) {
    for (int64_t i = 0; i < n; ++i) zeros_ += x[i] == 0.f;
    return;
  }
  absMax_ = std::max(absMax_, batchMax);
  if (width_ == 0) width_ = batchMax / kBins;
  while (batchMax > width_ * kBins) {  // double the range: bin pairs merge, no count moves across a bin edge
    for (int b = 0; b < kBins / 2; ++b) counts_[b] = counts_[2 * b] + counts_[2 * b + 1];
    std::fill(counts_.begin() + kBins / 2, counts_.end(), 0.0);
    width_ *= 2;
  }
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(static_cast<double>(x[i]));
    if (!std::isfinite(a)) continue;
    if (a == 0) {
      zeros_ += 1;
      continue;
    }
    counts_[std::min<int64_t>(kBins - 1, static_cast<int64_t>(a / width_))] += 1;
  }
}

std::vector<double> TensorHistogram::counts() const {
  std::vector<double> c = counts_;
  c[0] += zeros_;
  return c;
}

int entropyThresholdBin(const std::vector<double>& counts, int levels) {
  const int n = static_cast<int>(counts.size());
  std::vector<double> bins = counts;
  if (n > 1) bins[0] = bins[1];  // as pytorch-quantization: a spike of zeros (after Relu) would dominate P
  std::vector<double> tail(n + 1, 0.0);  // tail[i] = sum of bins[i..]
  for (int i = n - 1; i >= 0; --i) tail[i] = tail[i + 1] + bins[i];
  double best = std::numeric_limits<double>::infinity();
  int bestI = n;
  std::vector<double> q(n), chunkSum(levels), chunkNonZero(levels);
  for (int i = std::min(levels, n); i <= n; ++i) {
    std::fill(chunkSum.begin(), chunkSum.end(), 0.0);
    std::fill(chunkNonZero.begin(), chunkNonZero.end(), 0.0);
    for (int j = 0; j < i; ++j) {
      const int k = static_cast<int>(static_cast<int64_t>(j) * levels / i);
      chunkSum[k] += bins[j];
      chunkNonZero[k] += bins[j] != 0;
    }
    double qTotal = 0, pTotal = tail[0];
    for (int j = 0; j < i; ++j) {
      const int k = static_cast<int>(static_cast<int64_t>(j) * levels / i);
      q[j] = bins[j] != 0 ? chunkSum[k] / chunkNonZero[k] : 0.0;
      qTotal += q[j];
    }
    if (pTotal <= 0 || qTotal <= 0) continue;
    double kl = 0;
    for (int j = 0; j < i; ++j) {
      const double p = (j == i - 1 ? bins[j] + tail[i] : bins[j]) / pTotal;
      if (p == 0) continue;
      const double qq = q[j] / qTotal;
      if (qq == 0) {
        kl = std::numeric_limits<double>::infinity();
        break;
      }
      kl += p * std::log(p / qq);
    }
    if (kl <= best) best = kl, bestI = i;  // <=: the last minimum, as the reference implementation
  }
  return bestI;
}

double calibratedAmax(const TensorHistogram& h, CalibrationAlgoType algo, double percentile, bool isUnsigned) {
  if (h.absMax() == 0) return 0;
  switch (algo) {
    case CalibrationAlgoType::kMINMAX_CALIBRATION: return h.absMax();
    case CalibrationAlgoType::kPERCENTILE: {
      const std::vector<double> c = h.counts();
      double total = 0;
      for (double v : c) total += v;
      const double want = total * percentile / 100.0;
      double cum = 0;
      for (size_t b = 0; b < c.size(); ++b) {
        cum += c[b];
        if (cum >= want) return std::min(h.absMax(), (b + 1) * h.binWidth());  // the bin's upper edge
      }
      return h.absMax();
    }
    case CalibrationAlgoType::kENTROPY_CALIBRATION_2: {
      const int i = entropyThresholdBin(h.counts(), isUnsigned ? 256 : 128);
      return std::min(h.absMax(), i * h.binWidth());
    }
  }
  return h.absMax();
}

}  // namespace kiln
