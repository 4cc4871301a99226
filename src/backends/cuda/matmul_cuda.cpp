// CUDA tactics: matmul family (MatMul with fused bias + activation, Gemm) through cuBLASLt.
//   "cublaslt":   cuBLASLt's best heuristic algorithm for the concrete shapes.
//   "cublaslt_1".."cublaslt_3": its 2nd..4th candidates (the best one where fewer exist), so that
//                 the builder's timing can pick among them.
// float32 (TF32 tensor cores unless kiln_tf32 == 0), float16 and bfloat16 (FP32 accumulation).
// Constant B is repacked once to K-contiguous [N,K] matrices in device memory.
#include <algorithm>

#include "core/type_dispatch.h"
#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/matmul_lt_run.h"
#include "ops/activation.h"
#include "ops/fused_attrs.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

using cuda::GemmSetup;


bool supportsCommon(const LayerDesc& l, size_t rankA, size_t rankB, size_t maxInputs) {
  if (l.inputs.size() < 2 || l.inputs.size() > maxInputs || !l.present(0) || !l.present(1)) return false;
  DataType t = l.inputs[0].type;
  if (!isFloatType(t)) return false;
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (l.present(i) && l.inputs[i].type != t) return false;
  if (!l.outputs.empty() && l.outputs[0].type != t) return false;
  try {
    fusedActivation(*l.attrs);
  } catch (const Error&) {
    return false;
  }
  const Dims& a = l.inputs[0].dims;
  const Dims& b = l.inputs[1].dims;
  if (rankA ? a.size() != rankA : a.empty()) return false;
  if (rankB ? b.size() != rankB : b.empty()) return false;
  return true;
}

// MatMul's 4th input (a gated linear unit's multiplier) is applied by the post pass.
bool supportsMatMul(const LayerDesc& l) { return supportsCommon(l, 0, 0, 4); }
bool supportsGemm(const LayerDesc& l) { return supportsCommon(l, 2, 2, 3); }

//! A row of N values (dims [1,..,1,N]).
bool isRow(const Dims& d, int64_t N) {
  if (d.empty() || d.back() != N) return false;
  for (size_t i = 0; i + 1 < d.size(); ++i)
    if (d[i] != 1) return false;
  return true;
}

class LtMatMulKernel : public Kernel {
 public:
  LtMatMulKernel(const LayerDesc& l, bool gemm, int algoIndex)
      : gemm_(gemm), algoIndex_(algoIndex), type_(l.inputs[0].type), tf32_(cuda::allowTf32(l)), act_(fusedActivation(*l.attrs)) {
    if (gemm_) {
      transA_ = l.attrs->getInt("transA", 0) != 0;
      transB_ = l.attrs->getInt("transB", 0) != 0;
      alpha_ = l.attrs->getFloat("alpha", 1.f);
      beta_ = l.attrs->getFloat("beta", 1.f);
    }
    const TensorDesc& b = l.inputs[1];
    if (b.value.valid() && isStatic(b.dims) && b.value.count() > 0) {
      // Constant B: every matrix repacked to [N,K] once.
      const Dims& d = b.dims;
      bool vec = d.size() == 1;
      int64_t K = vec ? d[0] : (gemm_ && transB_ ? d[1] : d[d.size() - 2]);
      int64_t N = vec ? 1 : (gemm_ && transB_ ? d[0] : d.back());
      int64_t matrices = volume(Dims(d.begin(), d.end() - (vec ? 1 : 2)));
      weights_ = std::make_unique<cuda::DeviceWeights>(b.value, matrices, K, N, gemm_ && transB_);
      weightDims_ = d;
    }
  }

  size_t reshape(const LayerDesc& concrete, std::unique_ptr<KernelState>& state) const override {
    if (weights_ && concrete.inputs[1].dims != weightDims_)
      opError(concrete, "constant B changed shape from " + toString(weightDims_) + " to " + toString(concrete.inputs[1].dims));
    GemmSetup s = gemm_ ? gemmSetup(concrete) : matmulSetup(concrete);
    s.prob.type = type_;
    s.prob.tf32 = tf32_;
    s.act = act_;
    size_t ws = 0;
    state = cuda::buildLtState(std::move(s), algoIndex_, ws);
    return ws;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    cuda::runLtState(*static_cast<cuda::LtState*>(state), io, weights_ ? weights_->data() : nullptr);
  }
  bool holdsInput(size_t i) const override { return i == 1 && weights_ && weights_->data(); }

