// CUDA tactics of the shape family that compute positions rather than copy plans: Pad
// (constant/reflect/edge/wrap, negative pads crop), Trilu, Range, and Shape/Size (their values
// are known on the host at reshape; the kernel only writes them).
#include <algorithm>
#include <cstring>

#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/shape_cuda.cuh"
#include "ops/op_util.h"

namespace kiln {

namespace {

using cuda::dispatchCudaType;
using cuda::gridFor;
using cuda::streamOf;
constexpr int kMaxRank = cuda::kMaxCopyRank;

bool byteSized(DataType t) {
  size_t es = elementSize(t);
  return es == 1 || es == 2 || es == 4 || es == 8;
}


//! `v` (a host value of any type, one element) converted to `to`, as raw little-endian bits.
uint64_t scalarBits(const HostTensor& v, DataType to) {
  uint64_t bits = 0;
  if (v.type() == to) {
    std::memcpy(&bits, v.data(), elementSize(to));
    return bits;
  }
  const double d = v.getDouble(0);
  switch (to) {
    case DataType::kHALF: bits = floatToHalf(static_cast<float>(d)); break;
    case DataType::kBF16: bits = floatToBf16(static_cast<float>(d)); break;
    default:
      dispatchNumeric(to, [&](auto t) {
        using T = decltype(t);
        T x = static_cast<T>(d);
        std::memcpy(&bits, &x, sizeof(T));
      });
  }
  return bits;
}

// ---------------------------------------------------------------- Pad

enum PadMode : int { kConstant = 0, kReflect, kEdge, kWrap };

struct PadParams {
  int rank, mode;
  int64_t count;
  int64_t outDims[kMaxRank], inStr[kMaxRank];
  int64_t before[kMaxRank], lo[kMaxRank], len[kMaxRank];  // per axis: pad before, crop start, kept length
  uint64_t fill;      // fill bits when known on the host
  bool fillOnDevice;  // else read constant_value (same type) from the device
};

__device__ __forceinline__ int64_t padSource(int mode, int64_t o, int64_t before, int64_t lo, int64_t m) {
  int64_t c = o - (before > 0 ? before : 0);
  if (c >= 0 && c < m) return lo + c;
  switch (mode) {
    case kEdge: return lo + (c < 0 ? 0 : m - 1);
    case kWrap: return lo + ((c % m) + m) % m;
    case kReflect: {
      if (m == 1) return lo;
      int64_t period = 2 * (m - 1), p = ((c % period) + period) % period;
      return lo + (p < m ? p : period - p);
    }
    default: return -1;
  }
}

template <typename T>
__global__ void padKernel(const T* __restrict__ src, T* __restrict__ dst, const T* __restrict__ fillPtr, PadParams p) {
  T fill;
  if (p.fillOnDevice) fill = *fillPtr;
  else memcpy(&fill, &p.fill, sizeof(T));
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.count; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t r = i, off = 0;
    bool constant = false;
    for (int k = p.rank - 1; k >= 0; --k) {
      int64_t q = r / p.outDims[k], c = r - q * p.outDims[k];
      r = q;
      int64_t s = padSource(p.mode, c, p.before[k], p.lo[k], p.len[k]);
      constant = constant || s < 0;
      off += s * p.inStr[k];
    }
    dst[i] = constant ? fill : src[off];
  }
}

int padModeOf(const LayerDesc& l) {
  std::string m = l.attrs->getString("mode", "constant");
  if (m == "constant") return kConstant;
  if (m == "reflect") return kReflect;
  if (m == "edge") return kEdge;
  if (m == "wrap") return kWrap;
  opError(l, "unknown pad mode '" + m + "'");
}

class PadKernel : public Kernel {
 public:
  explicit PadKernel(const LayerDesc& l) {
    if (l.present(2) && l.inputs[2].value.valid() && l.inputs[2].value.count() > 0) {
      fill_ = scalarBits(l.inputs[2].value, l.inputs[0].type);
      fillKnown_ = true;
    }
  }
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& in = l.inputs[0].dims;
    const Dims& out = l.outputs[0].dims;
    const int64_t rank = static_cast<int64_t>(in.size());
    if (rank > kMaxRank) throw UnsupportedError("CUDA Pad: rank above " + std::to_string(kMaxRank));
    auto s = std::make_unique<cuda::ParamState<PadParams>>();
    PadParams& p = s->p;
    p.rank = static_cast<int>(rank);
    p.mode = padModeOf(l);
    p.count = volume(out);
    std::vector<int64_t> pads = knownValue(l, 1).toInts(), axes;
    if (l.present(3)) {
      for (int64_t a : knownValue(l, 3).toInts()) axes.push_back(normalizeAxis(l, a, rank));
    } else {
      for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
    }
    if (pads.size() != 2 * axes.size()) opError(l, "pads do not match the axes");
    std::vector<int64_t> begin(rank, 0), end(rank, 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      begin[axes[i]] = pads[i];
      end[axes[i]] = pads[i + axes.size()];
    }
    std::vector<int64_t> str = rowMajorStrides(in);
    for (int64_t k = 0; k < rank; ++k) {
      p.outDims[k] = out[k];
      p.inStr[k] = str[k];
      p.before[k] = begin[k];
      p.lo[k] = std::max<int64_t>(0, -begin[k]);
      p.len[k] = in[k] - p.lo[k] - std::max<int64_t>(0, -end[k]);
      if (p.len[k] <= 0 && p.mode != kConstant && out[k] > 0 && p.count > 0)
        opError(l, "cannot pad an empty axis in mode '" + l.attrs->getString("mode", "") + "'");
    }
    // Without a constant_value input the fill is zero; with one of unknown value, read it on the device.
    p.fillOnDevice = l.present(2) && !fillKnown_ && volume(l.inputs[2].dims) > 0;
    p.fill = fillKnown_ ? fill_ : 0;
    if (p.fillOnDevice && l.inputs[2].type != l.inputs[0].type) throw UnsupportedError("CUDA Pad: constant_value of another type");
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const PadParams& p = static_cast<cuda::ParamState<PadParams>*>(state)->p;
    if (p.count == 0) return;
    cuda::dispatchElementSize(elementSize(io.in[0].type), [&](auto tt) {
      using T = decltype(tt);
      const T* fillPtr = p.fillOnDevice ? static_cast<const T*>(io.in[2].data) : nullptr;
      padKernel<T><<<gridFor(p.count), 256, 0, streamOf(io)>>>(static_cast<const T*>(io.in[0].data),
                                                               static_cast<T*>(io.out[0].data), fillPtr, p);
    });
    KILN_CUDA_CHECK_LAUNCH();
  }

