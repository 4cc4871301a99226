// "conv_half_cublaslt_1x1_0" .. "_2": a 1x1 convolution (stride 1, no padding, group 1) on channels-last
// float16/bfloat16 tensors is one GEMM, Y[N*H*W, K] = X[N*H*W, C] @ W[K, C]^T, run through the
// cuBLASLt matmul path (matmul_lt_run.h) with bias (+ ReLU) fused in its epilogue, a residual as
// its C matrix, and other activations (MobileNetV2's ReLU6) in the post pass. cuDNN picks slow
// engines for some of these memory-bound pointwise convolutions (C or K small, large N*H*W); the
// builder times both and keeps the faster. The i-th tactic uses cuBLASLt's i-th heuristic candidate.
// "conv_half_cublaslt_patch_0" .. "_1": a convolution whose square kernel equals its stride (no padding,
// dilation or groups) on NCHW float16/bfloat16: ViT's patch embedding (P = 16, C = 3) and every
// NCHW 1x1 convolution (P = 1). The patches are copied out as rows (a permutation of X,
// conv_pad.cu; for P = 1 X[n] is read in place as [C, H*W]), then per image Y[n] = W[K, C*P*P] @
// rows[n]^T is one strided-batched cuBLASLt GEMM writing NCHW; bias, residual and activation in
// the conv epilogue kernel. cuDNN runs the patch embedding at a small fraction of the tensor
// cores' rate, and its NCHW engines took 0.17 ms for MobileNetV2's last 1x1 conv at batch 1 on
// the H200 (a 0.2 GFLOP GEMM).
// "conv_half_cublaslt_patch_nhwc_0" .. "_1": the same patch convolution (P > 1) from an NCHW X to a
// channels-last Y, which the layout planner asks for when the token view after the stem is then
// free (ViT / DeiT / Mixer / Swin / ConvNeXt stems): Y's pixels are the rows, so the whole
// layer is one GEMM with cuBLASLt's bias epilogue. cuDNN's channel-padded NHWC engine took 0.26 ms
// for ViT-B/16's stem at batch 32 on the H100 (28 TFLOP/s).
#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/conv_cuda_common.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/matmul_cublaslt.h"
#include "backends/cuda/matmul_lt_run.h"
#include "ops/activation.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"

