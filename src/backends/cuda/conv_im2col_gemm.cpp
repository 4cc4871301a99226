// "conv_half_cublaslt_im2col_0" / "_1": a float16/bfloat16 NC(D)HW convolution with a large kernel
// (>= 32 taps), grouped or not, as im2col + one strided-batched cuBLASLt GEMM per image, batched
// over the groups: Y[n][g] [Cout/G, P] = W[g] [Cout/G, Cin/G * taps] @ col[n][g] [Cin/G * taps, P].
// wav2vec2 / HuBERT / WavLM's positional conv (Conv1d 768 -> 768, kernel 128, 16 groups, over
// ~50 frames) ran cuDNN's engines at 5 TFLOP/s: 1.45 ms of the model's 3.3 ms at batch 16 on the
// H100. The columns of a chunk of images (at most kMaxColBytes) sit in the workspace; bias,
// residual and activation in the conv epilogue kernel after the GEMMs. The i-th tactic uses
// cuBLASLt's i-th heuristic candidate.
#include "backends/cuda/conv_cuda_common.h"
#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/matmul_cublaslt.h"
#include "backends/cuda/matmul_lt_run.h"
#include "ops/conv_geometry.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"

namespace kiln {

namespace {

constexpr int64_t kMinTaps = 32;                    // smaller kernels: cuDNN's implicit GEMM does well
constexpr int64_t kMaxColBytes = int64_t(64) << 20;  // a chunk's columns in the workspace
constexpr int64_t kMaxImageColBytes = int64_t(256) << 20;

bool supportsIm2colGemm(const LayerDesc& l) {
  if (l.op != "Conv" || l.inputs.size() < 2 || !l.present(0) || !l.present(1) || l.outputs.size() != 1) return false;
  if (!cuda::convFloatTypes(l) || !isHalfType(l.inputs[0].type) || !hasPlainLayouts(l) || !cuda::knownActivation(l)) return false;
  if (!l.inputs[1].value.valid() || (l.present(2) && !l.inputs[2].value.valid())) return false;
  const Dims &x = l.inputs[0].dims, &w = l.inputs[1].dims;
  if (w.size() < 3 || w.size() > 5 || x.size() != w.size() || x[1] <= 0) return false;
  int64_t taps = 1;
  for (size_t k = 2; k < w.size(); ++k) taps *= w[k];
  if (taps < kMinTaps) return false;
  // One image's columns must fit the per-image limit at every shape the engine may run: the
  // spatial dims known (a dynamic batch is fine, a dynamic length is left to cuDNN).
  for (size_t k = 2; k < x.size(); ++k)
    if (x[k] <= 0) return false;
  try {
    const Window win = convWindow(l, x, std::vector<int64_t>(w.begin() + 2, w.end()));
    int64_t outVol = 1;
    for (int64_t o : win.out) outVol *= o;
    const int64_t bytes = x[1] * taps * outVol * static_cast<int64_t>(elementSize(l.inputs[0].type));
    return outVol > 0 && bytes <= kMaxImageColBytes;
  } catch (const Error&) {
    return false;
  }
}

struct Im2colState : KernelState {
  cuda::Im2colGeometry geo;
  int64_t images = 0, outChannels = 0, outVol = 0, colPerImage = 0, chunk = 1;
  size_t colBytes = 0;
  std::unique_ptr<cuda::AlignedLtPlans> plans;  //!< images after the first may start at offsets not 16-byte aligned
};

class Im2colGemmKernel : public Kernel {
 public:
  Im2colGemmKernel(const LayerDesc& l, int algoIndex)
      : algoIndex_(algoIndex),
        weights_(l.inputs[1].value),  // [Cout, Cin/G, taps] = [G][M, K] row-major
        bias_(l.present(2) ? l.inputs[2].value : HostTensor()),
        act_(cuda::toDevAct(fusedActivation(*l.attrs))) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const ConvProblem cp = resolveConv(l);
    auto s = std::make_unique<Im2colState>();
    s->images = cp.batch;
    s->outChannels = cp.outChannels;
    s->geo.channels = cp.inChannels;
    for (int a = 0; a < 3; ++a) {
      s->geo.in[a] = cp.win.in[a];
      s->geo.out[a] = cp.win.out[a];
      s->geo.kernel[a] = cp.win.kernel[a];
      s->geo.stride[a] = cp.win.stride[a];
      s->geo.dilation[a] = cp.win.dilation[a];
      s->geo.pad[a] = cp.win.padBegin[a];
    }
    s->outVol = cp.win.outSize();
    const int64_t K = cp.inChannelsPerGroup() * cp.win.kernelSize(), M = cp.outChannelsPerGroup(), N = s->outVol;
    const int64_t es = static_cast<int64_t>(elementSize(l.inputs[0].type));
    s->colPerImage = cp.inChannels * cp.win.kernelSize() * N;
    const int64_t imageBytes = s->colPerImage * es;
    if (imageBytes > kMaxImageColBytes)  // supportsIm2colGemm checked the spatial dims: not reached
      throw UnsupportedError("conv im2col GEMM: one image's columns (" + std::to_string(imageBytes >> 20) + " MiB) exceed the limit");
    s->chunk = std::max<int64_t>(1, std::min<int64_t>(s->images, kMaxColBytes / std::max<int64_t>(imageBytes, 1)));
    s->colBytes = static_cast<size_t>(cuda::roundUp(s->chunk * imageBytes, cuda::kWorkspaceAlign));
    size_t planWs = 0;
    if (s->images > 0 && M > 0 && N > 0 && K > 0) {
      cuda::GemmProblem g;
      g.type = l.inputs[0].type;
      g.M = M;
      g.N = N;
      g.K = K;
      g.batch = cp.group;
      g.strideA = M * K;
      g.strideB = K * N;
      g.strideD = M * N;
      s->plans = std::make_unique<cuda::AlignedLtPlans>(g, algoIndex_, cuda::kLtMaxWorkspace);
      planWs = s->plans->workspace();
    }
    const size_t ws = s->colBytes + planWs;
    state = std::move(s);
    return ws;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    auto* s = static_cast<Im2colState*>(state);
    if (!s->plans) return;
    cudaStream_t stream = cuda::streamOf(io);
    const DataType type = io.in[0].type;
    const int64_t es = static_cast<int64_t>(elementSize(type));
    auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    if (!aligned(io.workspace)) throw Error("conv im2col GEMM: the workspace must be 16-byte aligned");
    char* col = static_cast<char*>(io.workspace);
    char* planWs = col + s->colBytes;
    const char* x = static_cast<const char*>(io.in[0].data);
    char* y = static_cast<char*>(io.out[0].data);
    const int64_t inPerImage = s->geo.channels * s->geo.in[0] * s->geo.in[1] * s->geo.in[2];
    const int64_t outPerImage = s->outChannels * s->outVol;
    const void* w = weights_.orInput(io, 1);
    for (int64_t n0 = 0; n0 < s->images; n0 += s->chunk) {
      const int64_t count = std::min(s->chunk, s->images - n0);
      cuda::launchIm2col(type, x + n0 * inPerImage * es, col, s->geo, count, stream);
      for (int64_t j = 0; j < count; ++j) {
        const char* b = col + j * s->colPerImage * es;
        char* d = y + (n0 + j) * outPerImage * es;
        s->plans->run(w, b, d, planWs, stream, "conv im2col GEMM");
      }
    }
    const void* bias = bias_.orInput(io, 2);
    const void* res = io.in.size() > 3 ? io.in[3].data : nullptr;
    if (bias || res || act_.kind != static_cast<int>(ActKind::kNone))
      cuda::launchConvEpilogue(type, y, bias, res, s->images * s->outChannels, s->outChannels, s->outVol, act_, stream);
  }

  bool holdsInput(size_t i) const override { return (i == 1 && weights_.get()) || (i == 2 && bias_.get()); }

 private:
  int algoIndex_;
  cuda::DeviceConstant weights_, bias_;
  cuda::DevAct act_;
};

template <int I>
std::unique_ptr<Kernel> createIm2colGemm(const LayerDesc& l) {
  return std::make_unique<Im2colGemmKernel>(l, I);
}

}  // namespace

namespace cuda {
KernelFactory im2colGemmConv(int algo) {
  static constexpr KernelFactory kByAlgo[] = {{supportsIm2colGemm, createIm2colGemm<0>}, {supportsIm2colGemm, createIm2colGemm<1>}};
  return kByAlgo[algo];
}
}  // namespace cuda

}  // namespace kiln
