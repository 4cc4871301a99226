// Declarations of in-place execution (backends/in_place.h), by op for ops whose every kernel
// qualifies and by tactic where only some do. A kernel added for one of these ops must qualify
// too (TacticTable.* run every table entry and reference kernel in place where declared).
#include "backends/in_place.h"

namespace kiln {

namespace {

//! Ops whose every kernel (reference, CPU, CUDA) computes output element i from element i of
//! input 0 (and broadcast elements of the other inputs) in one step, reading input 0 nowhere
//! else: PointwiseChain kernels load the chain's value from input 0 once and then work on it.
//! Only input 0: a chain's kernels may write a chunk of the output before gathering another
//! operand's elements of that chunk.
bool elementwiseOverInput0(const std::string& op) {
  static const char* kOps[] = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Gelu", "HardSwish", "HardSigmoid", "Elu",
                               "Selu", "Celu", "Softplus", "Softsign", "Mish", "Erf", "Exp", "Log", "Sqrt", "Neg",
                               "Abs", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Clip", "Add",
                               "Sub", "Mul", "Div", "Pow", "Max", "Min", "PointwiseChain"};
  for (const char* o : kOps)
    if (op == o) return true;
  return false;
}

//! Ops whose every kernel (reference, softmax_f32_avx2 and log_softmax_f32_avx2, CUDA's row and
//! column kernels) reads a whole line (the elements reduced together) of input 0 before it writes
//! any element of that line, then reads element k of the line before writing element k, and
//! touches no other line: the reductions finish before the output pass.
bool lineWiseOverInput0(const std::string& op) { return op == "Softmax" || op == "LogSoftmax"; }

//! The same by groups: every GroupNormalization / InstanceNormalization kernel (reference,
//! *_f32_avx2, CUDA's row kernel, and the split and channels-last tactics, whose statistics pass
//! reads all of X and leaves the groups' shifts in the workspace before the apply pass writes)
//! reads a group's elements for its statistics before it writes any of them, then element k
//! before writing k. A residual network's norm then writes over its conv's output instead of
//! holding both (ResNet-50-GN at batch 64: four 98 MiB buffers live at once instead of two). A fused
//! residual (input 3) is read at element k beside X's element k, so it does not change this.
bool groupWiseOverInput0(const std::string& op) { return op == "GroupNormalization" || op == "InstanceNormalization"; }

//! Conv tactics that may write Y over the residual R (input 3, in Y's layout by the fusion
//! contract). Each reads R into Y's place before it accumulates into it:
//! - conv_f32_onednn / _blocked: oneDNN's sum post-op accumulates into Y, which is first given
//!   R (copied, or reordered into scratch when Y is reordered; skipped when R is Y);
//! - conv_f32_im2col_gemm: R copied into Y (skipped when R is Y), then the GEMM with beta = 1;
//! - conv_half_cublaslt_1x1_*: R is cuBLASLt's C matrix and Y its D, with one layout; cuBLASLt
//!   supports C == D (in-place matmul) when both descriptors are the same.
//! Not listed: cuDNN tactics (whose epilogue kernel adds R after the convolution wrote Y, or
//! whose fused graph gives no aliasing guarantee), the depthwise and patch-GEMM tactics, and the
//! reference kernel.
bool convOverResidual(const std::string& tactic) {
  static const char* kTactics[] = {"conv_f32_onednn", "conv_f32_onednn_blocked", "conv_f32_im2col_gemm"};
  for (const char* t : kTactics)
    if (tactic == t) return true;
  return tactic.rfind("conv_half_cublaslt_1x1_", 0) == 0;
}

}  // namespace

int inPlaceInput(const std::string& op, const std::string& tactic, size_t inputs) {
  if (inputs == 0) return -1;
  if (elementwiseOverInput0(op) || lineWiseOverInput0(op) || groupWiseOverInput0(op)) return 0;
  if (op == "Conv" && inputs > 3 && convOverResidual(tactic)) return 3;
  return -1;
}

}  // namespace kiln
