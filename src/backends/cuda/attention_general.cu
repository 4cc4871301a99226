// "attention_general": ONNX Attention (opsets 23-25) with everything the flash tactics
// (attention_cuda.cpp) leave out (they run GQA/MQA too, this kernel also): the past/present KV cache,
// nonpad_kv_seqlen, softcap, sliding windows, softmax_precision, the qk_matmul_output modes and
// all three outputs beyond Y; float32/float16/bfloat16 Q/K/V, float/float16/bfloat16/bool masks.
// Semantics follow the reference kernel (ops/attention.cpp) step by step, including where it
// rounds to the input type (Q and K scaled by sqrt(scale) in T, the raw scores and the
// probabilities cast to T), with float32 math where the reference uses double.
// One block per query row: the row's scores live in shared memory (total key length up to
// kMaxKeys), a block-wide max and sum make the softmax, then each thread accumulates output
// features. A general fallback, not a fast path: on shapes both run, the builder's timing prefers
// the flash kernels.
#include <cmath>
#include <string>

#include "backends/cuda/attention_geometry.h"
#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "ops/attention_config.h"
#include "ops/fused_attrs.h"

namespace kiln {

namespace {

constexpr int kThreads = 128;
constexpr int64_t kMaxKeys = 40960;  //!< scores in shared memory: 160 KiB plus the query row
constexpr int kMaxHead = 1024;       //!< head sizes (the query row is in shared memory too)

struct GeneralParams {
  const void *q = nullptr, *k = nullptr, *v = nullptr, *pastK = nullptr, *pastV = nullptr, *mask = nullptr;
  const int64_t* nonpad = nullptr;
  void *y = nullptr, *presentK = nullptr, *presentV = nullptr, *qk = nullptr;
  bool is3d = false, causal = false;
  int64_t batch = 0, qHeads = 0, kvHeads = 0, qSeq = 0, kvSeq = 0, past = 0, e = 0, ev = 0, total = 0;
  float sqrtScale = 1.f, softcap = 0.f;
  int prec = 1;    //!< ONNX type id the softmax rounds to (1 and 11: float32 math, no rounding)
  int qkMode = 0;  //!< which value qk_matmul_output holds (0 raw, 1 capped, 2 + mask, 3 softmax)
  int64_t leftWindow = -1, rightWindow = -1;
  cuda::FlashMask maskKind = cuda::FlashMask::kNone;
  int64_t maskStrideB = 0, maskStrideH = 0, maskStrideQ = 0, maskLen = 0;
  int64_t maskPeriodB = 0;  // > 0: batch b reads mask batch b % maskPeriodB (kiln_mask_batch_period)
};

template <typename T>
__device__ __forceinline__ float roundT(float x) { return cuda::toF(cuda::fromF<T>(x)); }

__device__ __forceinline__ float roundPrec(int prec, float x) {
  if (prec == 10) return __half2float(__float2half_rn(x));
  if (prec == 16) return __bfloat162float(__float2bfloat16_rn(x));
  return x;
}

//! Offset of row s of head h of batch b in a Q/K/V/Y tensor ([B, H, S, W] or 3-D [B, S, H*W]).
__device__ __forceinline__ int64_t rowOffset(bool is3d, int64_t b, int64_t h, int64_t s, int64_t heads, int64_t seq, int64_t width) {
  return is3d ? ((b * seq + s) * heads + h) * width : ((b * heads + h) * seq + s) * width;
}

//! Row j of the concatenated (past, new) keys or values of kv head kh.
template <typename T>
__device__ __forceinline__ const T* kvRow(const GeneralParams& p, const void* past, const void* cur, int64_t b, int64_t kh,
                                          int64_t j, int64_t width) {
  if (j < p.past) return static_cast<const T*>(past) + ((b * p.kvHeads + kh) * p.past + j) * width;
  return static_cast<const T*>(cur) + rowOffset(p.is3d, b, kh, j - p.past, p.kvHeads, p.kvSeq, width);
}

__device__ float maskValue(const GeneralParams& p, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (p.maskKind == cuda::FlashMask::kNone) return 0.f;
  if (j >= p.maskLen) return -INFINITY;  // ONNX: a short mask masks the keys past its end
  const int64_t mb = p.maskPeriodB > 0 ? b % p.maskPeriodB : b;
  const int64_t off = mb * p.maskStrideB + h * p.maskStrideH + i * p.maskStrideQ + j;
  switch (p.maskKind) {
    case cuda::FlashMask::kFloat: return static_cast<const float*>(p.mask)[off];
    case cuda::FlashMask::kHalf: return __half2float(static_cast<const __half*>(p.mask)[off]);
    case cuda::FlashMask::kBf16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p.mask)[off]);
    default: return static_cast<const bool*>(p.mask)[off] ? 0.f : -INFINITY;
  }
}

