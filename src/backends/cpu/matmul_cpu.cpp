// Optimized CPU tactics: matmul family (float32 MatMul and Gemm, fused bias + activation).
//   "gemm_avx2": kiln's own sgemm; constant B (weights) is packed once at create time.
//   "onednn":    oneDNN's matmul primitive (built only when oneDNN is available).
#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_tactics.h"
#include "backends/cpu/gemm.h"
#include "core/thread_pool.h"
#include "ops/activation.h"
#include "ops/fused_attrs.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

#ifdef KILN_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace kiln {

namespace {

// ---------------------------------------------------------------------------------------------
// Geometry shared by the tactics

bool allFloat(const LayerDesc& l) {
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (l.present(i) && l.inputs[i].type != DataType::kFLOAT) return false;
  return true;
}

bool validActivation(const LayerDesc& l) {
  try {
    fusedActivation(*l.attrs);
    return true;
  } catch (const Error&) {
    return false;
  }
}

//! A fused MatMul bias that is one row of N values (dims [..1.., N]), the case the GEMM epilogue
//! handles; N must be known.
bool isRowBias(const Dims& bias, int64_t N) {
  if (bias.empty() || N < 0 || bias.back() != N) return false;
  for (size_t i = 0; i + 1 < bias.size(); ++i)
    if (bias[i] != 1) return false;
  return true;
}

//! Concrete MatMul geometry: 1-D operands promoted, batch dims broadcast.
struct MatMulShape {
  int64_t M = 0, N = 0, K = 0;
  Dims aBatch, bBatch, batch;
  int64_t batches = 1, aMatrices = 1, bMatrices = 1;
  std::vector<int64_t> aStride, bStride;  // batch strides in matrices (0 = broadcast)
  //! B has a single matrix: A's batches fold into M (one large GEMM).
  bool foldBatchIntoM() const { return bMatrices == 1; }
  int64_t aMatrix(int64_t flat) const { return matrixIndex(flat, aStride); }
  int64_t bMatrix(int64_t flat) const { return matrixIndex(flat, bStride); }

 private:
  int64_t matrixIndex(int64_t flat, const std::vector<int64_t>& stride) const {
    int64_t off = 0;
    for (size_t d = batch.size(); d-- > 0;) {
      off += (flat % batch[d]) * stride[d];
      flat /= batch[d];
    }
    return off;
  }
};

MatMulShape matmulShape(const LayerDesc& l, const Dims& a, const Dims& b) {
  if (a.empty() || b.empty()) opError(l, "MatMul operands must have rank >= 1");
  MatMulShape s;
  bool aVec = a.size() == 1, bVec = b.size() == 1;
  s.M = aVec ? 1 : a[a.size() - 2];
  s.K = a.back();
  s.N = bVec ? 1 : b.back();
  if ((bVec ? b[0] : b[b.size() - 2]) != s.K) opError(l, "inner dimensions differ: " + toString(a) + " and " + toString(b));
  s.aBatch.assign(a.begin(), a.end() - (aVec ? 1 : 2));
  s.bBatch.assign(b.begin(), b.end() - (bVec ? 1 : 2));
  s.batch = broadcastDims(l, s.aBatch, s.bBatch);
  s.batches = volume(s.batch);
  s.aMatrices = volume(s.aBatch);
  s.bMatrices = volume(s.bBatch);
  s.aStride = broadcastStrides(s.aBatch, s.batch);
  s.bStride = broadcastStrides(s.bBatch, s.batch);
  return s;
}

//! Gemm attributes as the kernels use them.
struct GemmParams {
  bool transA = false, transB = false;
  float alpha = 1.f, beta = 1.f;
  explicit GemmParams(const Attributes& a)
      : transA(a.getInt("transA", 0) != 0), transB(a.getInt("transB", 0) != 0), alpha(a.getFloat("alpha", 1.f)),
        beta(a.getFloat("beta", 1.f)) {}
};

//! Writes C broadcast to [M,N] into Y (Gemm's C input when it is not a plain row of biases).
void broadcastInto(const TensorView& c, float* y, int64_t M, int64_t N) {
  auto cs = broadcastStrides(c.dims, {M, N});
  const float* src = c.as<const float>();
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) y[i * N + j] = src[i * cs[0] + j * cs[1]];
}

