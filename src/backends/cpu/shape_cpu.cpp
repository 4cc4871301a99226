// Optimized CPU tactics: shape family.
//  - "copy": Reshape/Flatten/Squeeze/Unsqueeze/Identity move no data when the planner aliases the
//    output to the input (same pointer); otherwise one parallel memcpy.
//  - "blocked": Transpose after merging axes: contiguous runs are memcpy'd (e.g. [B,S,H,D] <->
//    [B,H,S,D]); otherwise cache-sized tiles of the 2-D transpose between the input's and the
//    output's innermost axes (e.g. [B,H,S,D] -> [B,H,D,S]), in parallel.
//  - "memcpy": Concat, Slice, Gather copy contiguous runs in parallel.
// Plans are computed in reshape() (concrete shapes); execute() only copies.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_tactics.h"
#include "core/thread_pool.h"
#include "ops/fused_attrs.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

constexpr int64_t kCopyGrainBytes = int64_t(1) << 16;  // smallest parallel chunk of a copy

template <typename F>
void dispatchBytes(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(uint64_t{}); break;
    default: throw Error("unsupported element size " + std::to_string(bytes));
  }
}

bool anySupported(const LayerDesc&) { return true; }

//! Parallel memcpy of `bytes` (no-op when aliased).
void parallelCopy(ThreadPool* pool, void* dst, const void* src, size_t bytes) {
  if (!bytes || dst == src) return;
  int64_t chunks = static_cast<int64_t>((bytes + kCopyGrainBytes - 1) / kCopyGrainBytes);
  pool->parallelFor(chunks, 1, [&](int64_t b, int64_t e) {
    size_t begin = static_cast<size_t>(b) * kCopyGrainBytes, end = std::min(bytes, static_cast<size_t>(e) * kCopyGrainBytes);
    std::memcpy(static_cast<uint8_t*>(dst) + begin, static_cast<const uint8_t*>(src) + begin, end - begin);
  });
}

//! Rows to hand one parallelFor task so that each moves at least kCopyGrainBytes.
int64_t rowGrain(int64_t rowBytes) { return std::max<int64_t>(1, kCopyGrainBytes / std::max<int64_t>(rowBytes, 1)); }

// ---------------------------------------------------------------- copy (Reshape & co.)

class CopyKernel : public Kernel {
 public:
  void execute(const KernelIO& io, KernelState*) const override {
    parallelCopy(io.pool, io.out[0].data, io.in[0].data, static_cast<size_t>(io.out[0].count) * elementSize(io.out[0].type));
  }
};

std::unique_ptr<Kernel> createCopy(const LayerDesc&) { return std::make_unique<CopyKernel>(); }

// ---------------------------------------------------------------- row copies (Slice, Transpose with contiguous rows)

//! Copies rows: row r of the output (rowBytes contiguous bytes) comes from input element offset
//! base + sum_k idx_k * strides[k], idx being r decomposed over `dims` (row-major).
struct RowCopyPlan {
  Dims dims;
  std::vector<int64_t> strides;
  int64_t base = 0;
  int64_t rows = 0;
  int64_t rowElems = 0;
  int64_t innerStride = 1;  //!< input stride between a row's elements (1: memcpy)
};

int64_t rowOffset(const RowCopyPlan& p, int64_t r) {
  int64_t off = p.base;
  for (size_t k = p.dims.size(); k-- > 0;) {
    off += (r % p.dims[k]) * p.strides[k];
    r /= p.dims[k];
  }
  return off;
}

//! Advances a row index held in `idx` (over p.dims) and its input offset by one row.
inline void nextRow(const RowCopyPlan& p, int64_t* idx, int64_t& off) {
  for (size_t k = p.dims.size(); k-- > 0;) {
    off += p.strides[k];
    if (++idx[k] < p.dims[k]) return;
    off -= p.strides[k] * p.dims[k];
    idx[k] = 0;
  }
}

constexpr size_t kMaxIncrementalRank = 16;  // row index kept on the stack up to this rank

