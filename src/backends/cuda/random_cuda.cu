// CUDA tactic (tactic_table.cpp) for RandomUniform(Like), RandomNormal(Like) and Bernoulli
// (ops/random.cpp): one thread per element draws ops/random.h's counter-based value, the same
// the reference kernel gives for one seed. Without the attribute `seed` each enqueue takes a
// fresh seed on the host (a CUDA graph replays the seed it captured).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <memory>

#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "ops/random.h"

namespace kiln {

namespace {

struct RandomParams {
  RandomDraw draw;
  DataType in = DataType::kFLOAT, out = DataType::kFLOAT;
  int64_t count = 0;
};

__device__ inline float loadIn(DataType t, const void* p, int64_t i) {
  if (t == DataType::kHALF) return __half2float(static_cast<const __half*>(p)[i]);
  if (t == DataType::kBF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

template <typename T>
__global__ void randomKernel(RandomKind kind, uint64_t seed, float a, float b, DataType inType, const void* p, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float prob = kind == RandomKind::kBernoulli ? loadIn(inType, p, i) : 0.f;
    y[i] = static_cast<T>(randomValue(kind, seed, static_cast<uint64_t>(i), a, b, prob));
  }
}

template <typename T>
void launch(const RandomParams& r, uint64_t seed, const void* p, void* y, cudaStream_t s) {
  randomKernel<T><<<cuda::gridFor(r.count), 256, 0, s>>>(r.draw.kind, seed, r.draw.a, r.draw.b, r.in, p, static_cast<T*>(y), r.count);
  KILN_CUDA_CHECK_LAUNCH();
}

class RandomKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    RandomParams& r = cuda::makeState<RandomParams>(state);
    r.draw = randomDraw(l);
    r.in = l.inputs.empty() ? DataType::kFLOAT : l.inputs[0].type;
    r.out = l.outputs[0].type;
    r.count = volume(l.outputs[0].dims);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const RandomParams& r = cuda::paramsOf<RandomParams>(state);
    if (r.count == 0) return;
    const uint64_t seed = r.draw.seeded ? r.draw.seed : freshRandomSeed();
    const void* p = io.in.empty() ? nullptr : io.in[0].data;
    cudaStream_t s = cuda::streamOf(io);
    switch (r.out) {
      case DataType::kFLOAT: return launch<float>(r, seed, p, io.out[0].data, s);
      case DataType::kHALF: return launch<__half>(r, seed, p, io.out[0].data, s);
      case DataType::kBF16: return launch<__nv_bfloat16>(r, seed, p, io.out[0].data, s);
      case DataType::kBOOL: return launch<bool>(r, seed, p, io.out[0].data, s);
      case DataType::kINT32: return launch<int32_t>(r, seed, p, io.out[0].data, s);
      case DataType::kINT64: return launch<int64_t>(r, seed, p, io.out[0].data, s);
      default: throw Error("random op: unsupported output type");
    }
  }
};

bool gpuFloat(DataType t) { return t == DataType::kFLOAT || t == DataType::kHALF || t == DataType::kBF16; }

bool supportsRandom(const LayerDesc& l) {
  const DataType out = l.outputs[0].type;
  if (l.op == "Bernoulli")
    return gpuFloat(l.inputs[0].type) &&
           (gpuFloat(out) || out == DataType::kBOOL || out == DataType::kINT32 || out == DataType::kINT64);
  return gpuFloat(out);
}
std::unique_ptr<Kernel> createRandom(const LayerDesc&) { return std::make_unique<RandomKernel>(); }

}  // namespace

namespace cuda {
KernelFactory randomCuda() { return {supportsRandom, createRandom}; }
}  // namespace cuda

}  // namespace kiln
