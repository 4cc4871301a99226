// PointwiseChain: the program of a fused chain of float32 elementwise ops (see pointwise_chain.cpp).
#pragma once
#include <string>
#include <vector>

#include "ir/layer_desc.h"
#include "ops/activation.h"

namespace kiln {

struct PointwiseStep {
  std::string op;
  int operand = -1;       //!< input index of the extra operand of a binary step, -1 for unary
  bool swapped = false;   //!< operand OP value instead of value OP operand
  float alpha = 0.f, beta = 0.f;
  bool isActivation = false;
  Activation act;
};

struct PointwiseProgram {
  std::vector<PointwiseStep> steps;
};

//! Ops that can be a step of a chain.
bool isChainableOp(const std::string& op);
//! Validates and decodes a PointwiseChain's attributes.
PointwiseProgram compilePointwise(const Attributes& a, size_t nbInputs);
//! Applies a (fused) activation to n floats in place.
using ActivationFn = void (*)(const Activation& act, float* data, int64_t n);
//! Runs the chain over the output in chunks (multi-threaded when io.pool is set), activation steps
//! through `activation` (the CPU tactic passes its AVX2 one). The op's reference kernel does not use
//! this: it is a plain scalar loop of its own (pointwise_chain.cpp).
void runPointwise(const PointwiseProgram& p, const KernelIO& io, ActivationFn activation);

}  // namespace kiln
