// CUDA tactic "cuda_sequence" for RNN, GRU and LSTM (float32; the builder computes float16/
// bfloat16 layers in float32 around it), with every attribute the reference supports: direction,
// activations with alpha/beta, clip, input_forget, linear_before_reset, layout 0/1, B,
// sequence_lens (read on the device), initial_h/initial_c, peepholes, and the Y/Y_h/Y_c outputs.
//
// One thread block runs one (direction, batch entry) sequence from start to end: per step its
// threads compute the gate pre-activations (rows of x W^T and h R^T) in parallel, synchronize,
// then update the state elementwise. The per-sequence state lives in the workspace (global
// memory, L2-resident), so hidden sizes are not limited by shared memory. Recurrent layers are
// rare in the benchmark models; this is exact and simple, not tuned.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "ops/recurrent.h"

namespace kiln {

namespace {

enum CellKind : int { kRnn = 0, kGru = 1, kLstm = 2 };
enum Act : int { kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu, kSoftsign, kSoftplus };
static_assert(static_cast<int>(RecAct::kRelu) == kRelu && static_cast<int>(RecAct::kAffine) == kAffine &&
                  static_cast<int>(RecAct::kHardSigmoid) == kHardSigmoid && static_cast<int>(RecAct::kSoftplus) == kSoftplus,
              "Act mirrors RecAct (ops/recurrent.h)");

struct ActParam {
  int kind = kTanh;
  float alpha = 0, beta = 0;
};

constexpr int kMaxActs = 6;  // 3 per direction, 2 directions

struct RecParams {
  int cell = kRnn;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1, gates = 1, layout = 0;
  bool reverse = false, inputForget = false, linearBeforeReset = false;
  float clip = 0;  // 0: none
  int actsPerDir = 1;
  ActParam acts[kMaxActs];
  int seqLensType = 0;  // 0: none, 32 or 64
};

__device__ __forceinline__ float act(const ActParam& a, float x) {
  switch (a.kind) {
    case kRelu: return x > 0 ? x : 0.f;
    case kTanh: return tanhf(x);
    case kSigmoid: return 1.f / (1.f + expf(-x));
    case kAffine: return a.alpha * x + a.beta;
    case kLeakyRelu: return x >= 0 ? x : a.alpha * x;
    case kThresholdedRelu: return x > a.alpha ? x : 0.f;
    case kScaledTanh: return a.alpha * tanhf(a.beta * x);
    case kHardSigmoid: return fminf(fmaxf(a.alpha * x + a.beta, 0.f), 1.f);
    case kElu: return x >= 0 ? x : a.alpha * (expf(x) - 1.f);
    case kSoftsign: return x / (1.f + fabsf(x));
    case kSoftplus: return x > 30.f ? x : log1pf(expf(x));
  }
  return x;
}

__device__ __forceinline__ float clipv(const RecParams& p, float v) { return p.clip > 0 ? fminf(fmaxf(v, -p.clip), p.clip) : v; }

__device__ __forceinline__ int64_t xOff(const RecParams& p, int64_t t, int64_t b) {
  return (p.layout == 0 ? t * p.batch + b : b * p.seq + t) * p.input;
}
__device__ __forceinline__ int64_t yOff(const RecParams& p, int64_t t, int64_t d, int64_t b) {
  return (p.layout == 0 ? (t * p.dirs + d) * p.batch + b : (b * p.seq + t) * p.dirs + d) * p.hidden;
}
__device__ __forceinline__ int64_t stateOff(const RecParams& p, int64_t d, int64_t b) {
  return (p.layout == 0 ? d * p.batch + b : b * p.dirs + d) * p.hidden;
}

//! Block (d, b): workspace per sequence = h, c, hNew [H each] + pre, rh [GH each] floats.
__global__ void recurrentKernel(RecParams p, const float* __restrict__ x, const float* __restrict__ W,
                                const float* __restrict__ R, const float* __restrict__ B, const void* __restrict__ seqLens,
                                const float* __restrict__ h0, const float* __restrict__ c0, const float* __restrict__ P,
                                float* __restrict__ y, float* __restrict__ yh, float* __restrict__ yc, float* __restrict__ work) {
  const int64_t d = blockIdx.x / p.batch, b = blockIdx.x % p.batch;
  const int64_t H = p.hidden, I = p.input, GH = p.gates * H;
  float* h = work + blockIdx.x * (3 * H + 2 * GH);
  float* c = h + H;
  float* hNew = c + H;
  float* pre = hNew + H;
  float* rh = pre + GH;
  const float* w = W + d * GH * I;
  const float* r = R + d * GH * H;
  const float* wb = B ? B + d * 2 * GH : nullptr;
  const float* rb = B ? wb + GH : nullptr;
  const float* peep = P ? P + d * 3 * H : nullptr;
  const ActParam* a = p.acts + d * p.actsPerDir;
  const bool backward = p.reverse || d == 1;
  int64_t len = p.seq;
  if (p.seqLensType == 32) len = static_cast<const int32_t*>(seqLens)[b];
  else if (p.seqLensType == 64) len = static_cast<const int64_t*>(seqLens)[b];
  len = len < 0 ? 0 : (len > p.seq ? p.seq : len);  // the reference rejects these on the host
  const int64_t so = stateOff(p, d, b);
  for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
    h[j] = h0 ? h0[so + j] : 0.f;
    c[j] = c0 ? c0[so + j] : 0.f;
  }
  __syncthreads();
  for (int64_t k = 0; k < len; ++k) {
    const int64_t t = backward ? len - 1 - k : k;
    const float* xt = x + xOff(p, t, b);
    for (int64_t row = threadIdx.x; row < GH; row += blockDim.x) {
      float acc = wb ? wb[row] : 0.f;
      for (int64_t i = 0; i < I; ++i) acc += w[row * I + i] * xt[i];
      float rec = rb ? rb[row] : 0.f;
      for (int64_t q = 0; q < H; ++q) rec += r[row * H + q] * h[q];
      pre[row] = acc;
      rh[row] = rec;
    }
    __syncthreads();
    if (p.cell == kRnn) {
      for (int64_t j = threadIdx.x; j < H; j += blockDim.x) hNew[j] = act(a[0], clipv(p, pre[j] + rh[j]));
    } else if (p.cell == kGru) {
      for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
        c[j] = act(a[0], clipv(p, pre[j] + rh[j]));                   // z (c is free in a GRU)
        pre[H + j] = act(a[0], clipv(p, pre[H + j] + rh[H + j]));     // r
      }
      __syncthreads();
      for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
        float cand;
        if (p.linearBeforeReset) {
          cand = pre[2 * H + j] + pre[H + j] * rh[2 * H + j];
        } else {
          float acc = rb ? rb[2 * H + j] : 0.f;
          for (int64_t q = 0; q < H; ++q) acc += r[(2 * H + j) * H + q] * (pre[H + q] * h[q]);
          cand = pre[2 * H + j] + acc;
        }
        const float hh = act(a[1], clipv(p, cand));
        hNew[j] = (1.f - c[j]) * hh + c[j] * h[j];
      }
    } else {
      for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
        const float cPrev = c[j];
        const float pi = peep ? peep[j] : 0.f, po = peep ? peep[H + j] : 0.f, pf = peep ? peep[2 * H + j] : 0.f;
        const float ig = act(a[0], clipv(p, pre[j] + rh[j] + pi * cPrev));
        const float fg = p.inputForget ? 1.f - ig : act(a[0], clipv(p, pre[2 * H + j] + rh[2 * H + j] + pf * cPrev));
        const float cand = act(a[1], clipv(p, pre[3 * H + j] + rh[3 * H + j]));
        const float cNew = fg * cPrev + ig * cand;
        const float og = act(a[0], clipv(p, pre[H + j] + rh[H + j] + po * cNew));
        c[j] = cNew;
        hNew[j] = og * act(a[2], cNew);
      }
    }
    __syncthreads();
    for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
      h[j] = hNew[j];
      if (y) y[yOff(p, t, d, b) + j] = hNew[j];
    }
    __syncthreads();
  }
  for (int64_t j = threadIdx.x; j < H; j += blockDim.x) {
    if (yh) yh[so + j] = len > 0 ? h[j] : 0.f;
    if (yc) yc[so + j] = len > 0 ? c[j] : 0.f;
  }
}

