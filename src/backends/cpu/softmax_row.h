// The AVX2 softmax of one contiguous float row (normalization_cpu.cpp), shared by the Softmax /
// LogSoftmax tactics and the attention tactic (attention_cpu.cpp). e^x uses a polynomial whose
// inputs are clamped to the normal float range: a -inf logit contributes ~1e-38, not 0.
#pragma once
#include <cstdint>

namespace kiln::cpu {

//! y[0..n) = softmax(x[0..n)) (or log-softmax when logOutput); x == y is allowed.
void softmaxRowAvx2(const float* x, float* y, int64_t n, bool logOutput);

}  // namespace kiln::cpu
