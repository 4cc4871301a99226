// Implicit INT8 calibration: runs the float32 network on the CPU over a calibrator's batches and
// turns the values each quantizable layer's activation input took into a scale.
#pragma once
#include "builder/calib_table.h"
#include "kiln/builder.h"
#include "kiln/calibrator.h"
#include "kiln/logger.h"

namespace kiln {

//! The calibrator's cache when it has one (taken bit for bit), else a calibration run over its
//! batches, whose table is then handed to writeCalibrationCache. `net` must be topologically
//! sorted with shapes inferred; it is not changed (a copy is built). Throws kiln::Error for a batch
//! that does not fit the network (naming the batch and input), no batches, or a bad cache.
CalibrationTable calibrate(const Network& net, const BuilderConfig& cfg, IInt8Calibrator& calibrator, ILogger& log);

}  // namespace kiln
