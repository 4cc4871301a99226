// Timing statistics, the trtexec-style performance summary, per-layer profiles and JSON exports.
#pragma once
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "kiln/profiler.h"
#include "kiln/types.h"

namespace kiln::cli {

//! One timed inference. Times are in ms; start/end are relative to the start of the timed loop.
struct IterationTimes {
  double startMs = 0, endMs = 0;
  double h2dMs = 0, enqueueMs = 0, computeMs = 0, d2hMs = 0;
  double latencyMs() const { return endMs - startMs; }
};

struct Stats {
  double min = 0, max = 0, mean = 0, median = 0;
  std::vector<double> percentiles;  //!< in the order of the requested percentiles
};

//! Averages consecutive groups of `avgRuns` samples (the last group may be shorter).
std::vector<double> averageRuns(const std::vector<double>& samples, int avgRuns);
//! min/max/mean/median and nearest-rank percentiles of `samples` (must be non-empty).
Stats computeStats(std::vector<double> samples, const std::vector<double>& percentiles);

//! Prints "[I] === Performance summary ===" and its lines (Throughput, Latency, Enqueue Time,
//! H2D Latency / GPU Compute Time / D2H Latency on the GPU or Compute Time on the CPU, Total Host
//! Walltime, Total [GPU] Compute Time).
void printPerformanceSummary(std::ostream& os, const std::vector<IterationTimes>& times, int avgRuns,
                             const std::vector<double>& percentiles, bool gpu);

//! Writes per-iteration times as trtexec does: [{startEnqMs, endEnqMs, startH2dMs, endH2dMs,
//! startComputeMs, endComputeMs, startD2hMs, endD2hMs, h2dMs, computeMs, d2hMs, latencyMs}],
//! plus kiln's startMs, endMs, enqueueMs.
void writeTimesJson(const std::string& path, const std::vector<IterationTimes>& times, bool gpu);

//! Collects per-layer times over profiled enqueues (layers in first-seen order).
class LayerProfiler : public IProfiler {
 public:
  void reportLayerTime(const std::string& layerName, float ms) noexcept override;
  void setIterations(int n) { iterations_ = n; }
  //! Adds the per-layer roofline (roofline.h) to print and writeJson.
  //! `liveBytes`: per layer of `costs` (engine order), the arena bytes live while it runs.
  void setRoofline(std::vector<LayerCost> costs, DevicePeak peak, std::vector<size_t> liveBytes = {});
  //! Prints trtexec's "=== Profile (N iterations ) ===" table, then the roofline when set.
  void print(std::ostream& os) const;
  //! Writes [{"count": N}, {"name", "timeMs", "averageMs", "medianMs", "percentage"}, ...] (trtexec's
  //! form); with a roofline, each layer also has "op", "flops", "bytes", "tflops", "gbs",
  //! "peakPercent", "bound", and the first entry "device" (the peaks) and "total".
  void writeJson(const std::string& path) const;

 private:
  struct LayerTimes {
    std::string name;
    std::vector<float> ms;
  };
  struct Row {
    std::string name;
    double totalMs, averageMs, medianMs, percentage;
  };
  std::vector<Row> rows() const;
  void printRoofline(std::ostream& os, const std::vector<Row>& rows) const;
  const LayerCost* costOf(const std::string& name) const;
  std::vector<LayerTimes> layers_;
  std::vector<LayerCost> costs_;
  DevicePeak peak_;
  std::vector<size_t> liveBytes_;
  double liveMbOf(const LayerCost* c) const;
  size_t cursor_ = 0;  //!< where the next layer most likely is (same order every enqueue)
  int iterations_ = 0;
  bool overflow_ = false;  // a time could not be recorded (out of memory)
};

//! A named output tensor on the host.
using NamedTensor = std::pair<std::string, HostTensor>;

//! Writes trtexec's [{"name", "dimensions": "AxB", "values"}] plus kiln's "dims" (a list) and
//! "dtype"; half/bf16 values are written as floats, non-finite floats as the strings "nan",
//! "inf", "-inf" (valid JSON that float() and NumPy read back exactly).
void writeOutputsJson(const std::string& path, const std::vector<NamedTensor>& outputs);
//! Prints each output's name, dtype, dims and its first values.
void printOutputs(std::ostream& os, const std::vector<NamedTensor>& outputs);

//! Writes `text` to `path`; throws kiln::Error naming the file on failure.
void writeTextFile(const std::string& path, const std::string& text);

}  // namespace kiln::cli