//! Block-wide max (op 0) or sum (op 1) of one value per thread; every thread gets the result.
__device__ float blockReduce(float v, int op, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = op == 0 ? fmaxf(v, w) : v + w;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read from the previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < kThreads / 32; ++w) r = op == 0 ? fmaxf(r, scratch[w]) : r + scratch[w];
  return r;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) attentionGeneralKernel(GeneralParams p, int64_t rows) {
  extern __shared__ float smem[];
  float* scratch = smem;          // kThreads / 32 partials
  float* qs = smem + 32;          // the scaled query row (e floats)
  float* lg = qs + p.e;           // scores, then probabilities (total floats)
  T* qkOut = static_cast<T*>(p.qk);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t i = row % p.qSeq, bh = row / p.qSeq, h = bh % p.qHeads, b = bh / p.qHeads;
    const int64_t kh = h / (p.qHeads / p.kvHeads);
    const T* q = static_cast<const T*>(p.q) + rowOffset(p.is3d, b, h, i, p.qHeads, p.qSeq, p.e);
    __syncthreads();  // the previous row's readers of qs/lg are done
    for (int64_t e = threadIdx.x; e < p.e; e += kThreads) qs[e] = roundT<T>(cuda::toF(q[e]) * p.sqrtScale);
    __syncthreads();
    // Keys are absolute positions; the causal/window frontier of query i is offset + i.
    const int64_t offset = p.past > 0 ? p.past : (p.nonpad ? p.nonpad[b] - p.qSeq : 0);
    const int64_t pos = offset + i;
    T* qkRow = qkOut ? qkOut + row * p.total : nullptr;
    bool allMasked = true, anyNan = false;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < p.total; j += kThreads) {
      float bias = maskValue(p, b, h, i, j);
      if (p.causal && j > pos) bias += -INFINITY;
      if (p.leftWindow >= 0 && pos - j > p.leftWindow) bias += -INFINITY;
      if (p.rightWindow >= 0 && j - pos > p.rightWindow) bias += -INFINITY;
      if (p.nonpad && j >= p.nonpad[b]) bias += -INFINITY;
      allMasked = allMasked && bias == -INFINITY;
      const T* kr = kvRow<T>(p, p.pastK, p.k, b, kh, j, p.e);
      float dot = 0.f;
      for (int64_t e = 0; e < p.e; ++e) dot += qs[e] * roundT<T>(cuda::toF(kr[e]) * p.sqrtScale);
      const float raw = roundT<T>(dot);
      const float capped = p.softcap > 0.f ? p.softcap * tanhf(raw / p.softcap) : raw;
      const float logit = capped + bias;
      if (qkRow && p.qkMode < 3) qkRow[j] = cuda::fromF<T>(p.qkMode == 0 ? raw : (p.qkMode == 1 ? capped : logit));
      const float r = roundPrec(p.prec, logit);
      lg[j] = r;
      anyNan = anyNan || isnan(r);
      mx = fmaxf(mx, r);
    }
    const bool fullyMasked = __syncthreads_and(allMasked);
    const bool nanRow = __syncthreads_or(anyNan);
    mx = blockReduce(mx, 0, scratch);
    const float safeMax = mx == -INFINITY ? 0.f : mx;
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < p.total; j += kThreads) {
      const float ex = expf(lg[j] - safeMax);
      lg[j] = ex;
      sum += ex;
    }
    sum = blockReduce(sum, 1, scratch);
    if (sum == 0.f) sum = 1.f;
    for (int64_t j = threadIdx.x; j < p.total; j += kThreads) {
      float pr = nanRow ? NAN : roundPrec(p.prec, lg[j] / sum);
      if (fullyMasked) pr = 0.f;
      if (qkRow && p.qkMode == 3) qkRow[j] = cuda::fromF<T>(pr);
      lg[j] = roundT<T>(pr);  // the probabilities are cast to T before P @ V
    }
    __syncthreads();
    T* y = static_cast<T*>(p.y) + rowOffset(p.is3d, b, h, i, p.qHeads, p.qSeq, p.ev);
    for (int64_t e = threadIdx.x; e < p.ev; e += kThreads) {
      float acc = 0.f;
      for (int64_t j = 0; j < p.total; ++j) {
        const float pj = lg[j];
        if (pj == 0.f) continue;
        acc += pj * cuda::toF(kvRow<T>(p, p.pastV, p.v, b, kh, j, p.ev)[e]);
      }
      y[e] = cuda::fromF<T>(acc);
    }
  }
}