 private:
  GemmSetup matmulSetup(const LayerDesc& l) const {
    const Dims& a = l.inputs[0].dims;
    const Dims& b = l.inputs[1].dims;
    GemmSetup s;
    const bool aVec = a.size() == 1, bVec = b.size() == 1;
    s.prob.M = aVec ? 1 : a[a.size() - 2];
    s.prob.K = a.back();
    s.prob.N = bVec ? 1 : b.back();
    if ((bVec ? b[0] : b[b.size() - 2]) != s.prob.K) opError(l, "inner dimensions differ: " + toString(a) + " and " + toString(b));
    s.prob.transB = weights_ != nullptr;
    Dims aBatch(a.begin(), a.end() - (aVec ? 1 : 2)), bBatch(b.begin(), b.end() - (bVec ? 1 : 2));
    Dims batch = broadcastDims(l, aBatch, bBatch);
    s.outDims = l.outputs[0].dims;
    const int64_t batches = volume(batch);
    s.empty = batches == 0 || s.prob.M == 0 || s.prob.N == 0;
    s.zeroK = s.prob.K == 0;
    if (l.present(2)) {
      const Dims& bias = l.inputs[2].dims;
      if (!bVec && isRow(bias, s.prob.N)) s.rowBias = 2, s.rowBiasDims = bias;
      else if (volume(bias) == volume(s.outDims)) s.fullC = 2, s.prob.beta = 1.f;
      else s.addend = 2, s.addendDims = bias, s.addScale = 1.f;
    }
    if (l.present(3)) {
      if (l.inputs[3].dims != s.outDims) opError(l, "fused multiplier " + toString(l.inputs[3].dims) + " is not of the output's shape");
      s.gate = 3;
    }
    if (s.empty || s.zeroK) return s;
    if (volume(bBatch) == 1 && volume(aBatch) == batches) {
      s.prob.M *= batches;  // one B, contiguous A: the batches are rows of one product
      s.calls.push_back({});
    } else {
      cuda::splitBatch(s, aBatch, bBatch, batch);
    }
    return s;
  }

  GemmSetup gemmSetup(const LayerDesc& l) const {
    const Dims& a = l.inputs[0].dims;
    const Dims& b = l.inputs[1].dims;
    GemmSetup s;
    s.prob.M = transA_ ? a[1] : a[0];
    s.prob.K = transA_ ? a[0] : a[1];
    s.prob.N = transB_ ? b[0] : b[1];
    if ((transB_ ? b[1] : b[0]) != s.prob.K) opError(l, "inner dimensions differ: " + toString(a) + " and " + toString(b));
    s.prob.transA = transA_;
    s.prob.transB = transB_ || weights_ != nullptr;
    s.prob.alpha = alpha_;
    s.outDims = {s.prob.M, s.prob.N};
    s.empty = s.prob.M == 0 || s.prob.N == 0;
    s.zeroK = s.prob.K == 0;
    if (s.zeroK) s.prob.alpha = 0.f;
    if (l.present(2) && beta_ != 0.f) {
      const Dims& c = l.inputs[2].dims;
      std::vector<int64_t> cs = broadcastStrides(c, s.outDims);
      bool row = cs[0] == 0 && (cs[1] == 1 || s.prob.N == 1);
      if (row && beta_ == 1.f) s.rowBias = 2, s.rowBiasDims = c;
      else if (volume(c) == s.prob.M * s.prob.N) s.fullC = 2, s.prob.beta = beta_;
      else s.addend = 2, s.addendDims = c, s.addScale = beta_;
    }
    if (!s.empty && !s.zeroK) s.calls.push_back({});
    return s;
  }

  bool gemm_;
  int algoIndex_;
  DataType type_;
  bool tf32_;
  Activation act_;
  bool transA_ = false, transB_ = false;
  float alpha_ = 1.f, beta_ = 1.f;
  std::unique_ptr<cuda::DeviceWeights> weights_;
  Dims weightDims_;
};

template <int I>
std::unique_ptr<Kernel> createMatMul(const LayerDesc& l) {
  return std::make_unique<LtMatMulKernel>(l, false, I);
}

template <int I>
std::unique_ptr<Kernel> createGemm(const LayerDesc& l) {
  return std::make_unique<LtMatMulKernel>(l, true, I);
}

}  // namespace

namespace cuda {
KernelFactory cublasLtMatMul(int algo) {
  static constexpr KernelFactory kByAlgo[] = {{supportsMatMul, createMatMul<0>}, {supportsMatMul, createMatMul<1>},
                                              {supportsMatMul, createMatMul<2>}, {supportsMatMul, createMatMul<3>}};
  return kByAlgo[algo];
}
KernelFactory cublasLtGemm(int algo) {
  static constexpr KernelFactory kByAlgo[] = {{supportsGemm, createGemm<0>}, {supportsGemm, createGemm<1>},
                                              {supportsGemm, createGemm<2>}, {supportsGemm, createGemm<3>}};
  return kByAlgo[algo];
}
}  // namespace cuda

}  // namespace kiln