//! Per-shape state: the concrete layer (kept for its dims).
struct ShapeState : KernelState {
  MatMulShape shape;
};

// ---------------------------------------------------------------------------------------------
// gemm_avx2: MatMul

class MatMulGemmKernel : public Kernel {
 public:
  explicit MatMulGemmKernel(const LayerDesc& l) : act_(fusedActivation(*l.attrs)), hasBias_(l.present(2)) {
    const TensorDesc& b = l.inputs[1];
    if (!b.value.valid()) return;
    // Constant B: pack each of its matrices once.
    const Dims& d = b.dims;
    bool vec = d.size() == 1;
    int64_t K = vec ? d[0] : d[d.size() - 2], N = vec ? 1 : d.back();
    int64_t matrices = volume(Dims(d.begin(), d.end() - (vec ? 1 : 2)));
    const float* src = b.value.as<float>();
    for (int64_t m = 0; m < matrices; ++m) packed_.emplace_back(false, K, N, src + m * K * N, N);
  }

  size_t reshape(const LayerDesc& concrete, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<ShapeState>();
    s->shape = matmulShape(concrete, concrete.inputs[0].dims, concrete.inputs[1].dims);
    if (hasBias_ && !isRowBias(concrete.inputs[2].dims, s->shape.N))
      opError(concrete, "gemm_avx2 needs the fused bias to be a row of N values, got " + toString(concrete.inputs[2].dims));
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const MatMulShape& s = static_cast<ShapeState*>(state)->shape;
    const float* A = io.in[0].as<const float>();
    const float* B = io.in[1].as<const float>();
    float* Y = io.out[0].as<float>();
    cpu::GemmEpilogue ep;
    ep.act = act_;
    if (hasBias_) ep.colBias = io.in[2].as<const float>();
    if (s.foldBatchIntoM() && s.aMatrices == s.batches) {
      // A's batches are contiguous rows: one [batches*M, K] x [K, N] product.
      multiply(s.batches * s.M, s.N, s.K, A, 0, B, Y, ep, io.pool);
      return;
    }
    auto one = [&](int64_t bt, ThreadPool* pool) {
      multiply(s.M, s.N, s.K, A + s.aMatrix(bt) * s.M * s.K, s.bMatrix(bt), B + s.bMatrix(bt) * s.K * s.N,
               Y + bt * s.M * s.N, ep, pool);
    };
    if (s.batches >= io.pool->size()) {  // many small products: one per task, each single-threaded
      io.pool->parallelFor(s.batches, 1, [&](int64_t b, int64_t e) {
        for (int64_t bt = b; bt < e; ++bt) one(bt, nullptr);
      });
    } else {
      for (int64_t bt = 0; bt < s.batches; ++bt) one(bt, io.pool);
    }
  }

 private:
  //! Y[M,N] = A[M,K] x B[K,N] (B matrix `bIndex`, pre-packed when constant) + epilogue.
  void multiply(int64_t M, int64_t N, int64_t K, const float* A, int64_t bIndex, const float* B, float* Y,
                const cpu::GemmEpilogue& ep, ThreadPool* pool) const {
    if (!packed_.empty()) cpu::sgemmPacked(false, M, 1.f, A, std::max<int64_t>(K, 1), packed_[bIndex], 0.f, Y, std::max<int64_t>(N, 1), pool, ep);
    else cpu::sgemm(false, false, M, N, K, 1.f, A, std::max<int64_t>(K, 1), B, std::max<int64_t>(N, 1), 0.f, Y, std::max<int64_t>(N, 1), pool, ep);
  }

  Activation act_;
  bool hasBias_;
  std::vector<cpu::PackedB> packed_;  // one per matrix of a constant B
};

bool supportsMatMulGemm(const LayerDesc& l) {
  if (l.inputs.size() < 2 || l.inputs.size() > 3 || !allFloat(l) || !validActivation(l)) return false;
  if (l.inputs[0].dims.empty() || l.inputs[1].dims.empty()) return false;
  if (l.present(2)) {
    const Dims& b = l.inputs[1].dims;
    int64_t N = b.size() == 1 ? 1 : b.back();
    if (!isRowBias(l.inputs[2].dims, N)) return false;
  }
  return !l.inputs[1].value.valid() || isStatic(l.inputs[1].dims);
}

