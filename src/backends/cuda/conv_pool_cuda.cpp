// CUDA tactics: conv_pool family. Conv/ConvTranspose through cuDNN (conv_cudnn.cpp), our direct
// 3x3 depthwise kernel (conv_depthwise.cu), a direct ConvTranspose for geometries cuDNN cannot
// express (conv_transpose_direct.cu), pooling kernels (pool_cuda.cu); the conv epilogue
// and shared helpers live in conv_epilogue.cu. Listed best guess first: the builder times them.
#include "backends/cuda/conv_cuda_common.h"
#include "backends/cuda/cuda_tactics.h"

namespace kiln {

void addConvPoolCudaTactics(std::vector<CudaTacticDef>& v) {
  addCudnnConvTactics(v);
  addConvTransposeDirectTactics(v);
  addDepthwiseConvCudaTactics(v);
  addGemm1x1ConvTactics(v);
  addPoolCudaTactics(v);
}

}  // namespace kiln
