// CUDA tactics of the shape family driven by index tensors read on the device: Gather,
// GatherElements, GatherND, ScatterND, ScatterElements (and Scatter), OneHot.
// Indices are data on the device, so they cannot be validated without a host synchronization:
// the kernels wrap negative indices and CLAMP out-of-range ones into the valid range (ONNX leaves
// out-of-range indices undefined; the CPU reference throws). Contiguous rows (Gather, GatherND,
// ScatterND without reduction) move with up to 16-byte vectors. Scatter reductions use atomic
// compare-and-swap loops (float32/16, bf16, float64, int32, int64); with duplicate indices their
// order is unspecified (float sums may differ in the last bits from the sequential reference).
#include <algorithm>
#include <cstring>

#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/shape_cuda.cuh"
#include "ops/op_util.h"

namespace kiln {

namespace {

using cuda::gridFor;
using cuda::streamOf;
constexpr int kMaxRank = cuda::kMaxCopyRank;

// ---------------------------------------------------------------- device helpers

template <typename I>
__device__ __forceinline__ int64_t clampIndex(const I* idx, int64_t pos, int64_t dim) {
  int64_t k = static_cast<int64_t>(idx[pos]);
  if (k < 0) k += dim;
  return k < 0 ? 0 : (k >= dim ? dim - 1 : k);
}

template <int B> struct Bytes;
template <> struct Bytes<1> { using type = uint8_t; };
template <> struct Bytes<2> { using type = uint16_t; };
template <> struct Bytes<4> { using type = uint32_t; };
template <> struct Bytes<8> { using type = uint2; };
template <> struct Bytes<16> { using type = uint4; };

//! Widest vector (bytes) dividing `rowBytes` that every pointer is aligned to.
int vectorBytes(int64_t rowBytes, std::initializer_list<const void*> ptrs) {
  for (int vb = 16; vb > 1; vb /= 2) {
    bool ok = rowBytes % vb == 0;
    for (const void* p : ptrs) ok = ok && reinterpret_cast<uintptr_t>(p) % vb == 0;
    if (ok) return vb;
  }
  return 1;
}

//! Calls f(std::integral_constant<int, VB>) for a vector width of 1..16 bytes.
template <typename F>
void dispatchVector(int vb, F&& f) {
  switch (vb) {
    case 16: f(std::integral_constant<int, 16>{}); break;
    case 8: f(std::integral_constant<int, 8>{}); break;
    case 4: f(std::integral_constant<int, 4>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    default: f(std::integral_constant<int, 1>{}); break;
  }
}

constexpr uint32_t kIndexTypes = typeBit(DataType::kINT32) | typeBit(DataType::kINT64);

//! Calls f(I{}) for int32 or int64 indices.
template <typename F>
void dispatchIndex(DataType t, F&& f) {
  cuda::dispatchCudaType<kIndexTypes>(t, f, "CUDA index op indices");
}

bool byteSized(DataType t) {
  size_t es = elementSize(t);
  return es == 1 || es == 2 || es == 4 || es == 8;
}


// ---------------------------------------------------------------- Gather

struct GatherParams {
  int64_t outer, n, dim, inner;  // inner in vector units
  int64_t total;
};

template <typename V, typename I, typename Idx>
__global__ void gatherKernel(const V* __restrict__ src, V* __restrict__ dst, const I* __restrict__ idx, GatherParams p) {
  const Idx inner = static_cast<Idx>(p.inner), n = static_cast<Idx>(p.n);
  for (Idx i = blockIdx.x * Idx(blockDim.x) + threadIdx.x; i < static_cast<Idx>(p.total); i += Idx(gridDim.x) * blockDim.x) {
    Idx t = i / inner, e = i - t * inner, o = t / n, j = t - o * n;
    int64_t k = clampIndex(idx, j, p.dim);
    dst[i] = src[(static_cast<int64_t>(o) * p.dim + k) * p.inner + e];
  }
}

class GatherKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& d = l.inputs[0].dims;
    const int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", 0), static_cast<int64_t>(d.size()));
    auto s = std::make_unique<cuda::ParamState<GatherParams>>();
    s->p.outer = volume(Dims(d.begin(), d.begin() + axis));
    s->p.dim = d[axis];
    s->p.inner = volume(Dims(d.begin() + axis + 1, d.end()));  // elements; vector units at execute
    s->p.n = volume(l.inputs[1].dims);
    if (s->p.dim == 0 && s->p.outer * s->p.n * s->p.inner > 0) opError(l, "cannot gather from an empty axis");
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    GatherParams p = static_cast<cuda::ParamState<GatherParams>*>(state)->p;
    const int64_t rowBytes = p.inner * static_cast<int64_t>(elementSize(io.in[0].type));
    if (p.outer * p.n * rowBytes == 0) return;
    const int vb = vectorBytes(rowBytes, {io.in[0].data, io.out[0].data});
    p.inner = rowBytes / vb;
    p.total = p.outer * p.n * p.inner;
    const unsigned grid = gridFor(p.total);
    dispatchVector(vb, [&](auto vbc) {
      using V = typename Bytes<decltype(vbc)::value>::type;
      dispatchIndex(io.in[1].type, [&](auto it) {
        using I = decltype(it);
        const auto* src = static_cast<const V*>(io.in[0].data);
        auto* dst = static_cast<V*>(io.out[0].data);
        const auto* idx = static_cast<const I*>(io.in[1].data);
        if (p.total < (int64_t(1) << 31) && p.outer * p.dim * p.inner < (int64_t(1) << 31))
          gatherKernel<V, I, uint32_t><<<grid, 256, 0, streamOf(io)>>>(src, dst, idx, p);
        else
          gatherKernel<V, I, int64_t><<<grid, 256, 0, streamOf(io)>>>(src, dst, idx, p);
      });
    });
    KILN_CUDA_CHECK_LAUNCH();
  }
};

// ---------------------------------------------------------------- reductions (Scatter*)

enum Reduction : int { kNone = 0, kAdd, kMul, kMax, kMin };

Reduction reductionOf(const LayerDesc& l) {
  std::string r = l.attrs->getString("reduction", "none");
  if (r == "none") return kNone;
  if (r == "add") return kAdd;
  if (r == "mul") return kMul;
  if (r == "max") return kMax;
  if (r == "min") return kMin;
  opError(l, "unknown reduction '" + r + "'");
}

template <typename T> struct Compute { using type = T; };
template <> struct Compute<__half> { using type = float; };
template <> struct Compute<__nv_bfloat16> { using type = float; };

template <typename T>
__device__ __forceinline__ T combine(int r, T a, T b) {
  using C = typename Compute<T>::type;
  C x = static_cast<C>(a), y = static_cast<C>(b), z = y;
  switch (r) {
    case kAdd: z = x + y; break;
    case kMul: z = x * y; break;
    case kMax: z = x < y ? y : x; break;
    case kMin: z = y < x ? y : x; break;
    default: break;
  }
  return static_cast<T>(z);
}

template <int S> struct CasWord;
template <> struct CasWord<2> { using type = unsigned short int; };
template <> struct CasWord<4> { using type = unsigned int; };
template <> struct CasWord<8> { using type = unsigned long long int; };

//! *addr = combine(*addr, v) atomically (compare-and-swap on the element's bits).
template <typename T>
__device__ __forceinline__ void atomicCombine(T* addr, T v, int r) {
  using W = typename CasWord<sizeof(T)>::type;
  W* w = reinterpret_cast<W*>(addr);
  W old = *reinterpret_cast<volatile W*>(w), assumed;
  do {
    assumed = old;
    T cur;
    memcpy(&cur, &assumed, sizeof(T));
    T next = combine(r, cur, v);
    W nw;
    memcpy(&nw, &next, sizeof(T));
    old = atomicCAS(w, assumed, nw);
  } while (old != assumed);
}

constexpr uint32_t kReduceTypes = kFloatTypes | typeBit(DataType::kDOUBLE) | typeBit(DataType::kINT32) | typeBit(DataType::kINT64);

//! Calls f(T{}) for the types scatter reductions support.
template <typename F>
void dispatchReduceType(DataType t, F&& f) {
  cuda::dispatchCudaType<kReduceTypes>(t, f, "CUDA scatter reduction");
}

bool reducible(DataType t) { return inTypeSet(kReduceTypes, t); }

// ---------------------------------------------------------------- GatherElements / ScatterElements

struct ElementsParams {
  int rank, axis;
  int64_t count;                  // elements of indices
  int64_t idxDims[kMaxRank];      // dims of indices
  int64_t dataStr[kMaxRank];      // strides of data
  int64_t axisDim;
  int reduction;
};

template <typename I>
__device__ __forceinline__ int64_t elementOffset(const ElementsParams& p, const I* idx, int64_t i) {
  int64_t r = i, off = 0;
  for (int k = p.rank - 1; k >= 0; --k) {
    int64_t q = r / p.idxDims[k], c = r - q * p.idxDims[k];
    if (k == p.axis) c = clampIndex(idx, i, p.axisDim);
    off += c * p.dataStr[k];
    r = q;
  }
  return off;
}

template <typename T, typename I>
__global__ void gatherElementsKernel(const T* __restrict__ src, T* __restrict__ dst, const I* __restrict__ idx, ElementsParams p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.count; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = src[elementOffset(p, idx, i)];
}

template <typename T, typename I>
__global__ void scatterElementsKernel(T* __restrict__ dst, const T* __restrict__ upd, const I* __restrict__ idx, ElementsParams p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.count; i += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (sizeof(T) == 1 || std::is_same_v<T, uint2>) {
      dst[elementOffset(p, idx, i)] = upd[i];
    } else {
      if (p.reduction == kNone) dst[elementOffset(p, idx, i)] = upd[i];
      else atomicCombine(dst + elementOffset(p, idx, i), upd[i], p.reduction);
    }
  }
}