std::unique_ptr<Kernel> createMatMulGemm(const LayerDesc& l) { return std::make_unique<MatMulGemmKernel>(l); }

// ---------------------------------------------------------------------------------------------
// gemm_avx2: Gemm

struct GemmShapeState : KernelState {
  int64_t M = 0, N = 0, K = 0;
};

class GemmGemmKernel : public Kernel {
 public:
  explicit GemmGemmKernel(const LayerDesc& l) : p_(*l.attrs), act_(fusedActivation(*l.attrs)), hasC_(l.present(2)) {
    const TensorDesc& b = l.inputs[1];
    if (b.value.valid()) {
      int64_t K = p_.transB ? b.dims[1] : b.dims[0], N = p_.transB ? b.dims[0] : b.dims[1];
      packed_ = cpu::PackedB(p_.transB, K, N, b.value.as<float>(), b.dims[1]);
      // A constant C that is one value or one row becomes a precomputed column bias beta*C.
      if (hasC_ && l.inputs[2].value.valid()) {
        const HostTensor& c = l.inputs[2].value;
        bool row = c.count() == N && (c.dims().size() == 1 || c.dims()[0] == 1);
        if (row || c.count() == 1) {
          colBias_.resize(N);
          for (int64_t j = 0; j < N; ++j) colBias_[j] = p_.beta * c.as<float>()[row ? j : 0];
        }
      }
    }
  }

  size_t reshape(const LayerDesc& concrete, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<GemmShapeState>();
    const Dims& a = concrete.inputs[0].dims;
    const Dims& b = concrete.inputs[1].dims;
    if (a.size() != 2 || b.size() != 2) opError(concrete, "Gemm operands must be 2-D");
    s->M = p_.transA ? a[1] : a[0];
    s->K = p_.transA ? a[0] : a[1];
    s->N = p_.transB ? b[0] : b[1];
    if ((p_.transB ? b[1] : b[0]) != s->K) opError(concrete, "Gemm inner dimensions differ");
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const auto& s = *static_cast<GemmShapeState*>(state);
    const float* A = io.in[0].as<const float>();
    float* Y = io.out[0].as<float>();
    int64_t lda = std::max<int64_t>(p_.transA ? s.M : s.K, 1), ldy = std::max<int64_t>(s.N, 1);
    cpu::GemmEpilogue ep;
    ep.act = act_;
    float beta = 0.f;
    if (!colBias_.empty()) {
      ep.colBias = colBias_.data();
    } else if (hasC_ && io.in[2].data && p_.beta != 0.f) {
      broadcastInto(io.in[2], Y, s.M, s.N);  // then Y = alpha*AB + beta*Y
      beta = p_.beta;
    }
    if (packed_.data()) {
      cpu::sgemmPacked(p_.transA, s.M, p_.alpha, A, lda, packed_, beta, Y, ldy, io.pool, ep);
    } else {
      int64_t ldb = std::max<int64_t>(p_.transB ? s.K : s.N, 1);
      cpu::sgemm(p_.transA, p_.transB, s.M, s.N, s.K, p_.alpha, A, lda, io.in[1].as<const float>(), ldb, beta, Y, ldy,
                 io.pool, ep);
    }
  }

 private:
  GemmParams p_;
  Activation act_;
  bool hasC_;
  cpu::PackedB packed_;
  std::vector<float> colBias_;
};

bool supportsGemmGemm(const LayerDesc& l) {
  if (l.inputs.size() < 2 || !allFloat(l) || !validActivation(l)) return false;
  if (l.inputs[0].dims.size() != 2 || l.inputs[1].dims.size() != 2) return false;
  return !l.inputs[1].value.valid() || isStatic(l.inputs[1].dims);
}

std::unique_ptr<Kernel> createGemmGemm(const LayerDesc& l) { return std::make_unique<GemmGemmKernel>(l); }

#ifdef KILN_HAVE_ONEDNN
// ---------------------------------------------------------------------------------------------
// onednn: MatMul and Gemm through dnnl::matmul. The primitive is created per concrete shape
// (reshape); a constant B is reordered into the primitive's preferred layout there.

