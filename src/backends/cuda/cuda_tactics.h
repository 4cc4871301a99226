// The CUDA backend's kernel families: what each file exports (one KernelFactory per
// implementation) and the table that names them in timing-priority order (tactic_table.cpp).
#pragma once
#include <vector>

#include "backends/backend.h"

namespace kiln {

//! Every CUDA tactic, best guess first per op (tactic_table.cpp).
const std::vector<TacticDef>& cudaTacticTable();

namespace cuda {
// elementwise_cuda.cpp (the op picks the function; types as the CPU OpDefs define them)
KernelFactory unaryCuda();
KernelFactory binaryCuda();
KernelFactory powCuda();
KernelFactory variadicCuda();  // Sum, Mean, Max, Min
KernelFactory whereCuda();
KernelFactory castCuda();  // Cast, CastLike
KernelFactory identityMemcpy();
KernelFactory pointwiseChainCuda();
// matmul_cuda.cpp: cuBLASLt heuristic algorithm `algo` (0..3)
KernelFactory cublasLtMatMul(int algo);
KernelFactory cublasLtGemm(int algo);
#ifdef KILN_HAVE_CUDNN_FRONTEND
// conv_cudnn.cpp: cuDNN engine config `engine` (0..3; padded stem conv: 0..1)
KernelFactory cudnnConv(int engine);  // Conv, ConvTranspose
KernelFactory cudnnConvPad8(int engine);
// attention_cudnn.cpp
KernelFactory cudnnSdpa();
// matmul_cudnn.cpp: MatMul + bias + an activation cuBLASLt cannot fuse, engine config `engine` (0..1)
KernelFactory cudnnFusedMatMul(int engine);
// qlinear_conv_cudnn.cpp: QLinearConv on cuDNN's int8 convolutions, engine config `engine` (0..3)
KernelFactory cudnnQLinearConv(int engine);
#endif
// conv_transpose_direct.cu, conv_depthwise{,_nhwc,_nhwc_smem,_nchw}.cu, conv_gemm.cpp (cuBLASLt algorithm `algo`)
KernelFactory convTransposeDirectCuda();
KernelFactory depthwiseConvCuda();
KernelFactory depthwiseConvNhwcCuda();
KernelFactory depthwiseConvNhwcTiledCuda();
KernelFactory depthwiseConvNhwcSmemCuda();
KernelFactory depthwiseConvNchwTiledCuda();
KernelFactory gemm1x1Conv(int algo);    // 0..2
KernelFactory patchGemmConv(int algo);  // 0..1
KernelFactory patchGemmNhwcConv(int algo);  // 0..1
KernelFactory im2colGemmConv(int algo);     // 0..1 (conv_im2col_gemm.cpp)
KernelFactory smallCinWmmaConv();           // conv_small_cin_wmma.cu (stem convs, C % 8 != 0)
KernelFactory fp8MatMulCublasLt(int algo);  // 0..1 (Fp8MatMul)
KernelFactory fp8Quantize();                // Fp8Quantize
// pool_cuda.cu
KernelFactory windowPoolCuda();  // MaxPool, AveragePool, LpPool
KernelFactory globalPoolCuda();
KernelFactory lrnCuda();
// normalization_cuda.cpp
KernelFactory softmaxCuda();  // Softmax, LogSoftmax
KernelFactory layerNormCuda();  // LayerNormalization, RMSNormalization
KernelFactory layerNormWarpRowsCuda();  // the same, rows in registers, a row per lane group (norm_warp_rows.cu)
KernelFactory groupNormCuda();  // GroupNormalization, InstanceNormalization
KernelFactory groupNormSplitCuda();  // the same over many blocks per group (norm_group_split.cu)
KernelFactory groupNormSplitOnePassCuda();  // one cooperative launch where the tensor fits on the GPU at once
KernelFactory groupNormNhwcCuda();   // channels-last X and Y (norm_group_nhwc.cu)
KernelFactory groupNormNhwcOnePassCuda();  // the same, one cooperative kernel where the tensor is small
KernelFactory groupNormNhwcClusterCuda();  // the same, one thread-block cluster per image where it fits
KernelFactory batchNormCuda();
KernelFactory reduceCuda();  // every Reduce* op
KernelFactory argCuda();     // ArgMax, ArgMin
KernelFactory topKCuda();
KernelFactory cumulativeCuda();  // CumSum, CumProd
// shape_cuda.cpp, shape_index.cu, shape_misc.cu, resize_cuda.cu, layout_cuda.cu
KernelFactory copyCuda();
KernelFactory transposeCuda();
KernelFactory concatCuda();
KernelFactory splitCuda();
KernelFactory concatSegmentsCuda();  // one launch for every piece
KernelFactory splitSegmentsCuda();
KernelFactory sliceCuda();
KernelFactory expandCuda();
KernelFactory tileCuda();
KernelFactory depthToSpaceCuda();
KernelFactory spaceToDepthCuda();
KernelFactory constantOfShapeCuda();
KernelFactory gatherCuda();
KernelFactory gatherElementsCuda();
KernelFactory gatherNdCuda();
KernelFactory scatterElementsCuda();  // ScatterElements, Scatter
KernelFactory scatterNdCuda();
KernelFactory oneHotCuda();
KernelFactory padCuda();
KernelFactory triluCuda();
KernelFactory rangeCuda();
KernelFactory shapeValuesCuda();  // Shape, Size
KernelFactory resizeCuda();       // Resize, Upsample
KernelFactory layoutConvertCuda();  // nchw <-> nhwc
// attention_cuda.cpp (flash kernels: 64, 128, 32 query rows per block; SIMT), attention_general.cu
KernelFactory flashAttentionM64();
KernelFactory flashAttentionM128();
KernelFactory flashAttentionM32();
KernelFactory flashAttentionSimt();
KernelFactory generalAttentionCuda();
// norm_misc.cu, matmul_integer.cu, einsum_cuda.cu, recurrent_cuda.cu, rotary_cuda.cu,
// quantize_cuda.cu, grid_sample_cuda.cu
KernelFactory hardmaxCuda();
KernelFactory lpNormCuda();
KernelFactory mvnCuda();
KernelFactory detCuda();
KernelFactory matMulIntegerCuda();
KernelFactory einsumCuda();
KernelFactory recurrentCuda();  // RNN, GRU, LSTM
KernelFactory rotaryEmbeddingCuda();
// random_cuda.cu: RandomUniform(Like), RandomNormal(Like), Bernoulli
KernelFactory randomCuda();
KernelFactory quantizeCuda();  // QuantizeLinear, DequantizeLinear
KernelFactory gridSampleCuda();
// qlinear_matmul_cuda.cpp: QLinearMatMul with constant weights (int32 product by cuBLASLt / dp4a)
KernelFactory qlinearMatMulCublasLt();
KernelFactory qlinearMatMulDp4a();
}  // namespace cuda

}  // namespace kiln
