#pragma once
#include "kiln/profiler.h"

namespace kiln::cpu {
//! Peak rates of this CPU with `threads` worker threads (device_peak_cpu.cpp says how).
DevicePeak devicePeak(int threads);
}  // namespace kiln::cpu