//! The attributes as kernel parameters (shapes filled in by reshape), parsed and validated by
//! the reference's parseRecurrentConfig.
RecParams configOf(const LayerDesc& l) {
  const RecurrentConfig c = parseRecurrentConfig(l);
  if (c.acts.size() > static_cast<size_t>(kMaxActs)) throw Error("CUDA recurrent: too many activation functions");
  RecParams p;
  p.cell = c.cell == Cell::kRnn ? kRnn : (c.cell == Cell::kGru ? kGru : kLstm);
  p.gates = c.gates;
  p.actsPerDir = static_cast<int>(c.acts.size() / static_cast<size_t>(c.dirs));
  p.dirs = c.dirs;
  p.reverse = c.reverse;
  p.layout = c.layout;
  p.clip = static_cast<float>(c.clip);
  p.inputForget = c.inputForget;
  p.linearBeforeReset = c.linearBeforeReset;
  for (size_t k = 0; k < c.acts.size(); ++k)  // RecAct's order is the kernel's Act order
    p.acts[k] = ActParam{static_cast<int>(c.acts[k].kind), static_cast<float>(c.acts[k].alpha), static_cast<float>(c.acts[k].beta)};
  return p;
}

constexpr size_t kB = 3, kSeqLens = 4, kInitialH = 5, kInitialC = 6, kP = 7;

