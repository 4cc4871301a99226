// CUDA kernels: Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,SumSquare}.
//  - row form (the reduced elements of an output are contiguous, e.g. trailing axes): a row per
//    blockDim.x threads, 16-byte vector loads;
//  - general form (any axes, e.g. one middle axis): a block handles 32 consecutive outputs
//    (coalesced over the innermost kept dim) with blockDim.y threads splitting each reduction.
// Accumulation in float32 for float/half/bf16, in int64 for int32/int64 (as the CPU kernels).
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/type_dispatch.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/norm_common.cuh"
#include "backends/cuda/norm_launch.cuh"

namespace kiln::cuda {

namespace {

//! How partial results combine: Sum covers Mean/L1/L2/LogSum/SumSquare (with a pre-map of the
//! values: none, |x| or x*x) and their finishing step.
enum Combine { kCSum, kCProd, kCMax, kCMin, kCLse };
enum PreMap { kPreNone = 0, kPreAbs = 1, kPreSquare = 2 };

template <typename T>
constexpr bool kIsInt = std::is_integral_v<T>;

//! Accumulator: `v` (sum, product, extreme or running max for log-sum-exp) and `s` (the scaled
//! sum of log-sum-exp).
template <typename A>
struct Acc {
  A v;
  float s;
};

template <int C, typename T>
struct Reducer {
  using A = std::conditional_t<kIsInt<T>, long long, float>;

  __device__ static Acc<A> init() {
    Acc<A> a{A(0), 0.f};
    if constexpr (C == kCProd) a.v = A(1);
    if constexpr (C == kCMax || C == kCLse) {
      if constexpr (kIsInt<T>) a.v = static_cast<A>(std::numeric_limits<T>::lowest());
      else a.v = -INFINITY;
    }
    if constexpr (C == kCMin) {
      if constexpr (kIsInt<T>) a.v = static_cast<A>(std::numeric_limits<T>::max());
      else a.v = INFINITY;
    }
    return a;
  }

  __device__ static A value(T x) {
    if constexpr (kIsInt<T>) return static_cast<A>(x);
    else return toFloat(x);
  }

  __device__ static void addValue(Acc<A>& a, A x, int pre) {
    if constexpr (C == kCSum) {
      if (pre == kPreAbs) x = x < A(0) ? -x : x;
      else if (pre == kPreSquare) x = x * x;
      a.v += x;
    } else if constexpr (C == kCProd) {
      a.v *= x;
    } else if constexpr (C == kCMax) {
      if (x > a.v || x != x) a.v = (a.v != a.v) ? a.v : x;  // NaN sticks
    } else if constexpr (C == kCMin) {
      if (x < a.v || x != x) a.v = (a.v != a.v) ? a.v : x;
    } else {  // log-sum-exp, online: a.s = sum exp(x - a.v)
      if (x > a.v) {
        a.s = a.s * expf(a.v - x) + 1.f;
        a.v = x;
      } else if (!(x == -INFINITY) && !(a.v == INFINITY)) {
        a.s += expf(x - a.v);
      }
    }
  }

  __device__ static void merge(Acc<A>& a, const Acc<A>& b) {
    if constexpr (C == kCLse) {
      const float m = fmaxf(a.v, b.v);
      if (m == -INFINITY) return;
      const float sa = a.v == -INFINITY ? 0.f : a.s * expf(a.v - m);
      const float sb = b.v == -INFINITY ? 0.f : b.s * expf(b.v - m);
      a.v = m;
      a.s = sa + sb;
    } else if constexpr (C == kCSum) {
      a.v += b.v;
    } else {
      addValue(a, b.v, kPreNone);
    }
  }

  __device__ static Acc<A> shuffle(const Acc<A>& a, int offset) {
    Acc<A> b;
    b.v = __shfl_xor_sync(0xffffffffu, a.v, offset);
    b.s = C == kCLse ? __shfl_xor_sync(0xffffffffu, a.s, offset) : 0.f;
    return b;
  }

  __device__ static Acc<A> warpReduce(Acc<A> a) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) merge(a, shuffle(a, o));
    return a;
  }

  __device__ static T finish(const Acc<A>& a, int64_t count, ReduceKind kind) {
    if constexpr (kIsInt<T>) {
      if (kind == ReduceKind::kMean) return count ? static_cast<T>(a.v / count) : T(0);
      return static_cast<T>(a.v);
    } else {
      float r = a.v;
      switch (kind) {
        case ReduceKind::kMean: r = a.v / static_cast<float>(count); break;
        case ReduceKind::kL2: r = sqrtf(a.v); break;
        case ReduceKind::kLogSum: r = logf(a.v); break;
        case ReduceKind::kLogSumExp: r = isfinite(a.v) ? a.v + logf(a.s) : a.v; break;
        default: break;
      }
      return fromFloat<T>(r);
    }
  }
};

