// The CPU's peak FP32 rate for rooflines: threads * clock * FLOPs per cycle of its widest FMA
// units (two FMA ports assumed: AVX2 32, AVX-512 64 FLOPs/cycle). Memory bandwidth is not
// something the CPU reports; it stays 0 (unknown) and the roofline shows GB/s without a percent.
#include <fstream>
#include <string>

#include "backends/cpu/device_peak_cpu.h"

namespace kiln::cpu {
namespace {

double maxClockGHz(std::string* model) {
  double ghz = 0;
  std::ifstream freq("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  long khz = 0;
  if (freq >> khz && khz > 0) ghz = khz / 1e6;
  std::ifstream info("/proc/cpuinfo");
  std::string line;
  while (std::getline(info, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (key == "model name" && model->empty()) *model = value;
    if (key == "cpu MHz" && ghz == 0) ghz = std::stod(value) / 1e3;
    if (!model->empty() && ghz > 0) break;
  }
  return ghz;
}

}  // namespace

DevicePeak devicePeak(int threads) {
  DevicePeak p;
  __builtin_cpu_init();
  const double flopsPerCycle = __builtin_cpu_supports("avx512f") ? 64 : __builtin_cpu_supports("fma") ? 32 : 8;
  double ghz = 0;
  try {
    ghz = maxClockGHz(&p.name);
  } catch (const std::exception&) {
    ghz = 0;  // an unreadable /proc: the peak stays unknown
  }
  p.vectorTflops32 = threads * ghz * flopsPerCycle / 1e3;
  p.matrixTflopsTf32 = p.vectorTflops32;  // the CPU tactics compute half/bf16/int8 in FP32 lanes
  p.matrixTflops16 = p.vectorTflops32;
  p.matrixTflops8 = p.vectorTflops32;
  return p;
}

}  // namespace kiln::cpu
