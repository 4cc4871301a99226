#include "reporting.h"
#include "roofline.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <ostream>
#include <sstream>

namespace kiln::cli {

using nlohmann::json;

std::vector<double> averageRuns(const std::vector<double>& samples, int avgRuns) {
  std::vector<double> out;
  size_t group = static_cast<size_t>(std::max(1, avgRuns));
  for (size_t i = 0; i < samples.size(); i += group) {
    size_t end = std::min(samples.size(), i + group);
    out.push_back(std::accumulate(samples.begin() + i, samples.begin() + end, 0.0) / static_cast<double>(end - i));
  }
  return out;
}

Stats computeStats(std::vector<double> samples, const std::vector<double>& percentiles) {
  Stats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  size_t n = samples.size();
  s.min = samples.front();
  s.max = samples.back();
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(n);
  s.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  for (double p : percentiles) {
    // Nearest rank: the smallest sample with at least p% of the samples at or below it.
    double rank = std::ceil(p / 100.0 * static_cast<double>(n));
    size_t idx = rank < 1 ? 0 : std::min(n - 1, static_cast<size_t>(rank) - 1);
    s.percentiles.push_back(samples[idx]);
  }
  return s;
}

namespace {

std::string formatStats(const Stats& s, const std::vector<double>& percentiles, const char* unit) {
  std::ostringstream os;
  os << "min = " << s.min << ' ' << unit << ", max = " << s.max << ' ' << unit << ", mean = " << s.mean << ' ' << unit
     << ", median = " << s.median << ' ' << unit;
  for (size_t i = 0; i < percentiles.size(); ++i)
    os << ", percentile(" << percentiles[i] << "%) = " << s.percentiles[i] << ' ' << unit;
  return os.str();
}

template <typename Get>
void printMetric(std::ostream& os, const char* label, const std::vector<IterationTimes>& times, Get get, int avgRuns,
                 const std::vector<double>& percentiles) {
  std::vector<double> v;
  v.reserve(times.size());
  for (const auto& t : times) v.push_back(get(t));
  os << "[I] " << label << ": " << formatStats(computeStats(averageRuns(v, avgRuns), percentiles), percentiles, "ms")
     << '\n';
}

std::ofstream openOutput(const std::string& path) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error("cannot write '" + path + "': " + std::strerror(errno));
  return f;
}

void writeJsonFile(const std::string& path, const json& j) { writeTextFile(path, j.dump(2) + "\n"); }

}  // namespace

void writeTextFile(const std::string& path, const std::string& text) {
  std::ofstream f = openOutput(path);
  f << text;
  f.close();
  if (!f) throw Error("failed writing '" + path + "'");
}

void printPerformanceSummary(std::ostream& os, const std::vector<IterationTimes>& times, int avgRuns,
                             const std::vector<double>& percentiles, bool gpu) {
  if (times.empty()) return;
  double first = times.front().startMs, last = times.front().endMs, totalCompute = 0;
  for (const auto& t : times) {
    first = std::min(first, t.startMs);
    last = std::max(last, t.endMs);
    totalCompute += t.computeMs;
  }
  double wallMs = last - first;
  os << "[I] === Performance summary ===\n";
  os << "[I] Throughput: " << (wallMs > 0 ? static_cast<double>(times.size()) * 1000.0 / wallMs : 0.0) << " qps\n";
  printMetric(
      os, "Latency", times, [](const IterationTimes& t) { return t.latencyMs(); }, avgRuns, percentiles);
  printMetric(
      os, "Enqueue Time", times, [](const IterationTimes& t) { return t.enqueueMs; }, avgRuns, percentiles);
  if (gpu) {
    printMetric(
        os, "H2D Latency", times, [](const IterationTimes& t) { return t.h2dMs; }, avgRuns, percentiles);
    printMetric(
        os, "GPU Compute Time", times, [](const IterationTimes& t) { return t.computeMs; }, avgRuns, percentiles);
    printMetric(
        os, "D2H Latency", times, [](const IterationTimes& t) { return t.d2hMs; }, avgRuns, percentiles);
  } else {
    printMetric(
        os, "Compute Time", times, [](const IterationTimes& t) { return t.computeMs; }, avgRuns, percentiles);
  }
  os << "[I] Total Host Walltime: " << wallMs / 1000.0 << " s\n";
  os << "[I] Total " << (gpu ? "GPU " : "") << "Compute Time: " << totalCompute / 1000.0 << " s\n";
}

