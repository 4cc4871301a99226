// CUDA tactics of the FP8 family (ops/fp8_matmul.cpp):
//   fp8_matmul_fp_cublaslt_0 .. _1 (Fp8MatMul): one cuBLASLt FP8 GEMM on Hopper's tensor cores,
//     [rows, K] x [N, K]^T (the "TN" layout FP8 GEMMs require; the constant codes repacked once)
//     with FP32 (fast) accumulation and alpha = x_scale * w_scale. A float X is quantized into the
//     workspace first (fp8_matmul_kernels.cu); codes are read as they are. A float Y: D in the
//     float type, the bias and ReLU / tanh-GELU in cuBLASLt's epilogue (16-bit D), any other
//     activation in the post pass. Y as codes (y_scale): cuBLASLt writes the float8 D itself
//     (D scale 1 / y_scale) when its epilogue takes everything (16-bit float type, ReLU / GELU
//     (erf-GELU as tanh-GELU, see reshape) or none); otherwise D is staged in the workspace and
//     quantized after. The i-th tactic uses
//     cuBLASLt's i-th heuristic candidate. Needs K % 16 == 0 and compute capability 8.9 or newer.
//   fp8_quantize_fp_cuda (Fp8Quantize): the saturating quantization alone.
#include <memory>

#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/fp8_matmul_kernels.h"
#include "backends/cuda/matmul_lt_run.h"
#include "ops/fp8_matmul.h"
#include "ops/fused_attrs.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

constexpr size_t kAlign = 256;
constexpr DataType kE4M3 = DataType::kFP8E4M3FN;

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

bool floatType(DataType t) { return t == DataType::kFLOAT || t == DataType::kHALF || t == DataType::kBF16; }

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
  if (l.inputs.size() < 2 || l.inputs.size() > 3 || !l.present(0) || !l.present(1) || l.outputs.size() != 1) return false;
  const TensorDesc &x = l.inputs[0], &w = l.inputs[1];
  const DataType t = fp8MatMulFloatType(l);
  if (!floatType(t) || (x.type != t && x.type != kE4M3)) return false;
  if (l.outputs[0].type != t && l.outputs[0].type != kE4M3) return false;
  if (w.type != kE4M3 || w.dims.size() != 2 || !w.value.valid() || !isStatic(w.dims)) return false;
  if (w.dims[0] % 16 != 0 || w.dims[0] == 0 || w.dims[1] == 0 || x.dims.size() < 2) return false;
  if (l.present(2) && (l.inputs[2].type != t || !l.inputs[2].value.valid())) return false;
  return deviceHasFp8();
}

struct Fp8State : KernelState {
  std::unique_ptr<cuda::LtState> lt;
  int64_t count = 0;      //!< X's elements
  int64_t outCount = 0;   //!< Y's elements
  size_t codesBytes = 0;  //!< X's codes at the workspace's start (float X)
  size_t stageBytes = 0;  //!< then the float product, quantized into Y after (staged Y codes)
};

