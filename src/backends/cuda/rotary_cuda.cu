// CUDA tactics (tactic_table.cpp) for RotaryEmbedding (opset 23): 3-D [B, S, heads*D] (num_heads attribute)
// or 4-D [B, heads, S, D] inputs, interleaved or half-split pairs, partial rotation
// (rotary_embedding_dim), caches indexed by position_ids or by (batch, position). One thread per
// rotated pair or passed-through element; float32/float16/bfloat16 with float32 math.
// A position id outside the cache cannot be reported from the device without a host sync: that
// token's rotated elements become NaN (the CPU reference raises an error instead).
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/type_dispatch.h"
#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "ops/fused_attrs.h"

namespace kiln {

namespace {

struct RotaryParams {
  int64_t batch = 0, heads = 0, seq = 0, headSize = 0, rotaryDim = 0, maxPos = 0;
  bool is3d = false, interleaved = false, hasPos = false;
};

template <typename T>
__global__ void rotaryKernel(const T* __restrict__ x, const T* __restrict__ cosC, const T* __restrict__ sinC,
                             const int64_t* __restrict__ pos, T* __restrict__ y, RotaryParams p) {
  const int64_t half = p.rotaryDim / 2, per = half + (p.headSize - p.rotaryDim);
  const int64_t total = p.batch * p.seq * p.heads * per;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = i % per, h = (i / per) % p.heads, t = (i / (per * p.heads)) % p.seq, b = i / (per * p.heads * p.seq);
    const int64_t off = p.is3d ? (b * p.seq + t) * p.heads * p.headSize + h * p.headSize : ((b * p.heads + h) * p.seq + t) * p.headSize;
    if (j >= half) {  // beyond the rotary dims: copied
      const int64_t e = p.rotaryDim + (j - half);
      y[off + e] = x[off + e];
      continue;
    }
    int64_t row = b * p.seq + t;
    bool valid = true;
    if (p.hasPos) {
      row = pos[b * p.seq + t];
      valid = row >= 0 && row < p.maxPos;
    }
    const int64_t a = p.interleaved ? 2 * j : j, c = p.interleaved ? 2 * j + 1 : j + half;
    if (!valid) {
      y[off + a] = cuda::fromF<T>(NAN);
      y[off + c] = cuda::fromF<T>(NAN);
      continue;
    }
    const float co = cuda::toF(cosC[row * half + j]), si = cuda::toF(sinC[row * half + j]);
    const float x1 = cuda::toF(x[off + a]), x2 = cuda::toF(x[off + c]);
    y[off + a] = cuda::fromF<T>(co * x1 - si * x2);
    y[off + c] = cuda::fromF<T>(si * x1 + co * x2);
  }
}

class RotaryKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    RotaryParams& p = cuda::makeState<RotaryParams>(state);
    p.is3d = x.size() == 3;
    p.batch = x[0];
    p.heads = p.is3d ? l.attrs->getInt("num_heads", 0) : x[1];
    p.seq = p.is3d ? x[1] : x[2];
    p.headSize = p.is3d ? (p.heads ? x[2] / p.heads : 0) : x[3];
    p.rotaryDim = l.attrs->getInt("rotary_embedding_dim", 0);
    if (p.rotaryDim == 0) p.rotaryDim = p.headSize;
    p.interleaved = l.attrs->getInt("interleaved", 0) != 0;
    p.hasPos = l.present(3);
    p.maxPos = p.hasPos ? l.inputs[1].dims[0] : 0;
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const RotaryParams& p = cuda::paramsOf<RotaryParams>(state);
    const int64_t total = p.batch * p.seq * p.heads * (p.rotaryDim / 2 + p.headSize - p.rotaryDim);
    if (total == 0) return;
    const int64_t* pos = p.hasPos ? io.in[3].as<const int64_t>() : nullptr;
    auto launch = [&](auto tag) {
      using T = decltype(tag);
      rotaryKernel<T><<<cuda::gridFor(total), 256, 0, cuda::streamOf(io)>>>(io.in[0].as<T>(), io.in[1].as<T>(), io.in[2].as<T>(), pos,
                                                                            io.out[0].as<T>(), p);
    };
    cuda::dispatchCudaType<kFloatTypes>(io.in[0].type, launch, "CUDA RotaryEmbedding");
    KILN_CUDA_CHECK_LAUNCH();
  }
};

bool supportsRotary(const LayerDesc& l) {
  if (l.inputs.size() < 3) return false;
  if (l.attrs && l.attrs->has(attr::kRotaryColumns)) return false;  // the column range: not here yet
  const DataType t = l.inputs[0].type;
  return isFloatType(t);
}

std::unique_ptr<Kernel> createRotary(const LayerDesc&) { return std::make_unique<RotaryKernel>(); }

}  // namespace

namespace cuda {
KernelFactory rotaryEmbeddingCuda() { return {supportsRotary, createRotary}; }
}  // namespace cuda

}  // namespace kiln
