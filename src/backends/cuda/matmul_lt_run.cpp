// Shared execution path of the cuBLASLt matmul tactics (see matmul_lt_run.h).
#include "backends/cuda/matmul_lt_run.h"

#include <algorithm>
#include <memory>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/device_copy.h"
#include "ops/op_util.h"

namespace kiln::cuda {

namespace {

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

LtAct ltActOf(ActKind k) {
  if (k == ActKind::kRelu) return LtAct::kRelu;
  if (k == ActKind::kGeluTanh) return LtAct::kGeluTanh;  // cuBLASLt's GELU is the tanh approximation
  return LtAct::kNone;
}

//! Transposes `matrices` row-major [R,C] matrices of T into [C,R], in 32x32 tiles.
template <typename T>
void transposeMatrices(const T* src, T* dst, int64_t matrices, int64_t R, int64_t C) {
  constexpr int64_t kTile = 32;
  for (int64_t m = 0; m < matrices; ++m) {
    const T* s = src + m * R * C;
    T* d = dst + m * R * C;
    for (int64_t r0 = 0; r0 < R; r0 += kTile)
      for (int64_t c0 = 0; c0 < C; c0 += kTile)
        for (int64_t r = r0; r < std::min(R, r0 + kTile); ++r)
          for (int64_t c = c0; c < std::min(C, c0 + kTile); ++c) d[c * R + r] = s[r * C + c];
  }
}

}  // namespace

bool ltFusable(ActKind k) { return k == ActKind::kNone || k == ActKind::kRelu || k == ActKind::kGeluTanh; }

void splitBatch(GemmSetup& s, const Dims& aBatch, const Dims& bBatch, const Dims& batch) {
  GemmProblem& p = s.prob;
  const int64_t mk = p.M * p.K, kn = p.K * p.N, mn = p.M * p.N;
  std::vector<int64_t> aS = broadcastStrides(aBatch, batch), bS = broadcastStrides(bBatch, batch), dS = rowMajorStrides(batch);
  for (size_t d = 0; d < batch.size(); ++d) aS[d] *= mk, bS[d] *= kn, dS[d] *= mn;
  int64_t count = 1, sa = 0, sb = 0, sd = mn;
  size_t split = 0;  // batch dims [0, split) are launched one by one
  for (size_t d = batch.size(); d-- > 0;) {
    if (batch[d] == 1) continue;
    if (count == 1) {
      sa = aS[d], sb = bS[d], sd = dS[d], count = batch[d];
      continue;
    }
    if (aS[d] == sa * count && bS[d] == sb * count && dS[d] == sd * count) {
      count *= batch[d];
      continue;
    }
    split = d + 1;
    break;
  }
  p.batch = count;
  p.strideA = sa, p.strideB = sb, p.strideD = sd;
  Dims outer(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(split));
  int64_t launches = volume(outer);
  s.calls.clear();
  for (int64_t i = 0; i < launches; ++i) {
    LtCall c;
    int64_t rem = i;
    for (size_t d = split; d-- > 0;) {
      int64_t idx = rem % outer[d];
      rem /= outer[d];
      c.a += idx * aS[d], c.b += idx * bS[d], c.d += idx * dS[d];
    }
    s.calls.push_back(c);
  }
}

std::unique_ptr<LtState> buildLtState(GemmSetup s, int algoIndex, size_t& workspace) {
  auto st = std::make_unique<LtState>();
  workspace = 0;
  st->outCount = volume(s.outDims);
  st->setup = std::move(s);
  const GemmSetup& g = st->setup;
  if (g.empty) return st;
  auto postRowBias = [&](LtVariant& v) {
    setPostAddend(v.post, g.rowBiasDims, g.outDims, 1.f);
    v.postInput = g.rowBias;
  };
  auto postAddend = [&](LtVariant& v) {
    setPostAddend(v.post, g.addendDims, g.outDims, g.addScale);
    v.postInput = g.addend;
  };
  st->fast.post.hasGate = st->safe.post.hasGate = g.gate >= 0;
  if (g.zeroK) {  // no product: Y = act(addend)
    LtVariant& v = st->fast;
    v.post.zeroFirst = true;
    v.post.act = g.act;
    if (g.rowBias >= 0) postRowBias(v);
    else if (g.addend >= 0) postAddend(v);
    else if (g.fullC >= 0) {
      setPostAddend(v.post, g.outDims, g.outDims, g.prob.beta);  // same elements as the output
      v.postInput = g.fullC;
    }
    return st;
  }
  GemmProblem base = g.prob;
  base.useC = g.fullC >= 0;
  if (!base.useC) base.beta = 0.f;
  base.bias = false;
  base.act = LtAct::kNone;
  {  // fast: 16-byte aligned buffers, bias and Relu/GeluTanh fused by cuBLASLt
    GemmProblem p = base;
    LtVariant& v = st->fast;
    p.bias = g.rowBias >= 0;
    if (g.addend >= 0) postAddend(v);
    if (g.addend < 0 && ltFusable(g.act.kind)) p.act = ltActOf(g.act.kind);
    else v.post.act = g.act;
    v.plan = std::make_unique<LtPlan>(p, algoIndex, 16u, kLtMaxWorkspace);
  }
  {  // safe: any element-aligned buffers, everything but C in the post pass
    LtVariant& v = st->safe;
    if (g.rowBias >= 0) postRowBias(v);
    else if (g.addend >= 0) postAddend(v);
    v.post.act = g.act;
    try {
      v.plan = std::make_unique<LtPlan>(base, 0, static_cast<unsigned>(elementSize(base.type)), kLtMaxWorkspace);
    } catch (const UnsupportedError&) {
      v.plan.reset();  // execute refuses misaligned buffers then
    }
  }
  workspace = std::max(st->fast.plan->workspace(), st->safe.plan ? st->safe.plan->workspace() : size_t(0));
  return st;
}

void runLtState(LtState& st, const KernelIO& io, const void* bOverride, const void* aOverride, size_t workspaceOffset, void* dOverride) {
  const GemmSetup& g = st.setup;
  if (g.empty) return;
  const cudaStream_t stream = streamOf(io);
  const DataType type = g.prob.type;
  char* D = static_cast<char*>(dOverride ? dOverride : io.out[0].data);
  auto input = [&](int i) -> const void* { return i >= 0 ? io.in[static_cast<size_t>(i)].data : nullptr; };
  if (g.zeroK) {
    launchMatMulPost(type, D, st.outCount, input(st.fast.postInput), st.fast.post, stream, input(g.gate));
    return;
  }
  const int64_t es = static_cast<int64_t>(elementSize(type));
  if (g.prob.fp8 && g.calls.size() > 1) throw Error("cuBLASLt fp8 matmul: one launch only");  // offsets below count es-byte elements
  const char* A = static_cast<const char*>(aOverride ? aOverride : io.in[0].data);
  const char* B = static_cast<const char*>(bOverride ? bOverride : io.in[1].data);
  const char* C = static_cast<const char*>(input(g.fullC));
  const void* bias = input(g.rowBias);
  bool ok = !bias || aligned16(bias);
  for (const LtCall& c : g.calls)
    ok = ok && aligned16(A + c.a * es) && aligned16(B + c.b * es) && aligned16(D + c.d * es) && (!C || aligned16(C + c.d * es));
  if (!ok && !st.safe.plan) throw Error("cuBLASLt matmul: buffers are not 16-byte aligned and no element-aligned algorithm exists");
  LtVariant& v = ok ? st.fast : st.safe;
  if (workspaceOffset > io.workspaceSize || v.plan->workspace() > io.workspaceSize - workspaceOffset)
    throw Error("cuBLASLt matmul: workspace of " + std::to_string(io.workspaceSize - std::min(workspaceOffset, io.workspaceSize)) +
                " bytes, " + std::to_string(v.plan->workspace()) + " needed");
  void* ws = static_cast<char*>(io.workspace) + workspaceOffset;
  for (const LtCall& c : g.calls)
    v.plan->run(A + c.a * es, B + c.b * es, C ? C + c.d * es : nullptr, D + c.d * es, bias, ws, stream);
  launchMatMulPost(type, D, st.outCount, input(v.postInput), v.post, stream, input(g.gate));
}

DeviceWeights::DeviceWeights(const HostTensor& value, int64_t matrices, int64_t K, int64_t N, bool transposed) {
  Packer pack;
  if (!transposed && K > 1 && N > 1)
    pack = [matrices, K, N](const HostTensor& w) {
      HostTensor packed(w.type(), w.dims());
      const size_t es = elementSize(w.type());
      if (es == 4) transposeMatrices(w.as<uint32_t>(), packed.as<uint32_t>(), matrices, K, N);
      else if (es == 2) transposeMatrices(w.as<uint16_t>(), packed.as<uint16_t>(), matrices, K, N);
      else if (es == 1) transposeMatrices(w.as<uint8_t>(), packed.as<uint8_t>(), matrices, K, N);  // float8 codes
      else throw UnsupportedError(std::string("cuBLASLt matmul: weights of type ") + toString(w.type()));
      return packed;
    };
  // The packing's name holds the geometry: the same buffer read as other matrices is another copy.
  const std::string packing = "matmul:" + std::to_string(matrices) + "x" + std::to_string(K) + "x" + std::to_string(N) +
                              (transposed ? ":nk" : ":kn");
  copy_ = sharedDeviceCopy(value, packing, pack);  // null for empty weights (a zero-size product)
}

}  // namespace kiln::cuda
