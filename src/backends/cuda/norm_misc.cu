// CUDA tactics for the smaller normalization-like ops: Hardmax, LpNormalization,
// MeanVarianceNormalization and Det. They are rare in inference graphs, so the kernels are
// simple and exact rather than fast: one thread per line (Hardmax, LpNormalization, accumulating
// in double like the references), one block per statistics group (MVN, double accumulation), one
// thread per matrix (Det: LU with partial pivoting in double, in a workspace).
// Float types: float32/float16/bfloat16 (MVN, Det, LpNormalization also float64 is left to the
// CPU: the builder casts around them).
#include <cmath>
#include <memory>
#include <vector>

#include "core/type_dispatch.h"
#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "ops/det_lu.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

using cuda::fromF;
using cuda::toF;


int64_t span(const Dims& d, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= d[i];
  return n;
}

template <typename F>
void dispatchFloat3(DataType t, F&& f) {
  cuda::dispatchCudaType<kFloatTypes>(t, f, "CUDA");
}

//! (outer, length, inner) lines: element k of line (o, i) is at (o * length + k) * inner + i.
struct Lines {
  int64_t outer = 0, length = 1, inner = 1;
};

struct LinesState : KernelState {
  Lines g;
  int64_t count = 0;
  size_t workspace = 0;
};

// ---- Hardmax: one-hot at the first maximum of each line -----------------------------------------

template <typename T>
__global__ void hardmaxKernel(const T* __restrict__ x, T* __restrict__ y, Lines g) {
  const int64_t lines = g.outer * g.inner;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < lines; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (t / g.inner) * g.length * g.inner + t % g.inner;
    int64_t best = 0;
    float bestV = toF(x[base]);
    for (int64_t k = 1; k < g.length; ++k) {
      const float v = toF(x[base + k * g.inner]);
      if (v > bestV) best = k, bestV = v;
    }
    for (int64_t k = 0; k < g.length; ++k) y[base + k * g.inner] = fromF<T>(k == best ? 1.f : 0.f);
  }
}

class HardmaxKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<LinesState>();
    const AxisSplit split = softmaxSplit(l, l.inputs[0].dims);
    s->g = Lines{split.outer, split.length, split.inner};
    s->count = volume(l.inputs[0].dims);
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const auto* s = static_cast<const LinesState*>(state);
    if (s->count == 0 || s->g.length == 0) return;
    dispatchFloat3(io.in[0].type, [&](auto tag) {
      using T = decltype(tag);
      hardmaxKernel<T><<<cuda::gridFor(s->g.outer * s->g.inner), 256, 0, cuda::streamOf(io)>>>(io.in[0].as<T>(),
                                                                                                 io.out[0].as<T>(), s->g);
    });
    KILN_CUDA_CHECK_LAUNCH();
  }
};

// ---- LpNormalization: x / ||x||_p along one axis (p = 1 or 2; a zero norm gives zeros) ----------

template <typename T>
__global__ void lpNormKernel(const T* __restrict__ x, T* __restrict__ y, Lines g, bool l1) {
  const int64_t lines = g.outer * g.inner;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < lines; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t base = (t / g.inner) * g.length * g.inner + t % g.inner;
    double acc = 0;
    for (int64_t k = 0; k < g.length; ++k) {
      const double v = toF(x[base + k * g.inner]);
      acc += l1 ? fabs(v) : v * v;
    }
    const double norm = l1 ? acc : sqrt(acc);
    for (int64_t k = 0; k < g.length; ++k)
      y[base + k * g.inner] = fromF<T>(norm == 0 ? 0.f : static_cast<float>(toF(x[base + k * g.inner]) / norm));
  }
}

class LpNormKernel : public Kernel {
 public:
  explicit LpNormKernel(const LayerDesc& l) : l1_(l.attrs->getInt("p", 2) == 1) {}
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    const size_t axis = static_cast<size_t>(normalizeAxis(l, l.attrs->getInt("axis", -1), static_cast<int64_t>(x.size())));
    auto s = std::make_unique<LinesState>();
    s->g = Lines{span(x, 0, axis), x[axis], span(x, axis + 1, x.size())};
    s->count = volume(x);
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const auto* s = static_cast<const LinesState*>(state);
    if (s->count == 0) return;
    dispatchFloat3(io.in[0].type, [&](auto tag) {
      using T = decltype(tag);
      lpNormKernel<T><<<cuda::gridFor(s->g.outer * s->g.inner), 256, 0, cuda::streamOf(io)>>>(io.in[0].as<T>(),
                                                                                                io.out[0].as<T>(), s->g, l1_);
    });
    KILN_CUDA_CHECK_LAUNCH();
  }

 private:
  bool l1_;
};

// ---- MeanVarianceNormalization: (x - mean) / (std + 1e-9) over `axes` --------------------------

constexpr int kMaxRank = 8;

//! A statistics group is the set of elements sharing their coordinates on the kept axes.
struct MvnGeom {
  int rank = 0;
  int64_t dims[kMaxRank], strides[kMaxRank];
  bool reduced[kMaxRank];
  int64_t groups = 0, perGroup = 0;
};

//! Linear index of the j-th element of group g (coordinates: kept axes from g, reduced from j).
__device__ __forceinline__ int64_t mvnIndex(const MvnGeom& m, int64_t g, int64_t j) {
  int64_t idx = 0;
  for (int a = m.rank - 1; a >= 0; --a) {
    int64_t& src = m.reduced[a] ? j : g;
    idx += (src % m.dims[a]) * m.strides[a];
    src /= m.dims[a];
  }
  return idx;
}

