// The CPU backend's tactic table: every optimized CPU tactic, in one place and one style.
// Order: the builder offers a layer the entries of its op that support it, in this order, and at
// optimization level L times the first 2^L of them, so within an op the best guess comes first
// (the order across ops does not matter). Names: <op>_<type>_<variant> (docs/internals.md, "Tactic
// tables"); they are stored in plans and timing caches, so renaming one bumps both formats.
// Ops without an entry (ArgMax, TopK, CumSum, ...) run their reference kernel.
#include "backends/cpu/cpu_tactics.h"

namespace kiln {

const std::vector<TacticDef>& cpuTacticTable() {
  static const std::vector<TacticDef> table = {
      // Conv: the 3x3 depthwise, the 1x1 NCHW and the narrow-group blocked kernels first (they
      // refuse other convs), then oneDNN, then im2col.
      {"Conv", "conv_f32_depthwise_avx2", cpu::depthwiseConvAvx2()},
      {"Conv", "conv_f32_pointwise_avx2", cpu::pointwiseConvAvx2()},
      {"Conv", "conv_f32_grouped_blocked_avx2", cpu::groupedBlockedConvAvx2()},
#ifdef KILN_HAVE_ONEDNN
      {"Conv", "conv_f32_onednn", cpu::oneDnnConv()},
      {"Conv", "conv_f32_onednn_blocked", cpu::oneDnnConvBlocked()},
#endif
      {"Conv", "conv_f32_im2col_gemm", cpu::im2colConv()},
      // MatMul / Gemm: kiln's AVX2 GEMM, then oneDNN.
      {"MatMul", "matmul_f32_gemm_avx2", cpu::matMulGemmAvx2()},
      {"Gemm", "gemm_f32_avx2", cpu::gemmAvx2()},
#ifdef KILN_HAVE_ONEDNN
      {"MatMul", "matmul_f32_onednn", cpu::oneDnnMatMul()},
      {"Gemm", "gemm_f32_onednn", cpu::oneDnnGemm()},
#endif
#ifdef KILN_HAVE_ONEDNN
      // Integer layers of Q/DQ models (lower_qdq.cpp): oneDNN's int8 primitives (VNNI CPUs).
      {"QLinearConv", "q_linear_conv_int_onednn", cpu::oneDnnQLinearConv()},
      {"QLinearMatMul", "q_linear_matmul_int_onednn", cpu::oneDnnQLinearMatMul()},
#endif
      {"QLinearConv", "q_linear_conv_int_avx2", cpu::qlinearConvAvx2()},
      {"QuantizeLinear", "quantize_linear_f32_avx2", cpu::quantizeLinearAvx2()},
      {"DequantizeLinear", "dequantize_linear_f32_avx2", cpu::dequantizeLinearAvx2()},
      // Pooling (window pools also exchange blocked layouts; global pools read them).
      {"MaxPool", "max_pool_f32_direct", cpu::windowPool()},
      {"AveragePool", "average_pool_f32_direct", cpu::windowPool()},
      {"GlobalAveragePool", "global_average_pool_f32_avx2", cpu::globalAveragePoolAvx2()},
      {"GlobalMaxPool", "global_max_pool_f32_avx2", cpu::globalMaxPoolAvx2()},
      // Normalization and reductions.
      {"Attention", "attention_f32_gemm_avx2", cpu::attentionGemmAvx2()},
      {"Softmax", "softmax_f32_avx2", cpu::softmaxAvx2()},
      {"LogSoftmax", "log_softmax_f32_avx2", cpu::logSoftmaxAvx2()},
      {"LayerNormalization", "layer_normalization_f32_avx2", cpu::layerNormAvx2()},
      {"RMSNormalization", "rms_normalization_f32_avx2", cpu::layerNormAvx2()},
      {"BatchNormalization", "batch_normalization_f32_avx2", cpu::batchNormAvx2()},
      {"GroupNormalization", "group_normalization_f32_avx2", cpu::groupNormAvx2()},
      {"InstanceNormalization", "instance_normalization_f32_avx2", cpu::groupNormAvx2()},
      {"ReduceSum", "reduce_sum_f32_avx2", cpu::reduceSumAvx2()},
      {"ReduceMean", "reduce_mean_f32_avx2", cpu::reduceMeanAvx2()},
      // Elementwise (float32): unary ops, then broadcasting binary ops (Sum/Max/Min of two inputs).
      {"Abs", "abs_f32_avx2", cpu::unaryAvx2()},
      {"Ceil", "ceil_f32_avx2", cpu::unaryAvx2()},
      {"Celu", "celu_f32_avx2", cpu::unaryAvx2()},
      {"Clip", "clip_f32_avx2", cpu::unaryAvx2()},
      {"Elu", "elu_f32_avx2", cpu::unaryAvx2()},
      {"Exp", "exp_f32_avx2", cpu::unaryAvx2()},
      {"Floor", "floor_f32_avx2", cpu::unaryAvx2()},
      {"Gelu", "gelu_f32_avx2", cpu::unaryAvx2()},
      {"HardSigmoid", "hard_sigmoid_f32_avx2", cpu::unaryAvx2()},
      {"HardSwish", "hard_swish_f32_avx2", cpu::unaryAvx2()},
      {"LeakyRelu", "leaky_relu_f32_avx2", cpu::unaryAvx2()},
      {"Mish", "mish_f32_avx2", cpu::unaryAvx2()},
      {"Neg", "neg_f32_avx2", cpu::unaryAvx2()},
      {"Reciprocal", "reciprocal_f32_avx2", cpu::unaryAvx2()},
      {"Relu", "relu_f32_avx2", cpu::unaryAvx2()},
      {"Round", "round_f32_avx2", cpu::unaryAvx2()},
      {"Selu", "selu_f32_avx2", cpu::unaryAvx2()},
      {"Sigmoid", "sigmoid_f32_avx2", cpu::unaryAvx2()},
      {"Softplus", "softplus_f32_avx2", cpu::unaryAvx2()},
      {"Softsign", "softsign_f32_avx2", cpu::unaryAvx2()},
      {"Sqrt", "sqrt_f32_avx2", cpu::unaryAvx2()},
      {"Tanh", "tanh_f32_avx2", cpu::unaryAvx2()},
      {"ThresholdedRelu", "thresholded_relu_f32_avx2", cpu::unaryAvx2()},
      {"Add", "add_f32_avx2", cpu::binaryAvx2()},
      {"Div", "div_f32_avx2", cpu::binaryAvx2()},
      {"Max", "max_f32_avx2", cpu::binaryAvx2()},
      {"Min", "min_f32_avx2", cpu::binaryAvx2()},
      {"Mul", "mul_f32_avx2", cpu::binaryAvx2()},
      {"PRelu", "prelu_f32_avx2", cpu::binaryAvx2()},
      {"Sub", "sub_f32_avx2", cpu::binaryAvx2()},
      {"Sum", "sum_f32_avx2", cpu::binaryAvx2()},
      {"PointwiseChain", "pointwise_chain_f32_avx2", cpu::pointwiseChainAvx2()},
      // Data movement (any element type).
      {"Reshape", "reshape_any_copy", cpu::copyAnyType()},
      {"Flatten", "flatten_any_copy", cpu::copyAnyType()},
      {"Squeeze", "squeeze_any_copy", cpu::copyAnyType()},
      {"Unsqueeze", "unsqueeze_any_copy", cpu::copyAnyType()},
      {"Identity", "identity_any_copy", cpu::copyAnyType()},
      {"Transpose", "transpose_any_blocked", cpu::transposeBlocked()},
      {"Concat", "concat_any_memcpy", cpu::concatMemcpy()},
      {"Slice", "slice_any_memcpy", cpu::sliceMemcpy()},
      {"Gather", "gather_any_memcpy", cpu::gatherMemcpy()},
      {"Resize", "resize_f32_nchw_avx2", cpu::resizeNchwAvx2()},
      {"Upsample", "upsample_f32_nchw_avx2", cpu::resizeNchwAvx2()},
  };
  return table;
}

}  // namespace kiln
