// The model configuration's `parameters` the kiln backend reads: how to build an engine from
// model.onnx (precision, shape ranges, optimization level, timing cache, threads) and how
// instances run it (CUDA graphs). Unknown keys are reported in a warning, never ignored silently.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "kiln/types.h"

namespace kiln::triton {

struct BackendParameters {
  std::string precision = "fp32";  //!< fp32 | fp16 | bf16 (builds from ONNX only)
  bool tf32 = true;                //!< GPU: TF32 for float32 matmul/conv (builds from ONNX only)
  std::map<std::string, Dims> minShapes, optShapes, maxShapes;  //!< "x:1x3x224x224,y:..." (ONNX only)
  int optimizationLevel = -1;      //!< 0..5; -1: kiln's default (ONNX only)
  std::string timingCacheFile;     //!< read before and written after a build; relative: to the model's folder
  int threads = -1;                //!< CPU worker threads of the engine (0: all; -1: the plan's / kiln's default)
  int maxAuxStreams = -1;          //!< GPU aux streams of a build (-1: kiln's default)
  bool cudaGraphs = false;         //!< GPU instances capture one CUDA graph per input-shape set
  int cudaGraphShapes = 16;        //!< at most this many captured shape sets per instance
  //! Batches an instance keeps in flight (each with its own context, stream and buffers): while one
  //! runs, the next one's inputs are copied in. -1: 2 on a GPU, 1 on the CPU.
  int batchesInFlight = -1;
  bool onnxOnlyGiven = false;      //!< a build-only parameter was given (warned about for plans)
};

//! Parses `parameters`; throws TritonError(INVALID_ARG) naming the key for a bad value and
//! appends one warning per key the backend does not know to `warnings`.
BackendParameters readBackendParameters(const std::map<std::string, std::string>& params,
                                        std::vector<std::string>& warnings);

}  // namespace kiln::triton