//! present_key / present_value: the past rows then the new ones, [B, kvHeads, total, width].
template <typename T>
__global__ void presentKernel(GeneralParams p, const void* past, const void* cur, T* dst, int64_t width, int64_t n) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n; idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = idx % width, j = (idx / width) % p.total, bk = idx / (width * p.total);
    const int64_t kh = bk % p.kvHeads, b = bk / p.kvHeads;
    dst[idx] = kvRow<T>(p, past, cur, b, kh, j, width)[e];
  }
}

size_t smemBytes(int64_t e, int64_t total) { return static_cast<size_t>(32 + e + total) * sizeof(float); }

bool supportsGeneral(const LayerDesc& l) {
  if (hasQkvViews(*l.attrs)) return false;  // strided views come from the fusion: the flash tactics run those
  if (l.attrs->has(kAttentionMaskFillAttr)) return false;  // from the fusion too: the flash tactics run it
  if (l.inputs.size() < 3 || l.inputs.size() > 7 || l.outputs.size() > 4) return false;
  const DataType t = l.inputs[kAttentionQ].type;
  if (t != DataType::kFLOAT && t != DataType::kHALF && t != DataType::kBF16) return false;
  if (l.inputs[kAttentionK].type != t || l.inputs[kAttentionV].type != t) return false;
  if (l.present(kAttentionMask) && cuda::flashMaskOf(l.inputs[kAttentionMask].type) == cuda::FlashMask::kNone) return false;
  try {  // (the parsers reject other softmax precisions, and past K/V of another type)
    parseAttentionConfig(l);
    AttentionShape s = attentionShape(l);
    checkPastAndNonpad(l, s, t);
    if (s.headSize > kMaxHead || s.vHeadSize > kMaxHead) return false;
    if (s.total() > kMaxKeys) return false;  // -1 (unknown): checked again when the shape is known
  } catch (const Error&) {
    return false;
  }
  return true;
}