dnnl::engine& dnnlEngine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

//! Maps a fused activation to a oneDNN eltwise post-op; false when oneDNN has no equivalent.
bool dnnlEltwise(const Activation& a, dnnl::algorithm& alg, float& alpha, float& beta) {
  alpha = 0.f;
  beta = 0.f;
  switch (a.kind) {
    case ActKind::kRelu: alg = dnnl::algorithm::eltwise_relu; return true;
    case ActKind::kLeakyRelu: alg = dnnl::algorithm::eltwise_relu; alpha = a.alpha; return true;
    case ActKind::kClip: alg = dnnl::algorithm::eltwise_clip_v2; alpha = a.alpha; beta = a.beta; return true;
    case ActKind::kSigmoid: alg = dnnl::algorithm::eltwise_logistic; return true;
    case ActKind::kTanh: alg = dnnl::algorithm::eltwise_tanh; return true;
    case ActKind::kGelu: alg = dnnl::algorithm::eltwise_gelu_erf; return true;
    case ActKind::kGeluTanh: alg = dnnl::algorithm::eltwise_gelu_tanh; return true;
    case ActKind::kElu: alg = dnnl::algorithm::eltwise_elu; alpha = a.alpha; return true;
    case ActKind::kHardSwish: alg = dnnl::algorithm::eltwise_hardswish; return true;
    case ActKind::kSilu: alg = dnnl::algorithm::eltwise_swish; alpha = 1.f; return true;
    case ActKind::kMish: alg = dnnl::algorithm::eltwise_mish; return true;
    default: return false;
  }
}

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

//! What one product looks like to oneDNN: [batch,] M x K times K x N, with optional transposes.
struct DnnlProblem {
  int64_t batch = 1, M = 0, N = 0, K = 0;
  bool transA = false, transB = false;
  float alpha = 1.f;
  bool sumIntoDst = false;  // dst is pre-filled with beta*C
  bool bias = false;        // a row of N values
};

dnnl::memory::desc matrixDesc(const DnnlProblem& p, int64_t batch, int64_t rows, int64_t cols, bool trans) {
  if (p.batch > 1 || batch > 1) {
    dnnl::memory::dims d{batch, rows, cols};
    return dnnl::memory::desc(d, dt::f32, trans ? tag::acb : tag::abc);
  }
  return dnnl::memory::desc({rows, cols}, dt::f32, trans ? tag::ba : tag::ab);
}

struct DnnlState : KernelState {
  dnnl::matmul prim;
  dnnl::memory src, wei, dst, bias;
  dnnl::memory packedWei;  // constant B in the primitive's layout (empty: B used as given)
  dnnl::stream stream;
  bool hasBias = false;
  DnnlProblem prob;
  //! oneDNN rejects zero-sized products: those (trivial) run the reference kernel.
  bool empty = false;
  LayerDesc concrete;
};

class DnnlMatMulKernel : public Kernel {
 public:
  DnnlMatMulKernel(const LayerDesc& l, bool gemm) : attrs_(*l.attrs), gemm_(gemm), act_(fusedActivation(*l.attrs)) {
    if (l.inputs[1].value.valid()) constB_ = l.inputs[1].value;
  }