namespace kiln {

namespace {

//! A Conv with one output and float16/bfloat16 operands of one type.
bool halfConv(const LayerDesc& l) {
  if (l.op != "Conv" || l.inputs.size() < 2 || !l.present(0) || !l.present(1) || l.outputs.size() != 1) return false;
  const DataType t = l.inputs[0].type;
  if (t != DataType::kHALF && t != DataType::kBF16) return false;
  for (size_t i = 1; i < l.inputs.size(); ++i)
    if (l.present(i) && l.inputs[i].type != t) return false;
  return true;
}

//! A 1x1 conv (stride 1, no padding, group 1, constant weights) on float16/bfloat16 4-D tensors:
//! one GEMM over the pixels, whatever the layouts when the images are 1x1 (then NCHW and NHWC
//! hold the same bytes).
bool gemm1x1Geometry(const LayerDesc& l) {
  if (!halfConv(l)) return false;
  const Dims &x = l.inputs[0].dims, &w = l.inputs[1].dims;
  if (x.size() != 4 || w.size() != 4 || w[2] != 1 || w[3] != 1 || w[1] != x[1] || !l.inputs[1].value.valid()) return false;
  if (l.present(2) && !l.inputs[2].value.valid()) return false;
  const Attributes& a = *l.attrs;
  if (a.getInt("group", 1) != 1) return false;
  for (int64_t v : a.getInts("strides", {1, 1}))
    if (v != 1) return false;
  for (int64_t v : a.getInts("pads", {0, 0, 0, 0}))
    if (v != 0) return false;
  const std::string pad = a.getString("auto_pad", "NOTSET");
  if (pad != "NOTSET" && pad != "VALID") return false;
  if (!cuda::knownActivation(l)) return false;
  return true;
}

bool supportsGemm1x1(const LayerDesc& l) {
  if (!gemm1x1Geometry(l)) return false;
  if (inLayoutBlock(l) == kNhwcBlock && outLayoutBlock(l) == kNhwcBlock) return true;
  const Dims& x = l.inputs[0].dims;
  return x[2] == 1 && x[3] == 1;  // 1x1 images: any layouts (squeeze-excitation FCs)
}

//! The conv as one GEMM whose rows are Y's pixels (channels-last Y): Y[M, N] = rows[M, K] @ W[N, K]^T
//! with the bias in cuBLASLt's epilogue, a residual (laid out like Y) as its C and the fused activation.
cuda::GemmSetup pixelRowsGemm(const LayerDesc& l, int64_t M, int64_t K) {
  cuda::GemmSetup s;
  s.prob.type = l.inputs[0].type;
  s.prob.M = M;
  s.prob.K = K;
  s.prob.N = l.inputs[1].dims[0];
  s.prob.transB = true;
  s.outDims = {s.prob.M, s.prob.N};
  s.empty = s.prob.M == 0 || s.prob.N == 0;
  s.zeroK = s.prob.K == 0;
  if (l.present(2)) s.rowBias = 2, s.rowBiasDims = {s.prob.N};
  if (l.inputs.size() > 3 && l.present(3)) s.fullC = 3, s.prob.beta = 1.f;  // the residual, laid out like Y
  s.act = fusedActivation(*l.attrs);
  if (!s.empty && !s.zeroK) s.calls.push_back({});
  return s;
}

class Gemm1x1Kernel : public Kernel {
 public:
  Gemm1x1Kernel(const LayerDesc& l, int algoIndex)
      : algoIndex_(algoIndex),
        // [K, C, 1, 1] is already [N, K] in GEMM terms (K contiguous): copied as it is.
        weights_(l.inputs[1].value, 1, l.inputs[1].dims[1], l.inputs[1].dims[0], true) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    cuda::GemmSetup s = pixelRowsGemm(l, volume(Dims{x[0], x[2], x[3]}), x[1]);
    size_t ws = 0;
    state = cuda::buildLtState(std::move(s), algoIndex_, ws);
    return ws;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    cuda::runLtState(*static_cast<cuda::LtState*>(state), io, weights_.data());
  }
  bool holdsInput(size_t i) const override { return i == 1 && weights_.data(); }