ElementsParams elementsParams(const LayerDesc& l) {
  const Dims &data = l.inputs[0].dims, &idx = l.inputs[1].dims;
  ElementsParams p{};
  p.rank = static_cast<int>(data.size());
  if (p.rank > kMaxRank) throw UnsupportedError("CUDA *Elements ops: rank above " + std::to_string(kMaxRank));
  if (idx.size() != data.size()) opError(l, "indices must have the rank of data");
  p.axis = static_cast<int>(normalizeAxis(l, l.attrs->getInt("axis", 0), p.rank));
  p.count = volume(idx);
  std::vector<int64_t> s = rowMajorStrides(data);
  for (int k = 0; k < p.rank; ++k) {
    p.idxDims[k] = idx[k];
    p.dataStr[k] = s[k];
  }
  p.axisDim = data[p.axis];
  if (p.axisDim == 0 && p.count > 0) opError(l, "cannot index an empty axis");
  return p;
}

class GatherElementsKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<cuda::ParamState<ElementsParams>>();
    s->p = elementsParams(l);
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const ElementsParams& p = static_cast<cuda::ParamState<ElementsParams>*>(state)->p;
    if (p.count == 0) return;
    cuda::dispatchElementSize<uint2>(elementSize(io.in[0].type), [&](auto tt) {
      using T = decltype(tt);
      dispatchIndex(io.in[1].type, [&](auto it) {
        using I = decltype(it);
        gatherElementsKernel<T, I><<<gridFor(p.count), 256, 0, streamOf(io)>>>(
            static_cast<const T*>(io.in[0].data), static_cast<T*>(io.out[0].data), static_cast<const I*>(io.in[1].data), p);
      });
    });
    KILN_CUDA_CHECK_LAUNCH();
  }
};

class ScatterElementsKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<cuda::ParamState<ElementsParams>>();
    s->p = elementsParams(l);
    s->p.reduction = reductionOf(l);
    if (l.inputs[2].dims != l.inputs[1].dims) opError(l, "updates must have the shape of indices");
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const ElementsParams& p = static_cast<cuda::ParamState<ElementsParams>*>(state)->p;
    const DataType t = io.in[0].type;
    cuda::copyDevice(io.out[0].data, io.in[0].data, static_cast<size_t>(io.in[0].count) * elementSize(t), streamOf(io));
    if (p.count == 0) return;
    auto launch = [&](auto tt) {
      using T = decltype(tt);
      dispatchIndex(io.in[1].type, [&](auto it) {
        using I = decltype(it);
        scatterElementsKernel<T, I><<<gridFor(p.count), 256, 0, streamOf(io)>>>(
            static_cast<T*>(io.out[0].data), static_cast<const T*>(io.in[2].data), static_cast<const I*>(io.in[1].data), p);
      });
    };
    if (p.reduction == kNone) cuda::dispatchElementSize<uint2>(elementSize(t), launch);
    else dispatchReduceType(t, launch);
    KILN_CUDA_CHECK_LAUNCH();
  }
};

// ---------------------------------------------------------------- GatherND / ScatterND