 private:
  uint64_t fill_ = 0;
  bool fillKnown_ = false;
};

bool supportsPad(const LayerDesc& l) {
  if (l.inputs.empty() || !byteSized(l.inputs[0].type) || l.inputs[0].dims.size() > static_cast<size_t>(kMaxRank)) return false;
  // A constant_value of another type must be known on the host (converted there).
  if (l.present(2) && l.inputs[2].type != l.inputs[0].type && !l.inputs[2].value.valid()) return false;
  if (l.present(2) && l.inputs[2].value.valid() && l.inputs[2].type != l.inputs[0].type) {
    DataType t = l.inputs[0].type;  // scalarBits converts through double: numeric types only
    if (t == DataType::kBOOL) return false;
  }
  return true;
}

// ---------------------------------------------------------------- Trilu

struct TriluParams {
  int64_t rows, cols, count;
  int64_t k;
  bool upper, kOnDevice, k64;
};

template <typename T>
__global__ void triluKernel(const T* __restrict__ src, T* __restrict__ dst, const void* __restrict__ kPtr, TriluParams p) {
  int64_t k = p.k;
  if (p.kOnDevice) k = p.k64 ? *static_cast<const int64_t*>(kPtr) : *static_cast<const int32_t*>(kPtr);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.count; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t j = i % p.cols, r = (i / p.cols) % p.rows;
    bool keep = p.upper ? j - r >= k : j - r <= k;
    dst[i] = keep ? src[i] : T(0);
  }
}

class TriluKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& d = l.inputs[0].dims;
    auto s = std::make_unique<cuda::ParamState<TriluParams>>();
    TriluParams& p = s->p;
    p.rows = d[d.size() - 2];
    p.cols = d[d.size() - 1];
    p.count = volume(d);
    p.upper = l.attrs->getInt("upper", 1) != 0;
    p.k = 0;
    p.kOnDevice = false;
    if (l.present(1)) {
      if (l.inputs[1].value.valid()) p.k = l.inputs[1].value.getInt(0);
      else p.kOnDevice = true;
      p.k64 = l.inputs[1].type == DataType::kINT64;
    }
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const TriluParams& p = static_cast<cuda::ParamState<TriluParams>*>(state)->p;
    if (p.count == 0) return;
    const void* kPtr = p.kOnDevice ? io.in[1].data : nullptr;
    cuda::dispatchElementSize(elementSize(io.in[0].type), [&](auto tt) {
      using T = decltype(tt);
      triluKernel<T><<<gridFor(p.count), 256, 0, streamOf(io)>>>(static_cast<const T*>(io.in[0].data),
                                                                 static_cast<T*>(io.out[0].data), kPtr, p);
    });
    KILN_CUDA_CHECK_LAUNCH();
  }
};

bool supportsTrilu(const LayerDesc& l) {
  if (l.inputs.empty() || !byteSized(l.inputs[0].type) || l.inputs[0].dims.size() < 2) return false;
  return !l.present(1) || l.inputs[1].type == DataType::kINT64 || l.inputs[1].type == DataType::kINT32 ||
         l.inputs[1].value.valid();
}

// ---------------------------------------------------------------- Range

