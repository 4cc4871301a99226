// "matmul_half_cudnn_fused_0" / "_1": MatMul + bias + an activation cuBLASLt's epilogues cannot
// apply, as one cuDNN graph (matmul -> add bias -> pointwise activation, the i-th engine config
// that builds). Why: cuBLASLt fuses only ReLU and the tanh-form GELU, so a transformer MLP's erf
// GELU (BERT, ViT, Swin, ConvNeXt, Whisper: PyTorch's default nn.GELU) and SiLU / Sigmoid / Tanh
// ran as the GEMM plus a post pass that read and wrote the whole [M, 4*hidden] output again (~30%
// of fc1's time at throughput batches in the zoo profiles: ViT-B/16 b32, ConvNeXt-T b64). cuDNN's
// pointwise modes compute the exact formulas (GELU_FWD is erf's). Offered next to the cuBLASLt
// tactics; the builder's timing keeps whichever is faster.
// With MatMul's 4th input G (a gated linear unit: SwiGLU's silu(x W_gate) * (x W_up), GeGLU) the
// graph ends in a multiply by G: the GEMM reads G and writes the product once, where the cuBLASLt
// tactics write the GEMM's output and a post pass reads it and G again (any activation, or none).
// float16 / bfloat16, A of rank >= 2 (its leading dims fold into M), constant 2-D B uploaded
// [N, K] (K contiguous), an optional row bias; K and N multiples of 8 (16-byte rows).
#include "backends/cuda/cuda_tactics.h"

#ifdef KILN_HAVE_CUDNN_FRONTEND
#include <cudnn_frontend.h>

#include <algorithm>
#include <mutex>
#include <string>

#include "backends/cuda/conv_cuda_common.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/cudnn_handle.h"
#include "backends/cuda/matmul_lt_run.h"
#include "backends/cuda/plan_cache.h"
#include "ops/fused_attrs.h"
#include "ops/op_util.h"
#endif

namespace kiln {

#ifdef KILN_HAVE_CUDNN_FRONTEND

namespace {

namespace fe = cudnn_frontend;

constexpr int kTactics = 2;
constexpr int64_t kMaxWorkspace = int64_t(256) << 20;
enum Uid : int64_t { kUidA = 1, kUidB = 2, kUidBias = 3, kUidY = 4, kUidGate = 5 };

fe::DataType_t feHalfType(DataType t) { return t == DataType::kBF16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF; }

//! A row of N values ([1, .., 1, N]).
bool isBiasRow(const Dims& d, int64_t N) {
  if (d.empty() || d.back() != N) return false;
  for (size_t i = 0; i + 1 < d.size(); ++i)
    if (d[i] != 1) return false;
  return true;
}

//! Activations this tactic exists for: cuDNN computes them exactly and cuBLASLt's epilogue cannot
//! (ReLU and the tanh GELU stay with cuBLASLt, which fuses them already). With a multiplier G any
//! activation cuDNN computes, or none: cuBLASLt needs a post pass for G.
bool wantsFusedAct(const Activation& a, bool gated) {
  if (gated) return a.kind == ActKind::kNone || cuda::cudnnAct(a);
  return !cuda::ltFusable(a.kind) && cuda::cudnnAct(a);
}

bool supportsCudnnMatMul(const LayerDesc& l) {
  if (l.op != "MatMul" || l.inputs.size() < 2 || l.inputs.size() > 4 || !l.present(0) || !l.present(1)) return false;
  const DataType t = l.inputs[0].type;
  if (t != DataType::kHALF && t != DataType::kBF16) return false;
  for (size_t i = 1; i < l.inputs.size(); ++i)
    if (l.present(i) && l.inputs[i].type != t) return false;
  if (l.outputs.empty() || l.outputs[0].type != t) return false;
  Activation act;
  try {
    act = fusedActivation(*l.attrs);
  } catch (const Error&) {
    return false;
  }
  const bool gated = l.present(3);
  if (!wantsFusedAct(act, gated)) return false;
  const Dims& a = l.inputs[0].dims;
  const TensorDesc& b = l.inputs[1];
  if (a.size() < 2 || b.dims.size() != 2 || !b.value.valid() || !isStatic(b.dims)) return false;
  const int64_t K = b.dims[0], N = b.dims[1];
  if (a.back() != K || K <= 0 || N <= 0 || K % 8 != 0 || N % 8 != 0) return false;
  if (gated && l.inputs[3].dims != l.outputs[0].dims) return false;
  return !l.present(2) || isBiasRow(l.inputs[2].dims, N);
}

using GraphCache = cuda::PlanCache<fe::graph::Graph>;
GraphCache& graphCache() {
  static GraphCache* c = new GraphCache(32);  // never destroyed: kernel states may outlive statics
  return *c;
}

struct MatMulState : KernelState {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t plan = 0;
  std::vector<int64_t> uids;
};

class CudnnMatMulKernel : public Kernel {
 public:
  CudnnMatMulKernel(const LayerDesc& l, int index)
      : index_(index),
        type_(l.inputs[0].type),
        act_(fusedActivation(*l.attrs)),
        K_(l.inputs[1].dims[0]),
        N_(l.inputs[1].dims[1]),
        weights_(l.inputs[1].value, 1, K_, N_, false),
        bias_(l.present(2) && l.inputs[2].value.valid() ? cuda::DeviceConstant(l.inputs[2].value) : cuda::DeviceConstant()),
        hasBias_(l.present(2)),
        hasGate_(l.present(3)) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& a = l.inputs[0].dims;
    if (a.size() < 2 || a.back() != K_) opError(l, "A " + toString(a) + " does not end in K = " + std::to_string(K_));
    const int64_t M = volume(Dims(a.begin(), a.end() - 1));
    if (M == 0) {  // nothing to compute: execute does nothing
      state = std::make_unique<MatMulState>();
      return 0;
    }
    cuda::GraphKey key;
    if (hasGate_ && volume(l.inputs[3].dims) != M * N_)
      opError(l, "fused multiplier " + toString(l.inputs[3].dims) + " is not of the output's size");
    key.add(static_cast<int64_t>(type_)).add(M).add(K_).add(N_).add(hasBias_).add(hasGate_).add(static_cast<int64_t>(act_.kind));
    key.addBits(act_.alpha).addBits(act_.beta);
    std::lock_guard<std::mutex> lock(cuda::cudnnHandle().mu);
    cuda::CudnnPlanChoice c;
    auto graph = cuda::sharedCudnnPlan(graphCache(), key.str(), kMaxWorkspace, [&] { return makeGraph(M); }, index_, l, c);
    auto s = std::make_unique<MatMulState>();
    s->graph = std::move(graph);
    s->plan = c.plan;
    s->uids = std::move(c.uids);
    state = std::move(s);
    return static_cast<size_t>(std::max<int64_t>(c.workspace, 0));
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    auto* s = static_cast<MatMulState*>(state);
    if (!s->graph) return;
    void* ptrs[5];
    int n = 0;
    for (int64_t uid : s->uids) {
      switch (uid) {
        case kUidA: ptrs[n++] = io.in[0].data; break;
        case kUidB: ptrs[n++] = const_cast<void*>(weights_.data()); break;
        case kUidBias: ptrs[n++] = const_cast<void*>(bias_.orInput(io, 2)); break;
        case kUidY: ptrs[n++] = io.out[0].data; break;
        case kUidGate: ptrs[n++] = io.in[3].data; break;
        default: throw Error("cuDNN matmul: unexpected tensor uid " + std::to_string(uid));
      }
    }
    cuda::executeCudnnPlan(*s->graph, s->plan, ptrs, n, io.workspace, cuda::streamOf(io), "cuDNN matmul");
  }

