// kiln: an inference optimizer and runtime. Umbrella header.
#pragma once
#include "kiln/builder.h"
#include "kiln/device.h"
#include "kiln/layer_precisions.h"
#include "kiln/logger.h"
#include "kiln/network.h"
#include "kiln/onnx_parser.h"
#include "kiln/plugin.h"
#include "kiln/profiler.h"
#include "kiln/runtime.h"
#include "kiln/shape_inputs.h"
#include "kiln/types.h"
#include "kiln/version.h"