 private:
  int algoIndex_;
  cuda::DeviceWeights weights_;
};

//! A conv whose square kernel equals its stride (no padding, dilation or groups) on an image of
//! whole patches, with constant weights (and bias).
bool patchGeometry(const LayerDesc& l) {
  if (!halfConv(l) || !cuda::knownActivation(l)) return false;
  const Dims &x = l.inputs[0].dims, &w = l.inputs[1].dims;
  if (x.size() != 4 || w.size() != 4 || w[1] != x[1] || w[2] != w[3] || w[2] < 1 || !l.inputs[1].value.valid()) return false;
  if (l.present(2) && !l.inputs[2].value.valid()) return false;
  const int64_t p = w[2];
  if (x[2] <= 0 || x[3] <= 0 || x[2] % p || x[3] % p) return false;
  const Attributes& a = *l.attrs;
  if (a.getInt("group", 1) != 1 || a.getInts("strides", {1, 1}) != std::vector<int64_t>{p, p}) return false;
  for (int64_t v : a.getInts("pads", {0, 0, 0, 0}))
    if (v != 0) return false;
  for (int64_t v : a.getInts("dilations", {1, 1}))
    if (v != 1) return false;
  const std::string pad = a.getString("auto_pad", "NOTSET");
  return pad == "NOTSET" || pad == "VALID";
}

bool supportsPatchGemm(const LayerDesc& l) { return hasPlainLayouts(l) && patchGeometry(l); }

//! NCHW X, channels-last Y, P > 1: the stem of a channels-last net (ViT / DeiT / Mixer at the
//! throughput batch, Swin's and ConvNeXt's 4x4 stems), whose Y the layout planner keeps nhwc
//! because the token view after it is then free.
bool supportsPatchGemmNhwc(const LayerDesc& l) {
  return inLayoutBlock(l) == 1 && outLayoutBlock(l) == kNhwcBlock && patchGeometry(l) && l.inputs[1].dims[2] > 1;
}

struct PatchState : KernelState {
  std::unique_ptr<cuda::AlignedLtPlans> plans;  //!< element-aligned too: an X (P = 1) or Y not 16-byte aligned
  int64_t n = 0, c = 0, h = 0, w = 0, p = 0, k = 0, patches = 0;
  size_t rowsBytes = 0;
};

class PatchGemmKernel : public Kernel {
 public:
  PatchGemmKernel(const LayerDesc& l, int algoIndex)
      : algoIndex_(algoIndex),
        weights_(l.inputs[1].value),  // [K, C, P, P] = [M, K] row-major in GEMM terms
        bias_(l.present(2) ? l.inputs[2].value : HostTensor()),
        act_(cuda::toDevAct(fusedActivation(*l.attrs))) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims &x = l.inputs[0].dims, &w = l.inputs[1].dims;
    auto s = std::make_unique<PatchState>();
    s->n = x[0], s->c = x[1], s->h = x[2], s->w = x[3], s->p = w[2], s->k = w[0];
    s->patches = (s->h / s->p) * (s->w / s->p);
    const int64_t cpp = volume(Dims{s->c, s->p, s->p});
    const int64_t es = static_cast<int64_t>(elementSize(l.inputs[0].type));
    // P = 1: X[n] itself is [C, H*W] = [K, N] in GEMM terms, no copy.
    if (s->p > 1) s->rowsBytes = static_cast<size_t>(cuda::roundUp(volume(Dims{s->n, s->patches, cpp, es}), cuda::kWorkspaceAlign));
    cuda::GemmProblem g;
    g.type = l.inputs[0].type;
    g.M = s->k;
    g.N = s->patches;
    g.K = cpp;
    g.transB = s->p > 1;  // rows[n] is [patches, C*P*P] = [N, K]
    g.batch = s->n;
    g.strideA = 0;  // one W for every image
    g.strideB = volume(Dims{s->patches, cpp});
    g.strideD = volume(Dims{s->k, s->patches});
    size_t planWs = 0;
    if (volume(x) > 0 && s->k > 0) {
      // Not routed through buildLtState because A here is the weights and B the input, and the
      // per-channel bias runs along M, which cuBLASLt's bias epilogue cannot add.
      s->plans = std::make_unique<cuda::AlignedLtPlans>(g, algoIndex_, cuda::kLtMaxWorkspace);
      planWs = s->plans->workspace();
    }
    const size_t ws = s->rowsBytes + planWs;
    state = std::move(s);
    return ws;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    auto* s = static_cast<PatchState*>(state);
    if (!s->plans) return;
    cudaStream_t stream = cuda::streamOf(io);
    const DataType type = io.in[0].type;
    auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
    if (!aligned(io.workspace)) throw Error("patch_gemm: the workspace must be 16-byte aligned");
    const void* rows = io.in[0].data;
    if (s->p > 1) {
      cuda::launchPatchesToRows(type, io.in[0].data, io.workspace, s->n, s->c, s->h, s->w, s->p, stream);
      rows = io.workspace;
    }
    char* planWs = static_cast<char*>(io.workspace) + s->rowsBytes;
    s->plans->run(weights_.orInput(io, 1), rows, io.out[0].data, planWs, stream, "patch_gemm");
    const void* bias = bias_.orInput(io, 2);
    const void* res = io.in.size() > 3 ? io.in[3].data : nullptr;
    if (bias || res || act_.kind != static_cast<int>(ActKind::kNone))
      cuda::launchConvEpilogue(type, io.out[0].data, bias, res, s->n * s->k, s->k, s->patches, act_, stream);
  }

  bool holdsInput(size_t i) const override { return (i == 1 && weights_.get()) || (i == 2 && bias_.get()); }
 private:
  int algoIndex_;
  cuda::DeviceConstant weights_, bias_;
  cuda::DevAct act_;
};