  bool holdsInput(size_t i) const override { return i == 1 || (i == 2 && bias_.get()); }

 private:
  //! A [1, M, K] (row-major) x B [1, K, N] stored [N, K] -> + bias [1, 1, N] -> activation
  //! -> * G [1, M, N] -> Y [1, M, N].
  std::shared_ptr<fe::graph::Graph> makeGraph(int64_t M) const {
    auto g = std::make_shared<fe::graph::Graph>();
    const fe::DataType_t t = feHalfType(type_);
    g->set_io_data_type(t).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
    auto tensor = [&](const char* name, int64_t uid, std::vector<int64_t> dims, std::vector<int64_t> strides) {
      return g->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dims).set_stride(strides).set_data_type(t));
    };
    auto a = tensor("A", kUidA, {1, M, K_}, {M * K_, K_, 1});
    auto b = tensor("B", kUidB, {1, K_, N_}, {K_ * N_, 1, K_});
    auto y = g->matmul(a, b, fe::graph::Matmul_attributes().set_name("matmul").set_compute_data_type(fe::DataType_t::FLOAT));
    if (hasBias_) {
      auto bias = tensor("bias", kUidBias, {1, 1, N_}, {N_, N_, 1});
      y = g->pointwise(y, bias, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD).set_compute_data_type(fe::DataType_t::FLOAT));
    }
    if (act_.kind != ActKind::kNone) {
      fe::graph::Pointwise_attributes actAttrs;
      cuda::cudnnAct(act_, &actAttrs);
      y = g->pointwise(y, actAttrs);
    }
    if (hasGate_) {
      auto gate = tensor("gate", kUidGate, {1, M, N_}, {M * N_, N_, 1});
      y = g->pointwise(y, gate, fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::MUL).set_compute_data_type(fe::DataType_t::FLOAT));
    }
    y->set_output(true).set_uid(kUidY).set_dim({1, M, N_}).set_stride({M * N_, N_, 1}).set_data_type(t);
    return g;
  }

  int index_;
  DataType type_;
  Activation act_;
  int64_t K_, N_;
  cuda::DeviceWeights weights_;  // [N, K]
  cuda::DeviceConstant bias_;    // uploaded when constant
  bool hasBias_;
  bool hasGate_;
};

template <int I>
std::unique_ptr<Kernel> createCudnnMatMul(const LayerDesc& l) {
  return std::make_unique<CudnnMatMulKernel>(l, I);
}

}  // namespace

namespace cuda {
KernelFactory cudnnFusedMatMul(int engine) {
  static_assert(kTactics == 2, "one create per engine config below");
  static constexpr KernelFactory kByEngine[] = {{supportsCudnnMatMul, createCudnnMatMul<0>}, {supportsCudnnMatMul, createCudnnMatMul<1>}};
  return kByEngine[engine];
}
}  // namespace cuda

#endif

}  // namespace kiln
