// The CUDA backend's kernel inventory: each op family adds its tactics from one function, listed
// in cuda_backend.cpp. Kernels run on io.stream (a cudaStream_t), never synchronize the host and
// never allocate in execute(); device workspace comes from reshape()'s return value.
#pragma once
#include <vector>

#include "backends/backend.h"

namespace kiln {

using CudaTacticDef = TacticDef;

void addElementwiseCudaTactics(std::vector<CudaTacticDef>& v);    // elementwise, Cast, Where, PointwiseChain
void addMatMulCudaTactics(std::vector<CudaTacticDef>& v);         // MatMul, Gemm (cuBLASLt)
void addConvPoolCudaTactics(std::vector<CudaTacticDef>& v);       // Conv, ConvTranspose (cuDNN), pooling
void addNormalizationCudaTactics(std::vector<CudaTacticDef>& v);  // norms, softmax, reductions, arg/topk/cumsum
void addShapeCudaTactics(std::vector<CudaTacticDef>& v);          // data movement, resize
void addAttentionCudaTactics(std::vector<CudaTacticDef>& v);      // fused attention (flash kernels)
void addCudnnSdpaTactics(std::vector<CudaTacticDef>& v);          // fused attention (cuDNN SDPA, attention_cudnn.cpp)
void addAttentionGeneralCudaTactics(std::vector<CudaTacticDef>& v);  // Attention's every feature (attention_general.cu)
void addNormMiscCudaTactics(std::vector<CudaTacticDef>& v);       // Hardmax, LpNormalization, MVN, Det (norm_misc.cu)
void addMatMulIntegerCudaTactics(std::vector<CudaTacticDef>& v);  // MatMulInteger (matmul_integer.cu)
void addEinsumCudaTactics(std::vector<CudaTacticDef>& v);         // Einsum (einsum_cuda.cu)
void addRecurrentCudaTactics(std::vector<CudaTacticDef>& v);      // RNN, GRU, LSTM (recurrent_cuda.cu)
void addRotaryCudaTactics(std::vector<CudaTacticDef>& v);         // RotaryEmbedding (rotary_cuda.cu)
void addQuantizeCudaTactics(std::vector<CudaTacticDef>& v);       // QuantizeLinear, DequantizeLinear (quantize_cuda.cu)
void addGridSampleCudaTactics(std::vector<CudaTacticDef>& v);     // GridSample (grid_sample_cuda.cu)
void addLayoutCudaTactics(std::vector<CudaTacticDef>& v);         // LayoutConvert nchw <-> nhwc (layout_cuda.cu)

}  // namespace kiln