struct NdParams {
  int k;
  int64_t tuples, perBatch, batchSize;  // batchSize and strides in vector units
  int64_t slice;                        // vector units (elements for reductions)
  int64_t dims[kMaxRank], strides[kMaxRank];
  int reduction;
};

__device__ __forceinline__ int64_t tupleOffset(const NdParams& p, const int64_t* idx, int64_t t) {
  int64_t off = (p.perBatch ? t / p.perBatch : 0) * p.batchSize;
  for (int j = 0; j < p.k; ++j) off += clampIndex(idx, t * p.k + j, p.dims[j]) * p.strides[j];
  return off;
}

template <typename V>
__global__ void gatherNdKernel(const V* __restrict__ src, V* __restrict__ dst, const int64_t* __restrict__ idx, NdParams p) {
  const int64_t total = p.tuples * p.slice;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t t = i / p.slice, e = i - t * p.slice;
    dst[i] = src[tupleOffset(p, idx, t) + e];
  }
}

template <typename T>
__global__ void scatterNdKernel(T* __restrict__ dst, const T* __restrict__ upd, const int64_t* __restrict__ idx, NdParams p) {
  const int64_t total = p.tuples * p.slice;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t t = i / p.slice, e = i - t * p.slice;
    if constexpr (sizeof(T) == 1 || sizeof(T) == 16 || std::is_same_v<T, uint2>) {
      dst[tupleOffset(p, idx, t) + e] = upd[i];
    } else {
      if (p.reduction == kNone) dst[tupleOffset(p, idx, t) + e] = upd[i];
      else atomicCombine(dst + tupleOffset(p, idx, t) + e, upd[i], p.reduction);
    }
  }
}

//! Tuple geometry in elements (batch dims b): strides of the indexed axes, slice size.
NdParams ndParams(const LayerDesc& l, int64_t b) {
  const Dims &data = l.inputs[0].dims, &idx = l.inputs[1].dims;
  NdParams p{};
  p.k = static_cast<int>(idx.back());
  if (p.k < 1 || b + p.k > static_cast<int64_t>(data.size()) || p.k > kMaxRank) opError(l, "invalid last dim of indices");
  std::vector<int64_t> s = rowMajorStrides(Dims(data.begin() + b, data.end()));
  for (int j = 0; j < p.k; ++j) {
    p.dims[j] = data[b + j];
    p.strides[j] = s[j];
    if (p.dims[j] == 0) opError(l, "cannot index an empty axis");
  }
  p.tuples = volume(Dims(idx.begin(), idx.end() - 1));
  const int64_t batches = volume(Dims(data.begin(), data.begin() + b));
  p.perBatch = b > 0 && batches > 0 ? p.tuples / batches : 0;
  p.batchSize = b > 0 ? volume(Dims(data.begin() + b, data.end())) : 0;
  p.slice = volume(Dims(data.begin() + b + p.k, data.end()));
  return p;
}

//! Converts element units to vector units of vb bytes (the slice divides evenly).
NdParams inVectors(NdParams p, int64_t es, int vb) {
  const int64_t f = vb / es;
  if (vb >= es && f > 1) {
    p.slice /= f;
    p.batchSize /= f;
    for (int j = 0; j < p.k; ++j) p.strides[j] /= f;
  } else if (vb < es) {
    const int64_t g = es / vb;
    p.slice *= g;
    p.batchSize *= g;
    for (int j = 0; j < p.k; ++j) p.strides[j] *= g;
  }
  return p;
}

class GatherNdKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<cuda::ParamState<NdParams>>();
    s->p = ndParams(l, l.attrs->getInt("batch_dims", 0));
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const NdParams& e = static_cast<cuda::ParamState<NdParams>*>(state)->p;
    const int64_t es = static_cast<int64_t>(elementSize(io.in[0].type));
    if (e.tuples * e.slice == 0) return;
    const int vb = vectorBytes(e.slice * es, {io.in[0].data, io.out[0].data});
    NdParams p = inVectors(e, es, vb);
    dispatchVector(vb, [&](auto vbc) {
      using V = typename Bytes<decltype(vbc)::value>::type;
      gatherNdKernel<V><<<gridFor(p.tuples * p.slice), 256, 0, streamOf(io)>>>(
          static_cast<const V*>(io.in[0].data), static_cast<V*>(io.out[0].data), static_cast<const int64_t*>(io.in[1].data), p);
    });
    KILN_CUDA_CHECK_LAUNCH();
  }
};

class ScatterNdKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<cuda::ParamState<NdParams>>();
    s->p = ndParams(l, 0);
    s->p.reduction = reductionOf(l);
    if (volume(l.inputs[2].dims) != s->p.tuples * s->p.slice) opError(l, "updates have the wrong size");
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const NdParams& e = static_cast<cuda::ParamState<NdParams>*>(state)->p;
    const DataType t = io.in[0].type;
    const int64_t es = static_cast<int64_t>(elementSize(t));
    cuda::copyDevice(io.out[0].data, io.in[0].data, static_cast<size_t>(io.in[0].count * es), streamOf(io));
    if (e.tuples * e.slice == 0) return;
    const auto* idx = static_cast<const int64_t*>(io.in[1].data);
    if (e.reduction == kNone) {
      const int vb = vectorBytes(e.slice * es, {io.in[2].data, io.out[0].data});
      NdParams p = inVectors(e, es, vb);
      dispatchVector(vb, [&](auto vbc) {
        using V = typename Bytes<decltype(vbc)::value>::type;
        scatterNdKernel<V><<<gridFor(p.tuples * p.slice), 256, 0, streamOf(io)>>>(
            static_cast<V*>(io.out[0].data), static_cast<const V*>(io.in[2].data), idx, p);
      });
    } else {
      dispatchReduceType(t, [&](auto tt) {
        using T = decltype(tt);
        scatterNdKernel<T><<<gridFor(e.tuples * e.slice), 256, 0, streamOf(io)>>>(
            static_cast<T*>(io.out[0].data), static_cast<const T*>(io.in[2].data), idx, e);
      });
    }
    KILN_CUDA_CHECK_LAUNCH();
  }
};

// ---------------------------------------------------------------- OneHot

struct OneHotParams {
  int64_t outer, depth, inner, total;
};

template <typename T, typename I>
__global__ void oneHotKernel(const I* __restrict__ idx, const T* __restrict__ values, T* __restrict__ dst, OneHotParams p) {
  const T off = values[0], on = values[1];
  const double depth = static_cast<double>(p.depth);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t e = i % p.inner, t = i / p.inner, d = t % p.depth, o = t / p.depth;
    double v = static_cast<double>(idx[o * p.inner + e]);
    bool hot = false;
    if (v > -depth - 1 && v < depth) {  // NaN: off
      int64_t k = static_cast<int64_t>(v);
      if (k < 0) k += p.depth;
      hot = k == d;
    }
    dst[i] = hot ? on : off;
  }
}

template <typename F>
void dispatchOneHotIndex(DataType t, F&& f) {
  constexpr uint32_t kOneHotIndices = kIndexTypes | typeBit(DataType::kFLOAT) | typeBit(DataType::kDOUBLE);
  cuda::dispatchCudaType<kOneHotIndices>(t, f, "CUDA OneHot indices");
}

class OneHotKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& idx = l.inputs[0].dims;
    const Dims& out = l.outputs[0].dims;
    int64_t axis = l.attrs->getInt("axis", -1), outRank = static_cast<int64_t>(out.size());
    if (axis < 0) axis += outRank;
    if (axis < 0 || axis >= outRank) opError(l, "axis out of range");
    auto s = std::make_unique<cuda::ParamState<OneHotParams>>();
    s->p.outer = volume(Dims(idx.begin(), idx.begin() + axis));
    s->p.inner = volume(Dims(idx.begin() + axis, idx.end()));
    s->p.depth = out[axis];
    s->p.total = volume(out);
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const OneHotParams& p = static_cast<cuda::ParamState<OneHotParams>*>(state)->p;
    if (p.total == 0) return;
    cuda::dispatchElementSize<uint2>(elementSize(io.out[0].type), [&](auto tt) {
      using T = decltype(tt);
      dispatchOneHotIndex(io.in[0].type, [&](auto it) {
        using I = decltype(it);
        oneHotKernel<T, I><<<gridFor(p.total), 256, 0, streamOf(io)>>>(
            static_cast<const I*>(io.in[0].data), static_cast<const T*>(io.in[2].data), static_cast<T*>(io.out[0].data), p);
      });
    });
    KILN_CUDA_CHECK_LAUNCH();
  }
};

// ---------------------------------------------------------------- supports / create

bool intIndices(const LayerDesc& l, size_t i) {
  return l.present(i) && (l.inputs[i].type == DataType::kINT32 || l.inputs[i].type == DataType::kINT64);
}

bool rankFits(const LayerDesc& l) { return l.inputs[0].dims.size() <= static_cast<size_t>(kMaxRank); }

bool supportsGather(const LayerDesc& l) { return l.inputs.size() == 2 && byteSized(l.inputs[0].type) && intIndices(l, 1); }
bool supportsElements(const LayerDesc& l) {
  return l.inputs.size() >= 2 && byteSized(l.inputs[0].type) && intIndices(l, 1) && rankFits(l);
}
bool supportsScatterElements(const LayerDesc& l) {
  if (l.inputs.size() != 3 || !supportsElements(l)) return false;
  std::string r = l.attrs->getString("reduction", "none");
  return r == "none" || reducible(l.inputs[0].type);
}
bool supportsGatherNd(const LayerDesc& l) {
  return l.inputs.size() == 2 && byteSized(l.inputs[0].type) && l.inputs[1].type == DataType::kINT64 && rankFits(l);
}
bool supportsScatterNd(const LayerDesc& l) {
  if (l.inputs.size() != 3 || !byteSized(l.inputs[0].type) || l.inputs[1].type != DataType::kINT64 || !rankFits(l))
    return false;
  std::string r = l.attrs->getString("reduction", "none");
  return r == "none" || reducible(l.inputs[0].type);
}
bool supportsOneHot(const LayerDesc& l) {
  if (l.inputs.size() != 3 || !byteSized(l.inputs[2].type)) return false;
  DataType t = l.inputs[0].type;
  return t == DataType::kINT32 || t == DataType::kINT64 || t == DataType::kFLOAT || t == DataType::kDOUBLE;
}

template <typename K>
std::unique_ptr<Kernel> create(const LayerDesc&) {
  return std::make_unique<K>();
}

}  // namespace

namespace cuda {
KernelFactory gatherCuda() { return {supportsGather, create<GatherKernel>}; }
KernelFactory gatherElementsCuda() { return {supportsElements, create<GatherElementsKernel>}; }
KernelFactory gatherNdCuda() { return {supportsGatherNd, create<GatherNdKernel>}; }
KernelFactory scatterElementsCuda() { return {supportsScatterElements, create<ScatterElementsKernel>}; }  // and Scatter
KernelFactory scatterNdCuda() { return {supportsScatterNd, create<ScatterNdKernel>}; }
KernelFactory oneHotCuda() { return {supportsOneHot, create<OneHotKernel>}; }
}  // namespace cuda

}  // namespace kiln