class GeneralKernel : public Kernel {
 public:
  explicit GeneralKernel(const LayerDesc& l) : type_(l.inputs[kAttentionQ].type) {
    // Once per process and type: the largest dynamic shared memory the kernel may ask for.
    const int bytes = static_cast<int>(smemBytes(kMaxHead, kMaxKeys));
    cuda::dispatchCudaType<kFloatTypes>(type_, [&](auto tag) { setSmem(attentionGeneralKernel<decltype(tag)>, bytes); },
                                        "attention_general");
  }

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto fail = [&](const std::string& m) { throw UnsupportedError("layer '" + l.name + "' (Attention): " + m); };
    const AttentionConfig c = parseAttentionConfig(l);
    AttentionShape s = attentionShape(l);
    checkPastAndNonpad(l, s, type_);
    GeneralParams& p = cuda::makeState<GeneralParams>(state);
    p.is3d = s.is3d, p.causal = c.causal;
    p.batch = s.batch, p.qHeads = s.qHeads, p.kvHeads = s.kvHeads, p.qSeq = s.qSeq, p.kvSeq = s.kvSeq, p.past = s.pastSeq;
    p.e = s.headSize, p.ev = s.vHeadSize, p.total = s.total();
    if (p.total > kMaxKeys) fail("key length " + std::to_string(p.total) + " exceeds attention_general's " + std::to_string(kMaxKeys));
    if (p.e > kMaxHead || p.ev > kMaxHead) fail("head sizes above " + std::to_string(kMaxHead) + " are not supported");
    const double scale = c.scale > 0 ? c.scale : 1.0 / std::sqrt(static_cast<double>(p.e));
    // sqrt(scale) in T, as the reference multiplies Q and K by it
    const float sq = static_cast<float>(std::sqrt(scale));
    p.sqrtScale = type_ == DataType::kHALF ? halfToFloat(floatToHalf(sq)) : type_ == DataType::kBF16 ? bf16ToFloat(floatToBf16(sq)) : sq;
    p.softcap = static_cast<float>(c.softcap);
    p.prec = static_cast<int>(c.softmaxPrecision != 0 ? c.softmaxPrecision : 1);
    p.qkMode = static_cast<int>(c.qkMode);
    p.leftWindow = c.leftWindow, p.rightWindow = c.rightWindow;
    if (l.present(kAttentionMask)) {
      const cuda::MaskLayout m = cuda::maskLayout(l.inputs[kAttentionMask].dims);
      p.maskKind = cuda::flashMaskOf(l.inputs[kAttentionMask].type);
      p.maskLen = m.len;
      p.maskStrideQ = m.strideQ, p.maskStrideH = m.strideH, p.maskStrideB = m.strideB;
      p.maskPeriodB = c.maskPeriod;
    }
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    GeneralParams p = cuda::paramsOf<GeneralParams>(state);
    cudaStream_t stream = cuda::streamOf(io);
    auto in = [&](size_t i) -> const void* { return i < io.in.size() ? io.in[i].data : nullptr; };
    auto out = [&](size_t i) -> void* { return i < io.out.size() ? io.out[i].data : nullptr; };
    p.q = in(kAttentionQ), p.k = in(kAttentionK), p.v = in(kAttentionV);
    p.mask = p.maskKind != cuda::FlashMask::kNone ? in(kAttentionMask) : nullptr;
    if (!p.mask) p.maskKind = cuda::FlashMask::kNone;
    p.pastK = in(kAttentionPastKey), p.pastV = in(kAttentionPastValue);
    p.nonpad = static_cast<const int64_t*>(in(kAttentionNonpad));
    p.y = out(0), p.presentK = out(1), p.presentV = out(2), p.qk = out(3);
    const int64_t rows = p.batch * p.qHeads * p.qSeq;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      if (p.presentK && p.batch * p.kvHeads * p.total * p.e > 0) {
        const int64_t n = p.batch * p.kvHeads * p.total * p.e;
        presentKernel<T><<<cuda::gridFor(n), 256, 0, stream>>>(p, p.pastK, p.k, static_cast<T*>(p.presentK), p.e, n);
      }
      if (p.presentV && p.batch * p.kvHeads * p.total * p.ev > 0) {
        const int64_t n = p.batch * p.kvHeads * p.total * p.ev;
        presentKernel<T><<<cuda::gridFor(n), 256, 0, stream>>>(p, p.pastV, p.v, static_cast<T*>(p.presentV), p.ev, n);
      }
      if (rows > 0) {
        const unsigned grid = static_cast<unsigned>(std::min<int64_t>(rows, int64_t(1) << 20));
        attentionGeneralKernel<T><<<grid, kThreads, smemBytes(p.e, p.total), stream>>>(p, rows);
      }
    };
    cuda::dispatchCudaType<kFloatTypes>(type_, run, "attention_general");
    KILN_CUDA_CHECK_LAUNCH();
  }

 private:
  template <typename K>
  static void setSmem(K kernel, int bytes) {
    KILN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }
  DataType type_;
};

}  // namespace

namespace cuda {
KernelFactory generalAttentionCuda() {
  return {supportsGeneral, [](const LayerDesc& l) -> std::unique_ptr<Kernel> { return std::make_unique<GeneralKernel>(l); }};
}
}  // namespace cuda

}  // namespace kiln
