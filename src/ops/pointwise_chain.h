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
//! Runs the chain over the output (multi-threaded when io.pool is set).
void runPointwise(const PointwiseProgram& p, const KernelIO& io);

}  // namespace kiln
