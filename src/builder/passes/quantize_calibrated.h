// Implicit INT8 / FP8 (quantize_calibrated.cpp): calibrated scales become Q/DQ pairs that lowerQdq
// turns into integer (or FP8) layers.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "builder/calib_table.h"
#include "ir/layer_desc.h"
#include "kiln/network.h"

namespace kiln {

//! The layers implicit quantization takes: Conv, and MatMul / Gemm whose weight (input 1) is a
//! constant 2-D matrix (Gemm without transA, alpha = beta = 1), reading float32 activations, with no
//! float precision constraint. Everything else (Softmax, normalizations, residual Adds, pools,
//! attention's activation x activation MatMuls) stays float: kiln has no integer kernel for it.
bool isQuantizable(const Layer& l);

struct ImplicitQuantization {
  std::vector<std::string> quantized;              //!< original layer names now running INT8 or FP8
  int fp8 = 0;                                     //!< how many of them run FP8
  std::map<std::string, std::string> keptFloat;    //!< original layer name -> why it stays float
};

//! Puts QuantizeLinear/DequantizeLinear with the table's scale before the activation input of every
//! quantizable layer, quantizes its weight per output channel (symmetric int8 in [-weightLimit,
//! weightLimit]: Backend::int8WeightLimit), runs lowerQdq, and puts back the float inputs of a layer
//! lowerQdq did not lower (`supported` refused its integer form), so that no Q/DQ is left to compute
//! as float arithmetic.
//! What implicit quantization makes: with `fp8`, MatMul / Gemm go FP8 E4M3 (per-tensor scales: the
//! calibrated amax / 448 and max|W| / 448; lowered to Fp8MatMul); with `int8`, Conv (and MatMul /
//! Gemm when not FP8) go INT8.
struct ImplicitTargets {
  bool int8 = true;
  bool fp8 = false;
  //! INT8 activations always signed (the GPU: cuDNN's int8 convolutions read int8 only, as TensorRT's
  //! symmetric INT8 does); else uint8 where calibration saw no negative value (oneDNN's u8 sources).
  bool signedActivations = false;
  //! Conv only where the layer's precision asks for INT8 (--layerPrecisions=NAME:int8), else kept
  //! float with the reason: the GPU's int8 convs pay a separate QuantizeLinear pass per input and
  //! lose the residual fusion, so a whole ResNet-50 ran slower than FP16 (H100, session 33:
  //! bench/results/int8-h100.md).
  bool convsOnRequest = false;
};

bool quantizeCalibrated(Network& net, const CalibrationTable& table, const std::function<bool(const LayerDesc&)>& supported,
                        int weightLimit, ImplicitTargets targets, ImplicitQuantization* result);

}  // namespace kiln
