#pragma once
#include <string>

#include "kiln/types.h"

namespace kiln {

//! Per-layer timing callback: called after each layer of an enqueue with the time it took.
//! Set on an ExecutionContext; while set, enqueue measures every layer (slower). On the GPU the
//! times are the kernels' own (CUDA events around each layer, read when the enqueue ends), so a
//! layer's time excludes the host's launch overhead; on the CPU they are wall times.
class IProfiler {
 public:
  virtual ~IProfiler() = default;
  virtual void reportLayerTime(const std::string& layerName, float ms) noexcept = 0;
};

//! What one layer of an engine computes and moves at the context's current shapes: the numbers a
//! roofline puts beside the layer's measured time (ExecutionContext::getLayerCosts).
struct LayerCost {
  std::string name;  //!< the layer's name, as IProfiler reports it
  std::string op;
  double flops = 0;   //!< arithmetic operations (a multiply-add counts 2)
  double bytes = 0;   //!< bytes the layer reads and writes at least once (inputs, weights, outputs)
  bool matrix = false;  //!< runs on matrix units (tensor cores) when the type allows: Conv, MatMul, Attention, ...
  DataType type = DataType::kFLOAT;  //!< the layer's compute precision
  bool runs = true;   //!< false for a layer that launches nothing (a view, a value computed on the host)
  //! The tactic the layer runs with at these shapes (a size bucket's where the profile has several)
  std::string tactic;
};

//! A device's peak rates, read from the device (specification values, not measurements):
//! what the roofline's "percent of peak" divides by. 0 when unknown.
struct DevicePeak {
  std::string name;
  double matrixTflops16 = 0;   //!< FP16/BF16 dense matrix math (tensor cores)
  double matrixTflops8 = 0;    //!< INT8/FP8 dense matrix math
  double matrixTflopsTf32 = 0; //!< FP32 inputs on matrix units (TF32)
  double vectorTflops32 = 0;   //!< FP32 vector math (fused multiply-add on every lane)
  double memoryGBs = 0;        //!< main-memory bandwidth, GB/s
  //! The peak (TFLOP/s) that bounds a layer of `type`, on matrix units when `matrix`.
  double tflopsFor(DataType type, bool matrix) const;
};

}  // namespace kiln
