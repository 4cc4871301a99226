// CUDA tactic (tactic_table.cpp) for RoiAlign: one thread per output element, sampling through
// the same per-bin code as the CPU reference (ops/roi_align.h). float32/float16/bfloat16 X and rois,
// computed in double like the reference (a detector's box head runs it on ~100-1000 rois). A batch
// index outside [0, N) cannot throw on the device: that roi's outputs are NaN (the CPU reference
// refuses it with an error).
#include <cstdint>
#include <memory>

#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/detection_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "ops/roi_align.h"

namespace kiln {

namespace {

struct RoiParams {
  RoiAlignGeom G;
  int64_t n = 0, c = 0, rois = 0;
  bool indices32 = false;
};

template <typename T>
__device__ __forceinline__ double toD(T v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return static_cast<double>(cuda::toF(v));
}

template <typename T>
__global__ void roiAlignKernel(const T* __restrict__ x, const T* __restrict__ rois, const void* __restrict__ batch, T* __restrict__ y,
                               RoiParams p) {
  const int64_t bins = p.G.oh * p.G.ow, total = p.rois * p.c * bins;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t bin = i % bins, kc = i / bins, k = kc / p.c, ch = kc % p.c;
    const int64_t b = p.indices32 ? static_cast<const int32_t*>(batch)[k] : static_cast<const int64_t*>(batch)[k];
    if (b < 0 || b >= p.n) {
      y[i] = cuda::fromF<T>(__int_as_float(0x7fc00000));
      continue;
    }
    const double r[4] = {toD(rois[k * 4]), toD(rois[k * 4 + 1]), toD(rois[k * 4 + 2]), toD(rois[k * 4 + 3])};
    const T* plane = x + (b * p.c + ch) * p.G.h * p.G.w;
    const double v = roiAlignOne(p.G, r, bin / p.G.ow, bin % p.G.ow, [plane](int64_t j) { return toD(plane[j]); });
    y[i] = cuda::fromF<T>(static_cast<float>(v));
  }
}

class RoiAlignKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    RoiParams& p = cuda::makeState<RoiParams>(state);
    p.G = roiAlignGeom(l, x.data());
    p.n = x[0];
    p.c = x[1];
    p.rois = l.inputs[1].dims[0];
    p.indices32 = l.inputs[2].type == DataType::kINT32;
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const RoiParams& p = cuda::paramsOf<RoiParams>(state);
    const int64_t total = p.rois * p.c * p.G.oh * p.G.ow;
    if (total == 0) return;
    auto launch = [&](auto t) {
      using T = decltype(t);
      roiAlignKernel<T><<<cuda::gridFor(total), 256, 0, cuda::streamOf(io)>>>(io.in[0].as<const T>(), io.in[1].as<const T>(),
                                                                               io.in[2].data, io.out[0].as<T>(), p);
    };
    cuda::dispatchCudaType<kFloatTypes>(io.in[0].type, launch, "CUDA RoiAlign");
    KILN_CUDA_CHECK_LAUNCH();
  }
};

bool supportsRoiAlign(const LayerDesc& l) {
  return l.inputs.size() == 3 && isFloatType(l.inputs[0].type) && l.inputs[1].type == l.inputs[0].type &&
         (l.inputs[2].type == DataType::kINT64 || l.inputs[2].type == DataType::kINT32);
}
std::unique_ptr<Kernel> createRoiAlign(const LayerDesc&) { return std::make_unique<RoiAlignKernel>(); }

}  // namespace

namespace cuda {
KernelFactory roiAlignCuda() { return {supportsRoiAlign, createRoiAlign}; }
}  // namespace cuda

}  // namespace kiln
