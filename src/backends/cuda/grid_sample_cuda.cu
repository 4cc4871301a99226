// CUDA tactics (tactic_table.cpp) for GridSample: one thread per output element, sampling through the same
// per-point code as the CPU reference (ops/grid_sample.h). float32/float16/bfloat16 X and grid,
// computed in double like the reference (GridSample is not a hot op in the benchmark models).
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "ops/grid_sample.h"

namespace kiln {

namespace {

struct GsParams {
  GridSampleGeom G;
  int64_t n = 0, c = 0, inPlane = 0, outPlane = 0;
};

template <typename T>
__device__ __forceinline__ double toD(T v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return static_cast<double>(cuda::toF(v));
}

template <typename TX, typename TG>
__global__ void gridSampleKernel(const TX* __restrict__ x, const TG* __restrict__ grid, TX* __restrict__ y, GsParams p) {
  const int64_t total = p.n * p.c * p.outPlane;
  const int s = p.G.spatial;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t pt = i % p.outPlane, bc = i / p.outPlane, b = bc / p.c;
    double g[3];
    for (int k = 0; k < s; ++k) g[k] = toD(grid[(b * p.outPlane + pt) * s + k]);
    const TX* plane = x + bc * p.inPlane;
    const double v = gridSampleOne(p.G, g, [plane](int64_t j) { return toD(plane[j]); });
    y[i] = cuda::fromF<TX>(static_cast<float>(v));
  }
}

class GridSampleKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    GsParams& p = cuda::makeState<GsParams>(state);
    p.G = gridSampleGeom(l, x);
    p.n = x[0];
    p.c = x[1];
    p.inPlane = volume(Dims(x.begin() + 2, x.end()));
    const int64_t out = volume(l.outputs[0].dims);
    p.outPlane = p.n * p.c == 0 ? 0 : out / (p.n * p.c);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const GsParams& p = cuda::paramsOf<GsParams>(state);
    const int64_t total = p.n * p.c * p.outPlane;
    if (total == 0) return;
    auto withGrid = [&](auto xt) {
      using TX = decltype(xt);
      auto launch = [&](auto gt) {
        using TG = decltype(gt);
        gridSampleKernel<TX, TG><<<cuda::gridFor(total), 256, 0, cuda::streamOf(io)>>>(io.in[0].as<const TX>(), io.in[1].as<const TG>(),
                                                                                        io.out[0].as<TX>(), p);
      };
      cuda::dispatchCudaType<kFloatTypes>(io.in[1].type, launch, "CUDA GridSample grid");
    };
    cuda::dispatchCudaType<kFloatTypes>(io.in[0].type, withGrid, "CUDA GridSample");
    KILN_CUDA_CHECK_LAUNCH();
  }
};

bool supportsGridSample(const LayerDesc& l) {
  return l.inputs.size() == 2 && isFloatType(l.inputs[0].type) && isFloatType(l.inputs[1].type);
}
std::unique_ptr<Kernel> createGridSample(const LayerDesc&) { return std::make_unique<GridSampleKernel>(); }

}  // namespace

namespace cuda {
KernelFactory gridSampleCuda() { return {supportsGridSample, createGridSample}; }
}  // namespace cuda

}  // namespace kiln
