// RNN / GRU / LSTM attributes, parsed once for the CPU reference (ops/recurrent.cpp) and the
// CUDA kernel (backends/cuda/recurrent_cuda.cu): cell, gates, direction, layout, clip,
// input_forget, linear_before_reset, and the activation functions with their alpha/beta.
#pragma once
#include <cstdint>
#include <vector>

#include "ir/layer_desc.h"

namespace kiln {

enum class Cell { kRnn, kGru, kLstm };

//! The activation functions the ONNX recurrent ops accept (the order is part of the CUDA
//! kernel's contract: it switches on the value).
enum class RecAct { kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu, kSoftsign, kSoftplus };

struct RecActivation {
  RecAct kind = RecAct::kTanh;
  double alpha = 0, beta = 0;
  double operator()(double x) const;
};

struct RecurrentConfig {
  Cell cell = Cell::kRnn;
  int64_t gates = 1;
  int64_t dirs = 1;
  bool reverse = false;  // direction == "reverse" (a single backward pass)
  int64_t layout = 0;
  double clip = 0;       // 0: no clip
  bool inputForget = false;
  bool linearBeforeReset = false;
  std::vector<RecActivation> acts;  // activationCount(cell) per direction
};

//! The layer's attributes, validated (throws kiln::Error / UnsupportedError).
RecurrentConfig parseRecurrentConfig(const LayerDesc& l);

}  // namespace kiln