void writeTimesJson(const std::string& path, const std::vector<IterationTimes>& times, bool gpu) {
  // trtexec's keys (startEnqMs ... latencyMs): H2D, compute and D2H run one after another from
  // the start of the iteration (on the CPU, H2D and D2H take 0 ms). kiln's own keys (startMs,
  // endMs, enqueueMs) stay for its scripts.
  json arr = json::array();
  for (const auto& t : times) {
    double h2dEnd = t.startMs + t.h2dMs, computeEnd = h2dEnd + t.computeMs;
    json j = {{"startEnqMs", t.startMs},
              {"endEnqMs", t.startMs + t.enqueueMs},
              {"startH2dMs", t.startMs},
              {"endH2dMs", h2dEnd},
              {"startComputeMs", h2dEnd},
              {"endComputeMs", computeEnd},
              {"startD2hMs", computeEnd},
              {"endD2hMs", computeEnd + t.d2hMs},
              {"h2dMs", gpu ? t.h2dMs : 0.0},
              {"computeMs", t.computeMs},
              {"d2hMs", gpu ? t.d2hMs : 0.0},
              {"latencyMs", t.latencyMs()},
              {"startMs", t.startMs},
              {"endMs", t.endMs},
              {"enqueueMs", t.enqueueMs}};
    arr.push_back(std::move(j));
  }
  writeJsonFile(path, arr);  // nlohmann writes NaN/inf as null: the file stays valid JSON
}

// ---- per-layer profile ----

void LayerProfiler::reportLayerTime(const std::string& layerName, float ms) noexcept {
  try {
    if (cursor_ >= layers_.size() || layers_[cursor_].name != layerName) {
      auto it = std::find_if(layers_.begin(), layers_.end(), [&](const LayerTimes& l) { return l.name == layerName; });
      if (it == layers_.end()) it = layers_.insert(layers_.end(), LayerTimes{layerName, {}});
      cursor_ = static_cast<size_t>(it - layers_.begin());
    }
    layers_[cursor_].ms.push_back(ms);
    ++cursor_;
  } catch (...) {
    overflow_ = true;
  }
}

std::vector<LayerProfiler::Row> LayerProfiler::rows() const {
  std::vector<Row> rows;
  double total = 0;
  for (const auto& l : layers_) total += std::accumulate(l.ms.begin(), l.ms.end(), 0.0);
  for (const auto& l : layers_) {
    std::vector<double> v(l.ms.begin(), l.ms.end());
    Stats s = computeStats(v, {});
    double sum = std::accumulate(v.begin(), v.end(), 0.0);
    // Average per profiled enqueue (a layer reports once per enqueue).
    double perIter = iterations_ > 0 ? sum / iterations_ : s.mean;
    rows.push_back(Row{l.name, sum, perIter, s.median, total > 0 ? 100.0 * sum / total : 0.0});
  }
  return rows;
}

void LayerProfiler::print(std::ostream& os) const {
  if (overflow_) os << "[W] some layer times were not recorded (out of memory)\n";
  os << "[I] \n[I] === Profile (" << iterations_ << " iterations ) ===\n";
  os << "[I]    Time(ms)     Avg.(ms)   Median(ms)   Time(%)   Layer\n";
  double total = 0, totalAvg = 0;
  auto line = [&](double t, double a, double m, double p, const std::string& name) {
    os << "[I] " << std::fixed << std::setprecision(2) << std::setw(11) << t << std::setprecision(4) << std::setw(13)
       << a << std::setw(13) << m << std::setprecision(1) << std::setw(10) << p << "   " << name << '\n'
       << std::defaultfloat << std::setprecision(6);
  };
  for (const Row& r : rows()) {
    line(r.totalMs, r.averageMs, r.medianMs, r.percentage, r.name);
    total += r.totalMs;
    totalAvg += r.averageMs;
  }
  line(total, totalAvg, totalAvg, 100.0, "Total");
  if (!costs_.empty()) printRoofline(os, rows());
}

void LayerProfiler::setRoofline(std::vector<LayerCost> costs, DevicePeak peak, std::vector<size_t> liveBytes) {
  costs_ = std::move(costs);
  peak_ = std::move(peak);
  liveBytes_ = std::move(liveBytes);
}

double LayerProfiler::liveMbOf(const LayerCost* c) const {
  const size_t i = static_cast<size_t>(c - costs_.data());
  return i < liveBytes_.size() ? liveBytes_[i] / 1e6 : 0.0;
}

const LayerCost* LayerProfiler::costOf(const std::string& name) const {
  for (const LayerCost& c : costs_)
    if (c.name == name) return &c;
  return nullptr;
}