void runRowCopy(const RowCopyPlan& p, const KernelIO& io) {
  size_t es = elementSize(io.in[0].type);
  const auto* src = static_cast<const uint8_t*>(io.in[0].data);
  auto* dst = static_cast<uint8_t*>(io.out[0].data);
  int64_t rowBytes = p.rowElems * static_cast<int64_t>(es);
  bool incremental = p.dims.size() <= kMaxIncrementalRank;
  io.pool->parallelFor(p.rows, rowGrain(rowBytes), [&](int64_t b, int64_t e) {
    int64_t idx[kMaxIncrementalRank] = {};
    int64_t off = rowOffset(p, b);
    if (incremental)
      for (size_t k = p.dims.size(), r = static_cast<size_t>(b); k-- > 0;) {
        idx[k] = static_cast<int64_t>(r % p.dims[k]);
        r /= p.dims[k];
      }
    for (int64_t r = b; r < e; ++r) {
      if (p.innerStride == 1) {
        std::memcpy(dst + r * rowBytes, src + off * static_cast<int64_t>(es), static_cast<size_t>(rowBytes));
      } else {
        dispatchBytes(es, [&](auto tag) {
          using U = decltype(tag);
          const U* in = reinterpret_cast<const U*>(src) + off;
          U* out = reinterpret_cast<U*>(dst) + r * p.rowElems;
          for (int64_t j = 0; j < p.rowElems; ++j) out[j] = in[j * p.innerStride];
        });
      }
      if (incremental) nextRow(p, idx, off);
      else off = rowOffset(p, r + 1 < e ? r + 1 : r);
    }
  });
}

struct RowCopyState : KernelState {
  RowCopyPlan plan;
};

// ---------------------------------------------------------------- Transpose

//! Output dims and the input stride of each output axis after dropping size-1 axes and merging
//! output axes that are adjacent in the input too.
void simplifyTranspose(const Dims& in, const std::vector<int64_t>& perm, Dims& outDims, std::vector<int64_t>& strides) {
  std::vector<int64_t> inStrides = rowMajorStrides(in);
  outDims.clear();
  strides.clear();
  int64_t prevAxis = -2;
  for (int64_t p : perm) {
    if (in[p] == 1) continue;
    if (p == prevAxis + 1 && !outDims.empty()) {  // continues the previous output axis in the input
      outDims.back() *= in[p];
      strides.back() = inStrides[p];
    } else {
      outDims.push_back(in[p]);
      strides.push_back(inStrides[p]);
    }
    prevAxis = p;
  }
}

struct TransposeState : KernelState {
  bool rows = true;  //!< innermost axis contiguous in both: row copies
  RowCopyPlan rowPlan;
  // 2-D tiled case: output axis `a` is the input's innermost axis; the output's innermost axis
  // reads the input with stride `bStride`.
  Dims outDims;
  std::vector<int64_t> inStrides, outStrides;
  int a = 0;
  int64_t tilesA = 0, tilesB = 0, outerCount = 0;
};

constexpr int64_t kTile = 32;

//! dst[c * dstStride + r] = src[r * srcStride + c] for an 8x8 block of 4-byte elements, through
//! registers: eight contiguous loads and eight contiguous stores. (Reading the input's column one
//! element at a time made SegFormer's [1, 128, 4096] -> [1, 4096, 128] transpose 3x slower than
//! ONNX Runtime's: its 16 KiB stride puts every read of a tile in the same L1 sets.)
inline void transpose8x8(const float* src, int64_t srcStride, float* dst, int64_t dstStride) {
  __m256 r[8], t[8];
  for (int k = 0; k < 8; ++k) r[k] = _mm256_loadu_ps(src + k * srcStride);
  for (int k = 0; k < 8; k += 2) {
    t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
  }
  for (int k = 0; k < 8; k += 4) {
    r[k] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int k = 0; k < 4; ++k) {
    _mm256_storeu_ps(dst + k * dstStride, _mm256_permute2f128_ps(r[k], r[k + 4], 0x20));
    _mm256_storeu_ps(dst + (k + 4) * dstStride, _mm256_permute2f128_ps(r[k], r[k + 4], 0x31));
  }
}

