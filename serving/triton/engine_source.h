// Where a model's engine comes from: the version folder's plan file, or its ONNX file built on
// first load with the configuration's parameters.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backend_parameters.h"
#include "kiln/builder.h"

namespace kiln::triton {

//! `versionDir`/`defaultName` when the configuration names a file, else model.plan, else
//! model.onnx. Throws TritonError(NOT_FOUND) listing what was looked for.
std::string findModelFile(const std::string& versionDir, const std::string& defaultName);
bool isOnnxFile(const std::string& path);

//! Builds `onnxPath` for `device` (GPU: CUDA device `deviceIndex`) and returns the plan. Dynamic
//! inputs take their ranges from min/opt/max_shapes; without them, an input whose only dynamic dim
//! is the batch gets [1, maxBatchSize] (opt = maxBatchSize). The timing cache (relative paths:
//! to `modelDir`) is read before and written after the build.
std::vector<uint8_t> buildPlanFromOnnx(const std::string& onnxPath, DeviceType device, int deviceIndex,
                                       const BackendParameters& params, int64_t maxBatchSize,
                                       const std::string& modelDir);
//! The file's bytes; throws TritonError(NOT_FOUND / INTERNAL).
std::vector<uint8_t> readFileBytes(const std::string& path);

}  // namespace kiln::triton