class Fp8MatMulCuda : public Kernel {
 public:
  Fp8MatMulCuda(const LayerDesc& l, int algoIndex)
      : algoIndex_(algoIndex),
        type_(fp8MatMulFloatType(l)),
        codesIn_(l.inputs[0].type == kE4M3),
        codesOut_(l.outputs[0].type == kE4M3),
        K_(l.inputs[1].dims[0]),
        N_(l.inputs[1].dims[1]),
        alpha_(l.attrs->getFloat("x_scale", 1.f) * l.attrs->getFloat("w_scale", 1.f)),
        xScale_(l.attrs->getFloat("x_scale", 1.f)),
        yScale_(l.attrs->getFloat("y_scale", 1.f)),
        act_(fusedActivation(*l.attrs)),
        // [K, N] codes -> [N, K] (K contiguous), shared with every tactic of the layer.
        weights_(l.inputs[1].value, 1, K_, N_, false) {
    if (codesOut_) {  // cuBLASLt reads the D scale from device memory
      HostTensor inv(DataType::kFLOAT, {1});
      inv.as<float>()[0] = 1.f / yScale_;
      dScale_ = cuda::sharedDeviceCopy(inv, "", {});
    }
  }

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    if (x.back() != K_) opError(l, "X " + toString(x) + " does not fit the constant weights [" + std::to_string(K_) + ", " + std::to_string(N_) + "]");
    auto st = std::make_unique<Fp8State>();
    st->count = volume(x);
    st->outCount = volume(l.outputs[0].dims);
    st->codesBytes = codesIn_ ? 0 : aligned(static_cast<size_t>(st->count));
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
    s.act = act_;
    if (l.present(2)) {
      // A 16-bit D takes the bias in cuBLASLt's epilogue; FP8 GEMMs with a float32 D want a
      // bfloat16 bias there, so that one is added in the post pass (at float32).
      if (type_ == DataType::kFLOAT) s.addend = 2, s.addendDims = {N_}, s.addScale = 1.f;
      else s.rowBias = 2, s.rowBiasDims = {N_};
    }
    if (!s.empty) s.calls.push_back({});
    size_t ltWs = 0;
    // Y's codes straight from cuBLASLt where its epilogue computes all of Y (else staged). An
    // erf-GELU whose result becomes E4M3 codes right away takes cuBLASLt's tanh-GELU: the two differ
    // by at most ~5e-4 (near |x| = 2, where E4M3's step is 0.25), so a code changes only for a value
    // that close to a rounding boundary (~0.4% of them, by one step), and the float16 round trip of
    // the staged path (a third of BERT's FFN-up time at b32 on the H100) goes.
    const bool geluAsTanh = act_.kind == ActKind::kGelu;
    bool direct = codesOut_ && type_ != DataType::kFLOAT && (cuda::ltFusable(act_.kind) || geluAsTanh) && !s.empty;
    if (direct) {
      cuda::GemmSetup d = s;
      if (geluAsTanh) d.act.kind = ActKind::kGeluTanh;
      d.prob.fp8Out = true;
      d.prob.dScale = static_cast<const float*>(dScale_->ptr);
      try {
        st->lt = cuda::buildLtState(std::move(d), algoIndex_, ltWs);
        st->lt->safe.plan.reset();  // its post pass would add the bias to the codes: aligned buffers only
        direct = !st->lt->fast.post.needed();
      } catch (const UnsupportedError&) {
        direct = false;  // no FP8-D algorithm for this problem: stage it
      }
    }
    if (!direct) st->lt = cuda::buildLtState(std::move(s), algoIndex_, ltWs);  // UnsupportedError: no FP8 algorithm
    if (codesOut_ && !direct) st->stageBytes = aligned(static_cast<size_t>(st->outCount) * elementSize(type_));
    const size_t ws = st->codesBytes + st->stageBytes + ltWs;
    state = std::move(st);
    return ws;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    auto* st = static_cast<Fp8State*>(state);
    if (st->lt->setup.empty) return;
    const cudaStream_t stream = cuda::streamOf(io);
    char* ws = static_cast<char*>(io.workspace);
    if (!codesIn_) cuda::launchQuantizeE4M3(type_, io.in[0].data, st->count, xScale_, ws, stream);
    void* stage = st->stageBytes ? ws + st->codesBytes : nullptr;
    cuda::runLtState(*st->lt, io, weights_.data(), codesIn_ ? nullptr : ws, st->codesBytes + st->stageBytes, stage);
    if (stage) cuda::launchQuantizeE4M3(type_, stage, st->outCount, yScale_, io.out[0].data, stream);
  }

  bool holdsInput(size_t i) const override { return i == 1 && weights_.data(); }  // the bias comes as io.in[2]

 private:
  int algoIndex_;
  DataType type_;
  bool codesIn_, codesOut_;
  int64_t K_, N_;
  float alpha_, xScale_, yScale_;
  Activation act_;
  cuda::DeviceWeights weights_;
  std::shared_ptr<const cuda::DeviceCopy> dScale_;
};

template <int I>
std::unique_ptr<Kernel> createFp8MatMul(const LayerDesc& l) {
  return std::make_unique<Fp8MatMulCuda>(l, I);
}

bool supportsFp8Quantize(const LayerDesc& l) {
  return l.inputs.size() == 1 && l.present(0) && floatType(l.inputs[0].type) && l.outputs.size() == 1 && l.outputs[0].type == kE4M3;
}

class Fp8QuantizeCuda : public Kernel {
 public:
  explicit Fp8QuantizeCuda(const LayerDesc& l) : type_(l.inputs[0].type), scale_(l.attrs->getFloat("scale", 1.f)) {}
  void execute(const KernelIO& io, KernelState*) const override {
    cuda::launchQuantizeE4M3(type_, io.in[0].data, io.in[0].count, scale_, io.out[0].data, cuda::streamOf(io));
  }

 private:
  DataType type_;
  float scale_;
};

std::unique_ptr<Kernel> createFp8Quantize(const LayerDesc& l) { return std::make_unique<Fp8QuantizeCuda>(l); }

}  // namespace

namespace cuda {
KernelFactory fp8MatMulCublasLt(int algo) {
  static constexpr KernelFactory kByAlgo[] = {{supportsFp8MatMul, createFp8MatMul<0>}, {supportsFp8MatMul, createFp8MatMul<1>}};
  return kByAlgo[algo];
}
KernelFactory fp8Quantize() { return {supportsFp8Quantize, createFp8Quantize}; }
}  // namespace cuda

}  // namespace kiln
