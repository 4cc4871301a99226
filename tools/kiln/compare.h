// --compareWith=fp32: the engine the flags describe against a float32 engine of the same model,
// tensor by tensor, on the same inputs.
#pragma once
#include <functional>
#include <memory>

#include "kiln/logger.h"
#include "kiln/network.h"
#include "kiln/runtime.h"
#include "options.h"

namespace kiln::cli {

//! Builds an engine for the options, after `instrument` has edited the parsed network.
using EngineBuilder = std::function<std::unique_ptr<Engine>(const Options&, const std::function<void(Network&)>& instrument)>;

//! Marks the activation input of every Conv / MatMul / Gemm as an output in both builds (the
//! tensors quantization error enters through), runs both engines once on the inputs of
//! --loadInputs (else seeded random data), prints max |a - b|, max |a - b| / max |fp32| and the
//! cosine per tensor in network order, and throws kiln::Error naming the first tensor and its
//! layer whose relative error exceeds o.compareTolerance. Returns 0.
int compareWithFp32(const Options& o, const EngineBuilder& build, ILogger& logger);

}  // namespace kiln::cli
