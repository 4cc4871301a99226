// The per-layer roofline: each layer's measured time beside what it computes and moves
// (ExecutionContext::getLayerCosts) and the device's peaks (Engine::getDevicePeak). Says how far
// each layer is from its bound, and which bound it is: compute, memory, or launch (work too small
// for its time to be anything but a kernel's fixed cost).
#pragma once
#include <string>

#include "kiln/profiler.h"

namespace kiln::cli {

struct RooflinePoint {
  double tflops = 0;   //!< achieved
  double gbs = 0;      //!< achieved
  double idealMs = 0;  //!< the time at the device's peak of the binding resource (0: unknown)
  double percent = -1; //!< idealMs / measured, in percent (-1: the device's peaks are unknown)
  std::string bound;   //!< "compute", "memory", "launch" or "-" (unknown)
};

//! The roofline of one layer that took `ms` on average.
RooflinePoint rooflinePoint(const LayerCost& cost, const DevicePeak& peak, double ms);

}  // namespace kiln::cli