//! Y (nhwc) = rows[N*patches, C*P*P] @ W[K, C*P*P]^T: one plain GEMM whose rows are Y's pixels,
//! so bias (+ ReLU / tanh GELU) run in cuBLASLt's epilogue and a residual (laid out like Y) is its
//! C matrix, through the matmul path (matmul_lt_run.h); the rows come first in the workspace.
struct PatchNhwcState : KernelState {
  std::unique_ptr<cuda::LtState> lt;
  int64_t n = 0, c = 0, h = 0, w = 0, p = 0;
  size_t rowsBytes = 0;
};

class PatchGemmNhwcKernel : public Kernel {
 public:
  PatchGemmNhwcKernel(const LayerDesc& l, int algoIndex)
      : algoIndex_(algoIndex),
        // [K, C, P, P] is [N, K] in GEMM terms (K = C*P*P contiguous, the rows' order): copied as it is.
        weights_(l.inputs[1].value, 1, volume(Dims{l.inputs[1].dims[1], l.inputs[1].dims[2], l.inputs[1].dims[3]}),
                 l.inputs[1].dims[0], true) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims &x = l.inputs[0].dims, &w = l.inputs[1].dims;
    auto st = std::make_unique<PatchNhwcState>();
    st->n = x[0], st->c = x[1], st->h = x[2], st->w = x[3], st->p = w[2];
    const int64_t es = static_cast<int64_t>(elementSize(l.inputs[0].type));
    cuda::GemmSetup s = pixelRowsGemm(l, st->n * (st->h / st->p) * (st->w / st->p), volume(Dims{st->c, st->p, st->p}));
    st->rowsBytes = static_cast<size_t>(cuda::roundUp(volume(Dims{s.prob.M, s.prob.K, es}), cuda::kWorkspaceAlign));
    size_t ltWs = 0;
    st->lt = cuda::buildLtState(std::move(s), algoIndex_, ltWs);
    const size_t ws = st->rowsBytes + ltWs;
    state = std::move(st);
    return ws;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    auto* st = static_cast<PatchNhwcState*>(state);
    if (st->lt->setup.empty) return;
    if (!st->lt->setup.zeroK)
      cuda::launchPatchesToRows(io.in[0].type, io.in[0].data, io.workspace, st->n, st->c, st->h, st->w, st->p, cuda::streamOf(io));
    cuda::runLtState(*st->lt, io, weights_.data(), io.workspace, st->rowsBytes);
  }

  bool holdsInput(size_t i) const override { return i == 1 && weights_.data(); }

 private:
  int algoIndex_;
  cuda::DeviceWeights weights_;
};

template <int I>
std::unique_ptr<Kernel> createPatchGemmNhwc(const LayerDesc& l) {
  return std::make_unique<PatchGemmNhwcKernel>(l, I);
}

template <int I>
std::unique_ptr<Kernel> createPatchGemm(const LayerDesc& l) {
  return std::make_unique<PatchGemmKernel>(l, I);
}

template <int I>
std::unique_ptr<Kernel> createGemm1x1(const LayerDesc& l) {
  return std::make_unique<Gemm1x1Kernel>(l, I);
}

}  // namespace

namespace cuda {
bool isPixelGemmConv(const LayerDesc& l) {
  if (!gemm1x1Geometry(l)) return false;
  const Dims& x = l.inputs[0].dims;
  return x[0] != 1 && x[2] == 1 && x[3] == 1;  // a batch unknown at build time (-1) may be large
}

KernelFactory gemm1x1Conv(int algo) {
  static constexpr KernelFactory kByAlgo[] = {{supportsGemm1x1, createGemm1x1<0>}, {supportsGemm1x1, createGemm1x1<1>},
                                              {supportsGemm1x1, createGemm1x1<2>}};
  return kByAlgo[algo];
}
KernelFactory patchGemmConv(int algo) {
  static constexpr KernelFactory kByAlgo[] = {{supportsPatchGemm, createPatchGemm<0>}, {supportsPatchGemm, createPatchGemm<1>}};
  return kByAlgo[algo];
}
KernelFactory patchGemmNhwcConv(int algo) {
  static constexpr KernelFactory kByAlgo[] = {{supportsPatchGemmNhwc, createPatchGemmNhwc<0>},
                                              {supportsPatchGemmNhwc, createPatchGemmNhwc<1>}};
  return kByAlgo[algo];
}
}  // namespace cuda

}  // namespace kiln
