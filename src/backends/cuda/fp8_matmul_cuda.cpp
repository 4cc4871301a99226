// CUDA tactic for Fp8MatMul (ops/fp8_matmul.cpp: an FP8 Q/DQ MatMul / Gemm):
//   fp8_matmul_fp_cublaslt_0 .. _1: X quantized to float8e4m3fn codes in the workspace
//   (fp8_matmul_kernels.cu), then one cuBLASLt FP8 GEMM on Hopper's tensor cores, [rows, K] x
//   [N, K]^T (the "TN" layout FP8 GEMMs require; the constant codes repacked once) with FP32
//   (fast) accumulation, alpha = x_scale * w_scale, D in X's type, and the bias in cuBLASLt's epilogue
//   (float16 / bfloat16 D; a float32 D adds it in the post pass). The i-th tactic uses cuBLASLt's
//   i-th heuristic candidate. Needs K % 16 == 0 and compute capability 8.9 or newer.
#include <memory>

#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/fp8_matmul_kernels.h"
#include "backends/cuda/matmul_lt_run.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

constexpr size_t kAlign = 256;

bool deviceHasFp8() {
  static const bool has = [] {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    return major * 10 + minor >= 89;
  }();
  return has;
}

bool supportsFp8MatMul(const LayerDesc& l) {
  if (l.inputs.size() < 2 || l.inputs.size() > 3 || !l.present(0) || !l.present(1)) return false;
  const TensorDesc &x = l.inputs[0], &w = l.inputs[1];
  if (x.type != DataType::kFLOAT && x.type != DataType::kHALF && x.type != DataType::kBF16) return false;
  if (w.type != DataType::kFP8E4M3FN || w.dims.size() != 2 || !w.value.valid() || !isStatic(w.dims)) return false;
  if (w.dims[0] % 16 != 0 || w.dims[0] == 0 || w.dims[1] == 0 || x.dims.size() < 2) return false;
  if (l.present(2) && (l.inputs[2].type != x.type || !l.inputs[2].value.valid())) return false;
  return deviceHasFp8();
}

struct Fp8State : KernelState {
  std::unique_ptr<cuda::LtState> lt;
  int64_t count = 0;  //!< X's elements
  size_t codesBytes = 0;
};

class Fp8MatMulCuda : public Kernel {
 public:
  Fp8MatMulCuda(const LayerDesc& l, int algoIndex)
      : algoIndex_(algoIndex),
        type_(l.inputs[0].type),
        K_(l.inputs[1].dims[0]),
        N_(l.inputs[1].dims[1]),
        alpha_(l.attrs->getFloat("x_scale", 1.f) * l.attrs->getFloat("w_scale", 1.f)),
        xScale_(l.attrs->getFloat("x_scale", 1.f)),
        // [K, N] codes -> [N, K] (K contiguous), shared with every tactic of the layer.
        weights_(l.inputs[1].value, 1, K_, N_, false) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    if (x.back() != K_) opError(l, "X " + toString(x) + " does not fit the constant weights [" + std::to_string(K_) + ", " + std::to_string(N_) + "]");
    auto st = std::make_unique<Fp8State>();
    st->count = volume(x);
    st->codesBytes = (static_cast<size_t>(st->count) + kAlign - 1) / kAlign * kAlign;
    cuda::GemmSetup s;
    s.prob.type = type_;
    s.prob.fp8 = true;
    s.prob.M = st->count / K_;
    s.prob.K = K_;
    s.prob.N = N_;
    s.prob.transB = true;
    s.prob.alpha = alpha_;
    s.outDims = l.outputs[0].dims;
    s.empty = s.prob.M == 0;
    if (l.present(2)) {
      // A 16-bit D takes the bias in cuBLASLt's epilogue; FP8 GEMMs with a float32 D want a
      // bfloat16 bias there, so that one is added in the post pass (at float32).
      if (type_ == DataType::kFLOAT) s.addend = 2, s.addendDims = {N_}, s.addScale = 1.f;
      else s.rowBias = 2, s.rowBiasDims = {N_};
    }
    if (!s.empty) s.calls.push_back({});
    size_t ltWs = 0;
    st->lt = cuda::buildLtState(std::move(s), algoIndex_, ltWs);  // UnsupportedError: no FP8 algorithm
    const size_t ws = st->codesBytes + ltWs;
    state = std::move(st);
    return ws;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    auto* st = static_cast<Fp8State*>(state);
    if (st->lt->setup.empty) return;
    cuda::launchQuantizeE4M3(type_, io.in[0].data, st->count, xScale_, io.workspace, cuda::streamOf(io));
    cuda::runLtState(*st->lt, io, weights_.data(), io.workspace, st->codesBytes);
  }

  bool holdsInput(size_t i) const override { return i == 1 && weights_.data(); }  // the bias comes as io.in[2]

 private:
  int algoIndex_;
  DataType type_;
  int64_t K_, N_;
  float alpha_, xScale_;
  cuda::DeviceWeights weights_;
};

template <int I>
std::unique_ptr<Kernel> createFp8MatMul(const LayerDesc& l) {
  return std::make_unique<Fp8MatMulCuda>(l, I);
}

}  // namespace

namespace cuda {
KernelFactory fp8MatMulCublasLt(int algo) {
  static constexpr KernelFactory kByAlgo[] = {{supportsFp8MatMul, createFp8MatMul<0>}, {supportsFp8MatMul, createFp8MatMul<1>}};
  return kByAlgo[algo];
}
}  // namespace cuda

}  // namespace kiln