constexpr uint32_t kRangeTypes = kFloatTypes | typeBit(DataType::kDOUBLE) | typeBit(DataType::kINT16) |
                                typeBit(DataType::kINT32) | typeBit(DataType::kINT64);

struct RangeParams {
  int64_t count;
  double fstart, fdelta;   // float types
  int64_t istart, idelta;  // integer types
};

template <typename T>
__global__ void rangeKernel(T* __restrict__ dst, RangeParams p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.count; i += int64_t(gridDim.x) * blockDim.x) {
    if constexpr (std::is_same_v<T, double>) {
      dst[i] = __dadd_rn(p.fstart, __dmul_rn(static_cast<double>(i), p.fdelta));
    } else if constexpr (std::is_same_v<T, float>) {
      dst[i] = __fadd_rn(static_cast<float>(p.fstart), __fmul_rn(static_cast<float>(i), static_cast<float>(p.fdelta)));
    } else if constexpr (std::is_same_v<T, __half>) {
      dst[i] = __float2half_rn(__fadd_rn(static_cast<float>(p.fstart), __fmul_rn(static_cast<float>(i), static_cast<float>(p.fdelta))));
    } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
      dst[i] = __float2bfloat16_rn(__fadd_rn(static_cast<float>(p.fstart), __fmul_rn(static_cast<float>(i), static_cast<float>(p.fdelta))));
    } else {
      T start = static_cast<T>(p.istart), delta = static_cast<T>(p.idelta);
      dst[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    }
  }
}

class RangeKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<cuda::ParamState<RangeParams>>();
    RangeParams& p = s->p;
    const HostTensor &start = knownValue(l, 0), &delta = knownValue(l, 2);
    p.count = volume(l.outputs[0].dims);
    p.fstart = start.getDouble(0);
    p.fdelta = delta.getDouble(0);
    p.istart = start.getInt(0);
    p.idelta = delta.getInt(0);
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const RangeParams& p = static_cast<cuda::ParamState<RangeParams>*>(state)->p;
    if (p.count == 0) return;
    auto launch = [&](auto tt) {
      using T = decltype(tt);
      rangeKernel<T><<<gridFor(p.count), 256, 0, streamOf(io)>>>(static_cast<T*>(io.out[0].data), p);
    };
    dispatchCudaType<kRangeTypes>(io.out[0].type, launch, "CUDA Range");
    KILN_CUDA_CHECK_LAUNCH();
  }
};

bool supportsRange(const LayerDesc& l) {
  if (l.inputs.size() != 3) return false;
  return inTypeSet(kRangeTypes, l.inputs[0].type);
}

// ---------------------------------------------------------------- Shape / Size

constexpr int kMaxShapeValues = 32;

struct ShapeValues {
  int n;
  int64_t v[kMaxShapeValues];
};

__global__ void writeValuesKernel(int64_t* __restrict__ dst, ShapeValues s) {
  if (threadIdx.x < s.n) dst[threadIdx.x] = s.v[threadIdx.x];
}

class ShapeKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& in = l.inputs[0].dims;
    auto s = std::make_unique<cuda::ParamState<ShapeValues>>();
    if (l.op == "Size") {
      s->p.n = 1;
      s->p.v[0] = volume(in);
    } else {
      const int64_t rank = static_cast<int64_t>(in.size());
      int64_t start = l.attrs->getInt("start", 0), end = l.attrs->getInt("end", rank);
      if (start < 0) start += rank;
      if (end < 0) end += rank;
      start = std::clamp<int64_t>(start, 0, rank);
      end = std::max(start, std::clamp<int64_t>(end, 0, rank));
      if (end - start > kMaxShapeValues) throw UnsupportedError("CUDA Shape: rank above " + std::to_string(kMaxShapeValues));
      s->p.n = static_cast<int>(end - start);
      for (int64_t i = start; i < end; ++i) s->p.v[i - start] = in[i];
    }
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const ShapeValues& s = static_cast<cuda::ParamState<ShapeValues>*>(state)->p;
    if (s.n == 0) return;
    writeValuesKernel<<<1, kMaxShapeValues, 0, streamOf(io)>>>(static_cast<int64_t*>(io.out[0].data), s);
    KILN_CUDA_CHECK_LAUNCH();
  }
};

bool supportsAny(const LayerDesc& l) { return !l.inputs.empty(); }

template <typename K>
std::unique_ptr<Kernel> create(const LayerDesc&) {
  return std::make_unique<K>();
}

std::unique_ptr<Kernel> createPad(const LayerDesc& l) { return std::make_unique<PadKernel>(l); }

}  // namespace

namespace cuda {
KernelFactory padCuda() { return {supportsPad, createPad}; }
KernelFactory triluCuda() { return {supportsTrilu, create<TriluKernel>}; }
KernelFactory rangeCuda() { return {supportsRange, create<RangeKernel>}; }
KernelFactory shapeValuesCuda() { return {supportsAny, create<ShapeKernel>}; }  // Shape, Size
}  // namespace cuda

}  // namespace kiln