  size_t reshape(const LayerDesc& c, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<DnnlState>();
    DnnlProblem p = problemFor(c);
    s->prob = p;
    if (p.batch == 0 || p.M == 0 || p.N == 0 || p.K == 0) {
      s->empty = true;
      s->concrete = c;
      state = std::move(s);
      return 0;
    }
    auto srcMd = matrixDesc(p, p.batch, p.M, p.K, p.transA);
    auto dstMd = matrixDesc(p, p.batch, p.M, p.N, false);
    auto weiPlain = matrixDesc(p, p.batch, p.K, p.N, p.transB);
    auto weiAny = constB_.valid() ? dnnl::memory::desc(weiPlain.dims(), dt::f32, tag::any) : weiPlain;
    // One try for the post-ops too: oneDNN refuses some parameters (a tampered plan's alpha = inf).
    try {
      dnnl::primitive_attr attr;
      dnnl::post_ops ops;
      if (p.alpha != 1.f) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, p.alpha, 0.f);
      if (p.sumIntoDst) ops.append_sum(1.f);
      dnnl::algorithm alg;
      float a, b;
      if (dnnlEltwise(act_, alg, a, b)) ops.append_eltwise(1.f, alg, a, b);
      attr.set_post_ops(ops);
      dnnl::memory::desc biasMd;
      if (p.bias) {
        dnnl::memory::dims bd(dstMd.dims().size(), 1);
        bd.back() = p.N;
        biasMd = dnnl::memory::desc(bd, dt::f32, dstMd.dims().size() == 3 ? tag::abc : tag::ab);
      }
      auto desc = p.bias ? dnnl::matmul::desc(srcMd, weiAny, biasMd, dstMd) : dnnl::matmul::desc(srcMd, weiAny, dstMd);
      dnnl::matmul::primitive_desc pd(desc, attr, dnnlEngine());
      s->prim = dnnl::matmul(pd);
      s->stream = dnnl::stream(dnnlEngine());
      s->src = dnnl::memory(pd.src_desc(), dnnlEngine(), DNNL_MEMORY_NONE);
      s->dst = dnnl::memory(pd.dst_desc(), dnnlEngine(), DNNL_MEMORY_NONE);
      if (p.bias) s->bias = dnnl::memory(biasMd, dnnlEngine(), DNNL_MEMORY_NONE);
      s->hasBias = p.bias;
      if (constB_.valid()) {
        dnnl::memory plain(weiPlain, dnnlEngine(), const_cast<void*>(constB_.data()));
        s->packedWei = dnnl::memory(pd.weights_desc(), dnnlEngine());
        dnnl::reorder(plain, s->packedWei).execute(s->stream, plain, s->packedWei);
        s->stream.wait();
      } else {
        s->wei = dnnl::memory(weiPlain, dnnlEngine(), DNNL_MEMORY_NONE);
      }
    } catch (const dnnl::error& e) {
      throw UnsupportedError("layer '" + c.name + "': oneDNN matmul cannot run this shape: " + e.what());
    }
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    auto& s = *static_cast<DnnlState*>(state);
    if (s.empty) {
      s.concrete.attrs = &attrs_;
      OpRegistry::instance().find(s.concrete.op)->ref(s.concrete, io);
      return;
    }
    const DnnlProblem& p = s.prob;
    float* Y = io.out[0].as<float>();
    if (p.sumIntoDst) {  // Gemm with a general C: dst = beta*C first, the product adds to it
      broadcastInto(io.in[2], Y, p.M, p.N);
      float beta = gemm_ ? GemmParams(attrs_).beta : 1.f;
      if (beta != 1.f)
        for (int64_t i = 0; i < p.M * p.N; ++i) Y[i] *= beta;
    }
    s.src.set_data_handle(io.in[0].data);
    s.dst.set_data_handle(Y);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, s.src}, {DNNL_ARG_DST, s.dst}};
    if (s.packedWei) {
      args[DNNL_ARG_WEIGHTS] = s.packedWei;
    } else {
      s.wei.set_data_handle(io.in[1].data);
      args[DNNL_ARG_WEIGHTS] = s.wei;
    }
    if (s.hasBias) {
      s.bias.set_data_handle(biasData(io));
      args[DNNL_ARG_BIAS] = s.bias;
    }
    s.prim.execute(s.stream, args);
    s.stream.wait();
    if (!dnnlSupportsAct()) cpu::applyEpilogue(cpu::GemmEpilogue{nullptr, nullptr, act_}, Y, std::max<int64_t>(p.N, 1), 0, p.batch * p.M, 0, p.N);
  }

  Attributes attrs_;  // the layer's attributes (copied: the desc's pointer does not outlive create)

 private:
  bool dnnlSupportsAct() const {
    dnnl::algorithm alg;
    float a, b;
    return act_.kind == ActKind::kNone || dnnlEltwise(act_, alg, a, b);
  }

  void* biasData(const KernelIO& io) const {
    if (gemm_) return const_cast<float*>(gemmBias_.data());
    return io.in[2].data;
  }

  DnnlProblem problemFor(const LayerDesc& c) const {
    DnnlProblem p;
    if (!gemm_) {
      MatMulShape s = matmulShape(c, c.inputs[0].dims, c.inputs[1].dims);
      p.M = s.M;
      p.N = s.N;
      p.K = s.K;
      if (s.bMatrices == 1 && s.aMatrices == s.batches) {
        p.M *= s.batches;  // fold A's batches into rows
      } else if (s.aMatrices == s.batches && s.bMatrices == s.batches && s.aBatch.size() == s.bBatch.size()) {
        p.batch = s.batches;
      } else {
        throw UnsupportedError("layer '" + c.name + "': onednn tactic needs equal or single-matrix batches");
      }
      p.bias = c.present(2);
      return p;
    }
    GemmParams g(attrs_);
    const Dims& a = c.inputs[0].dims;
    const Dims& b = c.inputs[1].dims;
    p.transA = g.transA;
    p.transB = g.transB;
    p.M = g.transA ? a[1] : a[0];
    p.K = g.transA ? a[0] : a[1];
    p.N = g.transB ? b[0] : b[1];
    if ((g.transB ? b[1] : b[0]) != p.K) opError(c, "Gemm inner dimensions differ");
    p.alpha = g.alpha;
    p.bias = !gemmBias_.empty() && static_cast<int64_t>(gemmBias_.size()) == p.N;
    p.sumIntoDst = c.present(2) && !p.bias && g.beta != 0.f;
    return p;
  }

 public:
  std::vector<float> gemmBias_;  // Gemm: beta*C as a bias row (constant C, alpha == 1)

 private:
  bool gemm_;
  Activation act_;
  HostTensor constB_;
};