class TransposeKernel : public Kernel {
 public:
  explicit TransposeKernel(std::vector<int64_t> perm) : perm_(std::move(perm)) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<TransposeState>();
    std::vector<int64_t> perm = perm_;
    if (perm.empty())
      for (size_t i = l.inputs[0].dims.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    Dims dims;
    std::vector<int64_t> strides;
    simplifyTranspose(l.inputs[0].dims, perm, dims, strides);
    if (dims.empty() || strides.back() == 1) {
      RowCopyPlan& p = s->rowPlan;
      p.rowElems = dims.empty() ? 1 : dims.back();
      p.dims.assign(dims.begin(), dims.empty() ? dims.end() : dims.end() - 1);
      p.strides.assign(strides.begin(), strides.empty() ? strides.end() : strides.end() - 1);
      p.rows = volume(p.dims);
      if (volume(l.inputs[0].dims) == 0) p.rows = 0;
    } else {
      s->rows = false;
      s->outDims = dims;
      s->inStrides = strides;
      s->outStrides = rowMajorStrides(dims);
      s->a = static_cast<int>(std::find(strides.begin(), strides.end(), 1) - strides.begin());
      int64_t m = static_cast<int64_t>(dims.size());
      s->tilesA = (dims[s->a] + kTile - 1) / kTile;
      s->tilesB = (dims[m - 1] + kTile - 1) / kTile;
      s->outerCount = 1;
      for (int64_t k = 0; k < m - 1; ++k)
        if (k != s->a) s->outerCount *= dims[k];
    }
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    auto* s = static_cast<TransposeState*>(state);
    if (s->rows) return runRowCopy(s->rowPlan, io);
    dispatchBytes(elementSize(io.in[0].type), [&](auto tag) { tiled<decltype(tag)>(*s, io); });
  }

 private:
  template <typename U>
  static void tiled(const TransposeState& s, const KernelIO& io) {
    const U* src = static_cast<const U*>(io.in[0].data);
    U* dst = static_cast<U*>(io.out[0].data);
    int m = static_cast<int>(s.outDims.size()), a = s.a;
    int64_t dimA = s.outDims[a], dimB = s.outDims[m - 1], bStride = s.inStrides[m - 1], aOutStride = s.outStrides[a];
    int64_t tasks = s.outerCount * s.tilesA * s.tilesB;
    io.pool->parallelFor(tasks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        int64_t tb = t % s.tilesB, ta = (t / s.tilesB) % s.tilesA, outer = t / (s.tilesB * s.tilesA);
        int64_t inOff = 0, outOff = 0;
        for (int k = m - 2; k >= 0; --k) {  // decompose the outer index over the other axes
          if (k == a) continue;
          int64_t i = outer % s.outDims[k];
          outer /= s.outDims[k];
          inOff += i * s.inStrides[k];
          outOff += i * s.outStrides[k];
        }
        int64_t a0 = ta * kTile, a1 = std::min(dimA, a0 + kTile), b0 = tb * kTile, b1 = std::min(dimB, b0 + kTile);
        if constexpr (sizeof(U) == 4) {  // whole 8x8 blocks through registers, the edges below
          const int64_t a8 = a0 + (a1 - a0) / 8 * 8, b8 = b0 + (b1 - b0) / 8 * 8;
          for (int64_t j = b0; j < b8; j += 8)
            for (int64_t i = a0; i < a8; i += 8)
              transpose8x8(reinterpret_cast<const float*>(src + inOff + i + j * bStride), bStride,
                           reinterpret_cast<float*>(dst + outOff + i * aOutStride + j), aOutStride);
          for (int64_t i = a0; i < a1; ++i) {
            const U* in = src + inOff + i;
            U* out = dst + outOff + i * aOutStride;
            for (int64_t j = i < a8 ? b8 : b0; j < b1; ++j) out[j] = in[j * bStride];
          }
          continue;
        }
        for (int64_t i = a0; i < a1; ++i) {
          const U* in = src + inOff + i;
          U* out = dst + outOff + i * aOutStride;
          for (int64_t j = b0; j < b1; ++j) out[j] = in[j * bStride];
        }
      }
    });
  }

  std::vector<int64_t> perm_;
};