template <typename T>
__global__ void mvnKernel(const T* __restrict__ x, T* __restrict__ y, MvnGeom m) {
  __shared__ double part[256];
  for (int64_t g = blockIdx.x; g < m.groups; g += gridDim.x) {
    double s = 0;
    for (int64_t j = threadIdx.x; j < m.perGroup; j += blockDim.x) s += toF(x[mvnIndex(m, g, j)]);
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
      if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
      __syncthreads();
    }
    const double mean = part[0] / static_cast<double>(m.perGroup);
    __syncthreads();
    double v = 0;
    for (int64_t j = threadIdx.x; j < m.perGroup; j += blockDim.x) {
      const double d = toF(x[mvnIndex(m, g, j)]) - mean;
      v += d * d;
    }
    part[threadIdx.x] = v;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
      if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
      __syncthreads();
    }
    const double sd = sqrt(part[0] / static_cast<double>(m.perGroup));
    for (int64_t j = threadIdx.x; j < m.perGroup; j += blockDim.x) {
      const int64_t i = mvnIndex(m, g, j);
      y[i] = fromF<T>(static_cast<float>((toF(x[i]) - mean) / (sd + 1e-9)));
    }
    __syncthreads();
  }
}

class MvnKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    MvnGeom& m = cuda::makeState<MvnGeom>(state);
    m.rank = static_cast<int>(x.size());
    for (int a = 0; a < m.rank; ++a) m.reduced[a] = false;
    for (int64_t a : l.attrs->getInts("axes", {0, 2, 3})) m.reduced[normalizeAxis(l, a, m.rank)] = true;
    int64_t stride = 1;
    m.groups = 1;
    m.perGroup = 1;
    for (int a = m.rank - 1; a >= 0; --a) {
      m.dims[a] = x[a];
      m.strides[a] = stride;
      stride *= x[a];
      (m.reduced[a] ? m.perGroup : m.groups) *= x[a];
    }
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const MvnGeom& m = cuda::paramsOf<MvnGeom>(state);
    if (m.groups == 0 || m.perGroup == 0) return;
    dispatchFloat3(io.in[0].type, [&](auto tag) {
      using T = decltype(tag);
      const int64_t maxBlocks = int64_t(cuda::smCount()) * 16;
      const unsigned blocks = static_cast<unsigned>(m.groups < maxBlocks ? m.groups : maxBlocks);
      mvnKernel<T><<<blocks, 256, 0, cuda::streamOf(io)>>>(io.in[0].as<T>(), io.out[0].as<T>(), m);
    });
    KILN_CUDA_CHECK_LAUNCH();
  }
};

bool supportsMvn(const LayerDesc& l) {
  if (l.inputs.size() != 1 || !isFloatType(l.inputs[0].type)) return false;
  return l.inputs[0].dims.size() <= static_cast<size_t>(kMaxRank);
}

// ---- Det: determinants of the trailing n x n matrices --------------------------------------------

template <typename T>
__global__ void detKernel(const T* __restrict__ x, T* __restrict__ y, int64_t mats, int64_t n, double* __restrict__ work) {
  for (int64_t m = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; m < mats; m += int64_t(gridDim.x) * blockDim.x) {
    double* a = work + m * n * n;
    for (int64_t i = 0; i < n * n; ++i) a[i] = toF(x[m * n * n + i]);
    const double det = luDeterminant(a, n);
    y[m] = fromF<T>(static_cast<float>(det));
  }
}

class DetKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    auto s = std::make_unique<LinesState>();
    s->g.length = x.back();
    s->g.outer = span(x, 0, x.size() - 2);
    s->count = s->g.outer;
    const size_t bytes = static_cast<size_t>(volume(x)) * sizeof(double);
    state = std::move(s);
    return bytes;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const auto* s = static_cast<const LinesState*>(state);
    if (s->count == 0) return;
    dispatchFloat3(io.in[0].type, [&](auto tag) {
      using T = decltype(tag);
      detKernel<T><<<cuda::gridFor(s->count, 64), 64, 0, cuda::streamOf(io)>>>(io.in[0].as<T>(), io.out[0].as<T>(), s->count,
                                                                              s->g.length, static_cast<double*>(io.workspace));
    });
    KILN_CUDA_CHECK_LAUNCH();
  }
};

bool supportsFloatUnary(const LayerDesc& l) { return l.inputs.size() == 1 && l.present(0) && isFloatType(l.inputs[0].type); }
bool supportsDet(const LayerDesc& l) { return supportsFloatUnary(l) && l.inputs[0].dims.size() >= 2; }

template <typename K>
std::unique_ptr<Kernel> make(const LayerDesc&) { return std::make_unique<K>(); }
std::unique_ptr<Kernel> makeLpNorm(const LayerDesc& l) { return std::make_unique<LpNormKernel>(l); }

}  // namespace

namespace cuda {
KernelFactory hardmaxCuda() { return {supportsFloatUnary, make<HardmaxKernel>}; }
KernelFactory lpNormCuda() { return {supportsFloatUnary, makeLpNorm}; }
KernelFactory mvnCuda() { return {supportsMvn, make<MvnKernel>}; }
KernelFactory detCuda() { return {supportsDet, make<DetKernel>}; }
}  // namespace cuda

}  // namespace kiln