//! Row form: output `row` reduces x[row * redCount, (row + 1) * redCount).
template <typename T, int C, int VEC>
__global__ void __launch_bounds__(1024) reduceRowKernel(const ReduceParams p, int pre) {
  using R = Reducer<C, T>;
  using A = typename R::A;
  __shared__ Acc<A> smem[32 * 32];
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool valid = row < p.outCount;
  Acc<A> acc = R::init();
  if (valid) {
    const T* x = static_cast<const T*>(p.x) + row * p.redCount;
    const int64_t nvec = p.redCount / VEC;
    for (int64_t j = threadIdx.x; j < nvec; j += blockDim.x) {
      const Vec<T, VEC> v = *reinterpret_cast<const Vec<T, VEC>*>(x + j * VEC);
#pragma unroll
      for (int e = 0; e < VEC; ++e) R::addValue(acc, R::value(v.v[e]), pre);
    }
  }
  acc = R::warpReduce(acc);
  if (blockDim.x > 32) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) smem[threadIdx.y * 32 + warp] = acc;
    __syncthreads();
    acc = lane < static_cast<int>(blockDim.x >> 5) ? smem[threadIdx.y * 32 + lane] : R::init();
    acc = R::warpReduce(acc);
  }
  if (valid && threadIdx.x == 0) static_cast<T*>(p.y)[row] = R::finish(acc, p.redCount, p.kind);
}

//! General form: threadIdx.x picks the output, threadIdx.y splits its reduction.
template <typename T, int C>
__global__ void __launch_bounds__(1024) reduceGeneralKernel(const ReduceParams p, int pre) {
  using R = Reducer<C, T>;
  using A = typename R::A;
  __shared__ Acc<A> smem[32 * 32];
  const int64_t o = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x;
  const T* x = static_cast<const T*>(p.x);
  Acc<A> acc = R::init();
  if (o < p.outCount) {
    int64_t base = 0, rest = o;
    for (int d = p.nKept - 1; d >= 0; --d) {
      base += (rest % p.keptDims[d]) * p.keptStrides[d];
      rest /= p.keptDims[d];
    }
    if (p.nRed == 1) {
      const int64_t stride = p.redStrides[0];
      for (int64_t r = threadIdx.y; r < p.redCount; r += blockDim.y) R::addValue(acc, R::value(x[base + r * stride]), pre);
    } else {
      for (int64_t r = threadIdx.y; r < p.redCount; r += blockDim.y) {
        int64_t off = base, q = r;
        for (int d = p.nRed - 1; d >= 0; --d) {
          off += (q % p.redDims[d]) * p.redStrides[d];
          q /= p.redDims[d];
        }
        R::addValue(acc, R::value(x[off]), pre);
      }
    }
  }
  smem[threadIdx.y * 32 + threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && o < p.outCount) {
    for (unsigned k = 1; k < blockDim.y; ++k) R::merge(acc, smem[k * 32 + threadIdx.x]);
    static_cast<T*>(p.y)[o] = R::finish(acc, p.redCount, p.kind);
  }
}

template <typename T, int C>
void reduceLaunch(const ReduceParams& p, int pre, cudaStream_t stream) {
  if (p.rowForm) {
    constexpr int kWide = kIsInt<T> ? 1 : 16 / sizeof(T);
    const RowGeometry& g = p.geo;
    const dim3 block(g.threads, g.rowsPerBlock);
    const dim3 grid(static_cast<unsigned>((p.outCount + g.rowsPerBlock - 1) / g.rowsPerBlock));
    if (kWide > 1 && g.vec == kWide && aligned(p.x, 16)) reduceRowKernel<T, C, kWide><<<grid, block, 0, stream>>>(p, pre);
    else reduceRowKernel<T, C, 1><<<grid, block, 0, stream>>>(p, pre);
  } else {
    // Few outputs: more threads per reduction.
    const unsigned ySplit = p.outCount < int64_t(cuda::smCount()) * 64 && p.redCount >= 256 ? 32 : 8;
    const dim3 block(32, ySplit);
    const dim3 grid(static_cast<unsigned>((p.outCount + 31) / 32));
    reduceGeneralKernel<T, C><<<grid, block, 0, stream>>>(p, pre);
  }
  KILN_CUDA_CHECK_LAUNCH();
}

template <typename T>
void reduceTyped(const ReduceParams& p, cudaStream_t stream) {
  switch (p.kind) {
    case ReduceKind::kSum:
    case ReduceKind::kMean:
    case ReduceKind::kLogSum: reduceLaunch<T, kCSum>(p, kPreNone, stream); break;
    case ReduceKind::kL1: reduceLaunch<T, kCSum>(p, kPreAbs, stream); break;
    case ReduceKind::kL2:
    case ReduceKind::kSumSquare: reduceLaunch<T, kCSum>(p, kPreSquare, stream); break;
    case ReduceKind::kProd: reduceLaunch<T, kCProd>(p, kPreNone, stream); break;
    case ReduceKind::kMax: reduceLaunch<T, kCMax>(p, kPreNone, stream); break;
    case ReduceKind::kMin: reduceLaunch<T, kCMin>(p, kPreNone, stream); break;
    case ReduceKind::kLogSumExp:
      if constexpr (kIsInt<T>) throw Error("launchReduce: ReduceLogSumExp of integers is not supported");
      else reduceLaunch<T, kCLse>(p, kPreNone, stream);
      break;
  }
}

}  // namespace

void launchReduce(const ReduceParams& p, cudaStream_t stream) {
  if (p.copy) {
    if (p.inCount > 0)
      KILN_CUDA_CHECK(cudaMemcpyAsync(p.y, p.x, static_cast<size_t>(p.inCount) * elementSize(p.type), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  if (p.outCount <= 0) return;
  dispatchCudaType<kFloatTypes | typeBit(DataType::kINT32) | typeBit(DataType::kINT64)>(
      p.type, [&](auto t) { reduceTyped<decltype(t)>(p, stream); }, "launchReduce");
}

}  // namespace kiln::cuda