std::unique_ptr<Kernel> createTranspose(const LayerDesc& l) {
  return std::make_unique<TransposeKernel>(l.attrs->getInts("perm"));
}

// ---------------------------------------------------------------- Concat

struct ConcatState : KernelState {
  int64_t outer = 0;
  std::vector<int64_t> chunkBytes, dstOffset;  //!< per input: bytes per outer step, offset in the output row
  int64_t rowBytes = 0;
};

class ConcatKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<ConcatState>();
    const Dims& od = l.outputs[0].dims;
    int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", 0), static_cast<int64_t>(od.size()));
    int64_t es = static_cast<int64_t>(elementSize(l.outputs[0].type));
    s->outer = volume(Dims(od.begin(), od.begin() + axis));
    int64_t inner = volume(Dims(od.begin() + axis + 1, od.end()));
    for (auto& in : l.inputs) {
      s->dstOffset.push_back(s->rowBytes);
      s->chunkBytes.push_back(in.dims[axis] * inner * es);
      s->rowBytes += s->chunkBytes.back();
    }
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    auto* s = static_cast<ConcatState*>(state);
    int64_t n = static_cast<int64_t>(io.in.size());
    auto* dst = static_cast<uint8_t*>(io.out[0].data);
    io.pool->parallelFor(s->outer * n, rowGrain(s->rowBytes / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t o = t / n, i = t % n, bytes = s->chunkBytes[i];
        if (bytes) std::memcpy(dst + o * s->rowBytes + s->dstOffset[i], static_cast<const uint8_t*>(io.in[i].data) + o * bytes, bytes);
      }
    });
  }
};

std::unique_ptr<Kernel> createConcat(const LayerDesc&) { return std::make_unique<ConcatKernel>(); }

// ---------------------------------------------------------------- Slice

//! Start of the slice along one axis, clamped like the ONNX spec (the size comes from the output).
int64_t sliceStart(int64_t start, int64_t step, int64_t dim) {
  if (start < 0) start += dim;
  return step > 0 ? std::clamp<int64_t>(start, 0, dim) : std::clamp<int64_t>(start, 0, dim - 1);
}

class SliceKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims &in = l.inputs[0].dims, &out = l.outputs[0].dims;
    int64_t rank = static_cast<int64_t>(in.size());
    std::vector<int64_t> starts = knownValue(l, 1).toInts(), axes, steps;
    if (l.present(3)) axes = knownValue(l, 3).toInts();
    else for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (l.present(4)) steps = knownValue(l, 4).toInts();
    else steps.assign(starts.size(), 1);
    if (axes.size() != starts.size() || steps.size() != starts.size() || out.size() != in.size())
      opError(l, "inconsistent slice parameters");
    std::vector<int64_t> start(rank, 0), step(rank, 1), inStrides = rowMajorStrides(in);
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t axis = normalizeAxis(l, axes[i], rank);
      step[axis] = steps[i];
      start[axis] = out[axis] > 0 ? sliceStart(starts[i], steps[i], in[axis]) : 0;
    }
    auto s = std::make_unique<RowCopyState>();
    RowCopyPlan& p = s->plan;
    // The contiguous run: the innermost axis, widened over trailing axes copied whole.
    int64_t k = rank;
    p.rowElems = 1;
    while (k > 0 && step[k - 1] == 1) {
      --k;
      p.rowElems *= out[k];
      if (out[k] != in[k]) break;
    }
    if (k == rank && rank > 0) {  // innermost axis strided: rows of single elements
      --k;
      p.rowElems = out[k];
      p.innerStride = step[k];
    }
    for (int64_t j = 0; j < rank; ++j) p.base += start[j] * inStrides[j];
    p.dims.assign(out.begin(), out.begin() + k);
    for (int64_t j = 0; j < k; ++j) p.strides.push_back(inStrides[j] * step[j]);
    p.rows = volume(out) == 0 ? 0 : volume(p.dims);
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    runRowCopy(static_cast<RowCopyState*>(state)->plan, io);
  }
};