class RecurrentKernel : public Kernel {
 public:
  explicit RecurrentKernel(const LayerDesc& l) : cfg_(configOf(l)) {}
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    RecParams& p = cuda::makeState<RecParams>(state);
    p = cfg_;
    const Dims& x = l.inputs[0].dims;
    p.seq = p.layout == 0 ? x[0] : x[1];
    p.batch = p.layout == 0 ? x[1] : x[0];
    p.input = x[2];
    p.hidden = l.inputs[2].dims[2];
    p.seqLensType = !l.present(kSeqLens) ? 0 : (l.inputs[kSeqLens].type == DataType::kINT32 ? 32 : 64);
    const size_t perSeq = static_cast<size_t>(3 * p.hidden + 2 * p.gates * p.hidden);
    return perSeq * static_cast<size_t>(p.dirs * p.batch) * sizeof(float);
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const RecParams& p = cuda::paramsOf<RecParams>(state);
    cudaStream_t stream = cuda::streamOf(io);
    auto in = [&](size_t i) -> const float* { return io.in.size() > i && io.in[i].data ? io.in[i].as<const float>() : nullptr; };
    auto out = [&](size_t i) -> float* { return io.out.size() > i && io.out[i].data ? io.out[i].as<float>() : nullptr; };
    float* y = out(0);
    if (y && io.out[0].count) KILN_CUDA_CHECK(cudaMemsetAsync(y, 0, static_cast<size_t>(io.out[0].count) * sizeof(float), stream));
    const int64_t blocks = p.dirs * p.batch;
    if (blocks == 0 || p.hidden == 0) return;
    const void* lens = io.in.size() > kSeqLens ? io.in[kSeqLens].data : nullptr;
    recurrentKernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
        p, in(0), in(1), in(2), in(kB), lens, in(kInitialH), p.cell == kLstm ? in(kInitialC) : nullptr,
        p.cell == kLstm ? in(kP) : nullptr, y, out(1), p.cell == kLstm ? out(2) : nullptr, static_cast<float*>(io.workspace));
    KILN_CUDA_CHECK_LAUNCH();
  }

 private:
  RecParams cfg_;
};

bool supportsRecurrent(const LayerDesc& l) {
  if (l.inputs.size() < 3 || l.inputs[0].type != DataType::kFLOAT) return false;
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (l.present(i) && i != kSeqLens && l.inputs[i].type != DataType::kFLOAT) return false;
  try {
    (void)configOf(l);
  } catch (const Error&) {
    return false;
  }
  return true;
}

std::unique_ptr<Kernel> createRecurrent(const LayerDesc& l) { return std::make_unique<RecurrentKernel>(l); }

}  // namespace

namespace cuda {
KernelFactory recurrentCuda() { return {supportsRecurrent, createRecurrent}; }  // RNN, GRU, LSTM
}  // namespace cuda

}  // namespace kiln
