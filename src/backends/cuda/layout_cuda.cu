// CUDA tactic "cuda_transpose" for LayoutConvert between nchw and nhwc (the GPU layout pass,
// builder/passes/gpu_layout.cpp): [N][A][B] -> [N][B][A] with (A, B) = (C, H*W) or (H*W, C),
// through 32x32 shared-memory tiles so that reads and writes both coalesce. Any element size
// of 1, 2, 4 or 8 bytes.
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"

namespace kiln {

namespace {

constexpr int kTile = 32;

template <typename T>
__global__ void transposeKernel(const T* __restrict__ x, T* __restrict__ y, int64_t a, int64_t b) {
  __shared__ T tile[kTile][kTile + 1];
  const int64_t n = blockIdx.z;
  const T* xs = x + n * a * b;
  T* ys = y + n * a * b;
  const int64_t b0 = static_cast<int64_t>(blockIdx.x) * kTile, a0 = static_cast<int64_t>(blockIdx.y) * kTile;
  for (int r = threadIdx.y; r < kTile; r += blockDim.y) {  // read rows of A, columns of B
    const int64_t ai = a0 + r, bi = b0 + threadIdx.x;
    if (ai < a && bi < b) tile[r][threadIdx.x] = xs[ai * b + bi];
  }
  __syncthreads();
  for (int r = threadIdx.y; r < kTile; r += blockDim.y) {  // write rows of B, columns of A
    const int64_t bi = b0 + r, ai = a0 + threadIdx.x;
    if (ai < a && bi < b) ys[bi * a + ai] = tile[threadIdx.x][r];
  }
}

struct TransposeState : KernelState {
  int64_t n = 0, a = 0, b = 0;
};

class LayoutConvertKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& d = l.inputs[0].dims;
    auto s = std::make_unique<TransposeState>();
    const bool toNhwc = outLayoutBlock(l) == kNhwcBlock;
    s->n = d[0];
    s->a = toNhwc ? d[1] : d[2] * d[3];
    s->b = toNhwc ? d[2] * d[3] : d[1];
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const auto* s = static_cast<const TransposeState*>(state);
    if (s->n == 0 || s->a == 0 || s->b == 0) return;
    if (s->n > 65535 || (s->a + kTile - 1) / kTile > 65535)
      throw UnsupportedError("CUDA LayoutConvert: batch above 65535 or more than 2M rows per image");
    const dim3 grid(static_cast<unsigned>((s->b + kTile - 1) / kTile), static_cast<unsigned>((s->a + kTile - 1) / kTile),
                    static_cast<unsigned>(s->n));
    const dim3 block(kTile, 8);
    cudaStream_t st = cuda::streamOf(io);
    cuda::dispatchElementSize(elementSize(io.in[0].type), [&](auto tag) {
      using T = decltype(tag);
      transposeKernel<T><<<grid, block, 0, st>>>(io.in[0].as<const T>(), io.out[0].as<T>(), s->a, s->b);
    });
    KILN_CUDA_CHECK_LAUNCH();
  }
};

bool supportsLayoutConvert(const LayerDesc& l) {
  if (l.inputs.size() != 1 || l.inputs[0].dims.size() != 4) return false;
  const int64_t from = inLayoutBlock(l), to = outLayoutBlock(l);
  return (from == 1 && to == kNhwcBlock) || (from == kNhwcBlock && to == 1);
}

std::unique_ptr<Kernel> createLayoutConvert(const LayerDesc&) { return std::make_unique<LayoutConvertKernel>(); }

}  // namespace

namespace cuda {
KernelFactory layoutConvertCuda() { return {supportsLayoutConvert, createLayoutConvert}; }
}  // namespace cuda

}  // namespace kiln