std::unique_ptr<Kernel> createSlice(const LayerDesc&) { return std::make_unique<SliceKernel>(); }

// ---------------------------------------------------------------- Gather

struct GatherState : KernelState {
  int64_t outer = 0, dim = 0, rowBytes = 0;
};

class GatherKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& d = l.inputs[0].dims;
    int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", 0), static_cast<int64_t>(d.size()));
    auto s = std::make_unique<GatherState>();
    s->outer = volume(Dims(d.begin(), d.begin() + axis));
    s->dim = d[axis];
    s->rowBytes = volume(Dims(d.begin() + axis + 1, d.end())) * static_cast<int64_t>(elementSize(l.inputs[0].type));
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    if (io.in[1].type == DataType::kINT32) run<int32_t>(io, *static_cast<GatherState*>(state));
    else run<int64_t>(io, *static_cast<GatherState*>(state));
  }

 private:
  template <typename I>
  static void run(const KernelIO& io, const GatherState& s) {
    const I* idx = io.in[1].as<const I>();
    int64_t n = io.in[1].count;
    for (int64_t j = 0; j < n; ++j)  // validate before the parallel copy (workers must not throw)
      if (idx[j] < -s.dim || idx[j] >= s.dim)
        throw Error("Gather: index " + std::to_string(idx[j]) + " is out of range for a dim of size " + std::to_string(s.dim));
    const auto* src = static_cast<const uint8_t*>(io.in[0].data);
    auto* dst = static_cast<uint8_t*>(io.out[0].data);
    io.pool->parallelFor(s.outer * n, rowGrain(s.rowBytes), [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t o = t / n, i = idx[t % n];
        if (i < 0) i += s.dim;
        std::memcpy(dst + t * s.rowBytes, src + (o * s.dim + i) * s.rowBytes, static_cast<size_t>(s.rowBytes));
      }
    });
  }
};

bool gatherSupported(const LayerDesc& l) {
  return l.inputs.size() == 2 && (l.inputs[1].type == DataType::kINT32 || l.inputs[1].type == DataType::kINT64);
}

std::unique_ptr<Kernel> createGather(const LayerDesc&) { return std::make_unique<GatherKernel>(); }

}  // namespace

namespace cpu {
KernelFactory copyAnyType() { return {anySupported, createCopy}; }
KernelFactory transposeBlocked() { return {anySupported, createTranspose}; }
// In a blocked region (cpu_layout's channel concats) a Concat along the channels of 4-D tensors
// whose channel counts are multiples of the block copies the same runs as in NCHW.
bool concatSupported(const LayerDesc& l) {
  if (hasPlainLayouts(l)) return true;
  const int64_t b = outLayoutBlock(l);
  if (b < 1 || inLayoutBlock(l) != b || l.outputs.size() != 1 || l.outputs[0].dims.size() != 4) return false;
  const int64_t axis = l.attrs->getInt("axis", 0);
  if (axis != 1 && axis != -3) return false;
  for (const TensorDesc& t : l.inputs)
    if (t.dims.size() != 4 || t.dims[1] < 0 || t.dims[1] % b != 0) return false;
  return true;
}

KernelFactory concatMemcpy() { return {concatSupported, createConcat}; }
KernelFactory sliceMemcpy() { return {anySupported, createSlice}; }
KernelFactory gatherMemcpy() { return {gatherSupported, createGather}; }
}  // namespace cpu

}  // namespace kiln