bool supportsDnnl(const LayerDesc& l, bool gemm) {
  if (l.inputs.size() < 2 || l.inputs.size() > 3 || !allFloat(l) || !validActivation(l)) return false;
  const Dims& a = l.inputs[0].dims;
  const Dims& b = l.inputs[1].dims;
  if (gemm) return a.size() == 2 && b.size() == 2;
  if (a.size() < 2 || b.size() < 2) return false;  // 1-D operands: gemm_avx2 or ref
  if (l.present(2) && !isRowBias(l.inputs[2].dims, b.back())) return false;
  // Batches: B a single matrix, or A and B with equal known batch dims.
  Dims ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  if (!isStatic(bb)) return false;
  if (volume(bb) == 1) return true;
  return ab == bb;
}

std::unique_ptr<Kernel> createDnnlMatMul(const LayerDesc& l) { return std::make_unique<DnnlMatMulKernel>(l, false); }

std::unique_ptr<Kernel> createDnnlGemm(const LayerDesc& l) {
  auto k = std::make_unique<DnnlMatMulKernel>(l, true);
  GemmParams g(*l.attrs);
  // A constant C that is a single row (or value) becomes oneDNN's bias when no alpha scaling
  // sits between the product and the bias.
  if (l.present(2) && l.inputs[2].value.valid() && g.alpha == 1.f && isStatic(l.inputs[1].dims)) {
    const HostTensor& c = l.inputs[2].value;
    int64_t N = g.transB ? l.inputs[1].dims[0] : l.inputs[1].dims[1];
    bool row = c.count() == N && (c.dims().size() == 1 || c.dims()[0] == 1);
    if (row || c.count() == 1) {
      k->gemmBias_.resize(N);
      for (int64_t j = 0; j < N; ++j) k->gemmBias_[j] = g.beta * c.as<float>()[row ? j : 0];
    }
  }
  return k;
}
#endif

}  // namespace

namespace cpu {
KernelFactory matMulGemmAvx2() { return {supportsMatMulGemm, createMatMulGemm}; }
KernelFactory gemmAvx2() { return {supportsGemmGemm, createGemmGemm}; }
#ifdef KILN_HAVE_ONEDNN
KernelFactory oneDnnMatMul() { return {[](const LayerDesc& l) { return supportsDnnl(l, false); }, createDnnlMatMul}; }
KernelFactory oneDnnGemm() { return {[](const LayerDesc& l) { return supportsDnnl(l, true); }, createDnnlGemm}; }
#endif
}  // namespace cpu

}  // namespace kiln
