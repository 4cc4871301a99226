// The conv epilogue kernel (bias + residual + activation applied in place to a conv result, for
// what cuDNN did not fuse) and small host helpers shared by the CUDA conv tactics.
#include <string>

#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/cuda_util.h"
#include "ops/fused_attrs.h"

namespace kiln::cuda {

namespace {

//! VEC elements per thread step: 16-byte accesses when each plane's size is a multiple of VEC and
//! the pointers are 16-byte aligned (checked by the launcher); VEC == 1 otherwise.
template <typename T, int VEC>
__global__ void convEpilogueKernel(T* __restrict__ y, const T* __restrict__ bias, const T* __restrict__ res,
                                   int64_t chunks, int64_t chunksPerPlane, int64_t channels, DevAct act) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < chunks; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = (i / chunksPerPlane) % channels;
    const float b = bias ? toF(bias[c]) : 0.f;
    if constexpr (VEC == 1) {
      float v = toF(y[i]) + b;
      if (res) v += toF(res[i]);
      y[i] = fromF<T>(applyAct(v, act));
    } else {
      static_assert(VEC * sizeof(T) == 16, "one Pack16 per chunk");
      Pack16<T> py, pr;
      py.u = reinterpret_cast<const uint4*>(y)[i];
      if (res) pr.u = __ldg(reinterpret_cast<const uint4*>(res) + i);
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        float v = toF(py.e[k]) + b;
        if (res) v += toF(pr.e[k]);
        py.e[k] = fromF<T>(applyAct(v, act));
      }
      reinterpret_cast<uint4*>(y)[i] = py.u;
    }
  }
}

template <typename T>
void launchTyped(void* y, const void* bias, const void* res, int64_t planes, int64_t channels, int64_t size, DevAct act,
                 cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  const bool vec = size % kVec == 0 && aligned(y) && (!res || aligned(res));
  const int64_t per = vec ? size / kVec : size;
  const int64_t chunks = planes * per;
  if (chunks == 0) return;
  if (vec)
    convEpilogueKernel<T, kVec><<<gridFor(chunks), 256, 0, stream>>>(static_cast<T*>(y), static_cast<const T*>(bias),
                                                                      static_cast<const T*>(res), chunks, per, channels, act);
  else
    convEpilogueKernel<T, 1><<<gridFor(chunks), 256, 0, stream>>>(static_cast<T*>(y), static_cast<const T*>(bias),
                                                                  static_cast<const T*>(res), chunks, per, channels, act);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launchConvEpilogue(DataType type, void* y, const void* bias, const void* res, int64_t planes, int64_t channels,
                        int64_t size, DevAct act, cudaStream_t stream) {
  dispatchCudaType<kFloatTypes>(
      type, [&](auto tag) { launchTyped<decltype(tag)>(y, bias, res, planes, channels, size, act, stream); }, "conv epilogue");
}

bool knownActivation(const LayerDesc& l) {
  try {
    fusedActivation(*l.attrs);
    return true;
  } catch (const Error&) {
    return false;
  }
}

bool convFloatTypes(const LayerDesc& l) {
  if (l.inputs.size() < 2) return false;
  const DataType t = l.inputs[0].type;
  if (t != DataType::kFLOAT && t != DataType::kHALF && t != DataType::kBF16) return false;
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (l.present(i) && l.inputs[i].type != t) return false;
  for (const auto& o : l.outputs)
    if (o.type != t) return false;
  return true;
}

}  // namespace kiln::cuda