void LayerProfiler::printRoofline(std::ostream& os, const std::vector<Row>& rs) const {
  os << std::fixed << "[I] \n[I] === Roofline (" << (peak_.name.empty() ? "device" : peak_.name) << ": "
     << std::setprecision(2) << peak_.matrixTflops16 << " TFLOP/s FP16 matrix, " << peak_.vectorTflops32
     << " TFLOP/s FP32 vector, " << std::setprecision(0) << peak_.memoryGBs << " GB/s; 0 = unknown) ===\n";
  os << "[I]     Avg.(ms)       GFLOP          MB    TFLOP/s       GB/s  %roof  Bound     Live MB  Layer\n";
  double ms = 0, flops = 0, bytes = 0;
  std::map<std::string, double> boundMs;
  for (const Row& r : rs) {
    const LayerCost* c = costOf(r.name);
    if (!c) continue;
    const RooflinePoint p = rooflinePoint(*c, peak_, r.averageMs);
    ms += r.averageMs, flops += c->flops, bytes += c->bytes;
    boundMs[p.bound] += r.averageMs;
    os << "[I] " << std::setprecision(4) << std::setw(12) << r.averageMs << std::setprecision(3) << std::setw(12)
       << c->flops / 1e9 << std::setw(12) << c->bytes / 1e6 << std::setprecision(2) << std::setw(11) << p.tflops
       << std::setprecision(1) << std::setw(11) << p.gbs << std::setw(7);
    if (p.percent >= 0) os << p.percent; else os << "-";
    os << "  " << std::left << std::setw(8) << p.bound << std::right << std::setprecision(1) << std::setw(9)
       << liveMbOf(c) << "  " << r.name << '\n';
  }
  os << "[I] " << std::setprecision(4) << std::setw(12) << ms << std::setprecision(3) << std::setw(12) << flops / 1e9
     << std::setw(12) << bytes / 1e6 << std::setprecision(2) << std::setw(11) << (ms > 0 ? flops / ms / 1e9 : 0)
     << std::setprecision(1) << std::setw(11) << (ms > 0 ? bytes / ms / 1e6 : 0) << "                   Total\n";
  os << "[I] Time by bound:";
  for (const auto& [bound, t] : boundMs) os << ' ' << bound << ' ' << std::setprecision(1) << (ms > 0 ? 100 * t / ms : 0) << '%';
  os << '\n' << std::defaultfloat << std::setprecision(6);
}

void LayerProfiler::writeJson(const std::string& path) const {
  json arr = json::array();
  arr.push_back({{"count", iterations_}});
  double ms = 0, flops = 0, bytes = 0;
  for (const Row& r : rows()) {
    json j = {{"name", r.name},
              {"timeMs", r.totalMs},
              {"averageMs", r.averageMs},
              {"medianMs", r.medianMs},
              {"percentage", r.percentage}};
    if (const LayerCost* c = costOf(r.name)) {
      const RooflinePoint p = rooflinePoint(*c, peak_, r.averageMs);
      j.update({{"op", c->op}, {"flops", c->flops}, {"bytes", c->bytes}, {"tflops", p.tflops}, {"gbs", p.gbs},
                {"peakPercent", p.percent}, {"bound", p.bound}, {"liveBytes", liveMbOf(c) * 1e6}});
      ms += r.averageMs, flops += c->flops, bytes += c->bytes;
    }
    arr.push_back(std::move(j));
  }
  if (!costs_.empty()) {
    arr[0]["device"] = {{"name", peak_.name},
                        {"matrixTflops16", peak_.matrixTflops16},
                        {"matrixTflops8", peak_.matrixTflops8},
                        {"matrixTflopsTf32", peak_.matrixTflopsTf32},
                        {"vectorTflops32", peak_.vectorTflops32},
                        {"memoryGBs", peak_.memoryGBs}};
    arr[0]["total"] = {{"averageMs", ms}, {"flops", flops}, {"bytes", bytes},
                       {"tflops", ms > 0 ? flops / ms / 1e9 : 0}, {"gbs", ms > 0 ? bytes / ms / 1e6 : 0}};
  }
  writeJsonFile(path, arr);
}

// ---- outputs ----

namespace {

json floatValue(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

json elementValue(const HostTensor& t, int64_t i) {
  if (isNarrowFloat(t.type())) return floatValue(t.getDouble(i));
  switch (t.type()) {
    case DataType::kFLOAT:
      return floatValue(t.as<float>()[i]);
    case DataType::kDOUBLE:
      return floatValue(t.as<double>()[i]);
    case DataType::kHALF:
      return floatValue(halfToFloat(t.as<uint16_t>()[i]));
    case DataType::kBF16:
      return floatValue(bf16ToFloat(t.as<uint16_t>()[i]));
    case DataType::kBOOL:
      return t.as<uint8_t>()[i] != 0;
    case DataType::kUINT64:
      return t.as<uint64_t>()[i];
    default:
      return t.getInt(i);
  }
}

}  // namespace

void writeOutputsJson(const std::string& path, const std::vector<NamedTensor>& outputs) {
  json arr = json::array();
  for (const auto& [name, t] : outputs) {
    json values = json::array();
    for (int64_t i = 0; i < t.count(); ++i) values.push_back(elementValue(t, i));
    std::string dimensions;  // trtexec's "1x1000"
    for (size_t i = 0; i < t.dims().size(); ++i) dimensions += (i ? "x" : "") + std::to_string(t.dims()[i]);
    arr.push_back({{"name", name},
                   {"dimensions", dimensions},
                   {"values", std::move(values)},
                   {"dims", t.dims()},
                   {"dtype", toString(t.type())}});
  }
  writeJsonFile(path, arr);
}

void printOutputs(std::ostream& os, const std::vector<NamedTensor>& outputs) {
  constexpr int64_t kShown = 16;
  for (const auto& [name, t] : outputs) {
    os << "[I] Output '" << name << "': " << toString(t.type()) << ' ' << toString(t.dims()) << "\n[I]   ";
    for (int64_t i = 0; i < std::min(t.count(), kShown); ++i) os << (i ? " " : "") << elementValue(t, i).dump();
    if (t.count() > kShown) os << " ... (" << t.count() << " values)";
    os << '\n';
  }
}

}  // namespace kiln::cli
