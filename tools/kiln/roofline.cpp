#include "roofline.h"

#include <algorithm>

namespace kiln::cli {

namespace {
// A layer whose ideal time is under this is launch-bound when it took under kLaunchMs: a kernel's
// fixed cost (launch, ramp-up, tail) on current GPUs is 2-5 us whatever it computes.
constexpr double kTinyMs = 0.002, kLaunchMs = 0.010;
}  // namespace

RooflinePoint rooflinePoint(const LayerCost& c, const DevicePeak& peak, double ms) {
  RooflinePoint r;
  if (ms > 0) {
    r.tflops = c.flops / (ms * 1e-3) / 1e12;
    r.gbs = c.bytes / (ms * 1e-3) / 1e9;
  }
  const double tflopsPeak = peak.tflopsFor(c.type, c.matrix);
  const double computeMs = tflopsPeak > 0 ? c.flops / (tflopsPeak * 1e12) * 1e3 : 0;
  const double memoryMs = peak.memoryGBs > 0 ? c.bytes / (peak.memoryGBs * 1e9) * 1e3 : 0;
  r.idealMs = std::max(computeMs, memoryMs);
  const bool known = tflopsPeak > 0 && peak.memoryGBs > 0;
  if (!known) {
    r.bound = "-";
    if (tflopsPeak > 0 && ms > 0) r.percent = 100.0 * computeMs / ms;  // of the compute peak alone
    return r;
  }
  if (ms > 0) r.percent = 100.0 * r.idealMs / ms;
  if (r.idealMs < kTinyMs && ms < kLaunchMs)
    r.bound = "launch";
  else
    r.bound = computeMs >= memoryMs ? "compute" : "memory";
  return r;
}

}  // namespace kiln::cli
