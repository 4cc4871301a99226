#pragma once
#include "kiln/profiler.h"

namespace kiln::cuda {
//! Peak rates of CUDA device `device` (device_peak_cuda.cpp says how).
DevicePeak devicePeak(int device);
}  // namespace kiln::cuda
