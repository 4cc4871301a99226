// oneDNN convolution tactics (built only with KILN_HAVE_ONEDNN):
// - "onednn": src/dst stay in kiln's plain NCHW layout; oneDNN picks the weights layout
//   (format_tag::any), the weights are reordered once.
// - "onednn_blocked": src/dst layouts are also oneDNN's choice (blocked nChw8c/16c); X is
//   reordered in and Y out inside the kernel. Faster convolutions, paid for by two reorders:
//   the builder times both. When the layer's kiln_layout_in / kiln_layout_out attributes say
//   that X / Y (and R) are exchanged in a blocked layout (conv_layout.h, set by the CPU layout
//   pass), a reorder is only done where that layout differs from the one oneDNN chose, so chains
//   of convolutions in oneDNN's own layout run without any reorder.
// Bias, the residual (sum post-op) and the fused activation (eltwise post-op) run inside the
// primitive (HardSigmoid as linear + clip post-ops); an activation with no oneDNN equivalent would
// run afterwards, on the same threads.
//
// Threads: oneDNN (Debian build) runs on its own OpenMP runtime. execute() sets the OpenMP thread
// count of the calling thread to io.pool->size(), so a layer uses as many threads as any other
// kiln kernel, and the backend's ThreadPool runs kiln's own loops on that same OpenMP team
// (openmp_team.h), so oneDNN and kiln never take turns on the cores. OMP_WAIT_POLICY=passive
// would stop the team's spinning between layers but make every call pay a futex wake-up
// (MobileNetV2 ~35% slower). Primitive descriptors are created at reshape, under the
// process-wide OpenMP default thread count.
// Concurrency: every context gets its own primitive, stream and memory objects (KernelState);
// the scratchpad is user-managed and lives in the context's workspace, so contexts never share
// mutable oneDNN state. Only the reordered weights are shared (read-only).
#include "backends/cpu/conv_cpu_common.h"
#include "ops/conv_layout.h"

#ifdef KILN_HAVE_ONEDNN
#include <dlfcn.h>

#include <cstring>
#include <string>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include "backends/cpu/onednn_common.h"
#include "backends/cpu/gemm.h"
#include "core/thread_pool.h"
#include "ops/fused_attrs.h"
#include "ops/op_util.h"

namespace kiln::cpu {

namespace {

using dnnl::memory;
using Tag = dnnl::memory::format_tag;

Tag plainDataTag(size_t rank) { return rank == 3 ? Tag::ncw : rank == 4 ? Tag::nchw : Tag::ncdhw; }
//! The tag of a 4-D tensor exchanged in layout block `block` (conv_layout.h), or of a plain one.
Tag exchangeTag(size_t rank, int64_t block) {
  if (block == 8) return Tag::nChw8c;
  if (block == 16) return Tag::nChw16c;
  return plainDataTag(rank);
}
Tag plainWeightsTag(size_t rank, bool grouped) {
  if (grouped) return rank == 3 ? Tag::goiw : rank == 4 ? Tag::goihw : Tag::goidhw;
  return rank == 3 ? Tag::oiw : rank == 4 ? Tag::oihw : Tag::oidhw;
}

size_t alignUp(size_t n) { return (n + 63) / 64 * 64; }

//! Whether `d` describes the 4-D tensor `dims` as plain NCHW or channel-blocked (nChw8c / nChw16c
//! with C a multiple of the block): without padding channels.
bool denseChannels(const memory::desc& d, const memory::dims& dims) {
  if (dims.size() != 4) return false;
  const auto f32 = memory::data_type::f32;
  if (d == memory::desc(dims, f32, Tag::nchw)) return true;
  for (int64_t b : {8, 16})
    if (dims[1] % b == 0 && d == memory::desc(dims, f32, exchangeTag(4, b))) return true;
  return false;
}

//! Whether `a` and `b` place every element of `dims` at the same byte: equal, or both dense (plain
//! or blocked) with one pixel per channel (H = W = 1: a squeeze-excitation vector [N, C, 1, 1],
//! whose bytes are the same in every such layout, so no reorder is needed between them).
bool sameBytes(const memory::desc& a, const memory::desc& b, const memory::dims& dims) {
  if (a == b) return true;
  return dims.size() == 4 && dims[2] == 1 && dims[3] == 1 && denseChannels(a, dims) && denseChannels(b, dims);
}

//! The oneDNN view of one concrete Conv problem.
struct DnnlConvShapes {
  memory::dims src, weights, bias, dst, strides, dilates, padL, padR;
};

DnnlConvShapes dnnlShapes(const ConvProblem& p, size_t rank) {
  DnnlConvShapes s;
  const Window3& w = p.win;
  const size_t spatial = rank - 2, off = 3 - spatial;
  s.src = {p.batch, p.inChannels};
  s.dst = {p.batch, p.outChannels};
  if (p.group > 1) s.weights = {p.group, p.outChannelsPerGroup(), p.inChannelsPerGroup()};
  else s.weights = {p.outChannels, p.inChannels};
  s.bias = {p.outChannels};
  for (size_t i = off; i < 3; ++i) {
    s.src.push_back(w.in[i]);
    s.dst.push_back(w.out[i]);
    s.weights.push_back(w.kernel[i]);
    s.strides.push_back(w.stride[i]);
    s.dilates.push_back(w.dilation[i] - 1);
    s.padL.push_back(w.padBegin[i]);
    // oneDNN wants the end padding that makes its output-size formula give our output size.
    s.padR.push_back((w.out[i] - 1) * w.stride[i] + (w.kernel[i] - 1) * w.dilation[i] + 1 - w.in[i] - w.padBegin[i]);
  }
  return s;
}

//! A primitive descriptor plus the weights reordered into the layout it chose.
struct Prepared {
  dnnl::convolution_forward::primitive_desc pd;
  memory weights;
  memory bias;
  bool eltwiseInPrimitive = false;
};

class OneDnnConvKernel : public Kernel {
 public:
  OneDnnConvKernel(const LayerDesc& l, bool blocked)
      : k_(convConstants(l)),
        residual_(l.present(3)),
        blocked_(blocked),
        rank_(l.inputs[0].dims.size()),
        inBlock_(inLayoutBlock(l)),
        outBlock_(outLayoutBlock(l)) {
    if (inBlock_ < 1 || outBlock_ < 1 || (!blocked_ && (inBlock_ != 1 || outBlock_ != 1)))
      opError(l, "the onednn tactic cannot exchange tensors in the layouts this layer asks for");
    bool staticShape = isStatic(l.inputs[0].dims) && isStatic(l.inputs[1].dims);
    // Weights are reordered once here for the build-time shape; reshape reuses them when the
    // concrete shape leads oneDNN to the same layouts. (For odd shapes oneDNN may fall back to
    // its slow reference implementation: still correct, and the builder's timing ranks it.)
    if (staticShape) cached_ = std::make_shared<Prepared>(prepare(resolveConv(l)));
  }

  struct State : KernelState {
    std::shared_ptr<const Prepared> prep;
    dnnl::convolution_forward conv;
    dnnl::reorder srcIn, dstOut, resIn;  // blocked variant only
    memory src, dst, scratch, userSrc, userDst, userRes;
    std::unordered_map<int, memory> args;
    dnnl::stream stream;
    size_t scratchBytes = 0, srcBytes = 0, dstBytes = 0;
    bool reorderSrc = false, reorderDst = false;  // blocked variant: the exchanged layout differs from oneDNN's
    int64_t outRows = 0, outCols = 0;
  };

  size_t reshape(const LayerDesc& concrete, std::unique_ptr<KernelState>& state) const override {
    ConvProblem p = resolveConv(concrete);
    auto s = std::make_unique<State>();
    // oneDNN's primitive cache keys a primitive by its op, attributes, implementation and the
    // calling thread's OpenMP max-threads at primitive creation, not by the thread count its
    // primitive_desc was made for; and a primitive_desc made where the cache holds such a
    // primitive is that primitive's. A primitive made from a primitive_desc of another thread
    // count (cached_'s, made on the thread that built or loaded the engine; a context's thread
    // may have another OpenMP max-threads, e.g. a new std::thread's is the process default, not
    // the pool size that execute sets) can be a cached one set up for more threads, which needs
    // a larger scratchpad than that primitive_desc books: its threads write past the workspace.
    // So the primitive is made from a primitive_desc made here, and every size and layout below
    // is taken from the primitive's own primitive_desc.
    s->conv = dnnl::convolution_forward(makePd(p));
    const dnnl::convolution_forward::primitive_desc pd(const_cast<dnnl_primitive_desc_t>(s->conv.get_primitive_desc()));
    if (cached_ && cached_->pd.weights_desc() == pd.weights_desc())
      s->prep = cached_;  // the weights reordered at create time suit this primitive
    else
      s->prep = std::make_shared<Prepared>(prepare(p, pd));
    const auto& pp = *s->prep;
    auto& eng = oneDnnEngine();
    s->stream = dnnl::stream(eng);
    s->scratchBytes = alignUp(pd.scratchpad_desc().get_size());
    s->src = memory(pd.src_desc(), eng, DNNL_MEMORY_NONE);
    s->dst = memory(pd.dst_desc(), eng, DNNL_MEMORY_NONE);
    s->scratch = memory(pd.scratchpad_desc(), eng, DNNL_MEMORY_NONE);
    DnnlConvShapes sh = dnnlShapes(p, rank_);
    if (blocked_) {
      // X, Y and R as the neighbouring layers exchange them; reordered only where oneDNN chose
      // another layout.
      memory::desc userSrc(sh.src, memory::data_type::f32, exchangeTag(rank_, inBlock_));
      memory::desc userDst(sh.dst, memory::data_type::f32, exchangeTag(rank_, outBlock_));
      s->reorderSrc = !sameBytes(userSrc, pd.src_desc(), sh.src);
      s->reorderDst = !sameBytes(userDst, pd.dst_desc(), sh.dst);
      s->userSrc = memory(userSrc, eng, DNNL_MEMORY_NONE);
      s->userDst = memory(userDst, eng, DNNL_MEMORY_NONE);
      s->userRes = memory(userDst, eng, DNNL_MEMORY_NONE);
      if (s->reorderSrc) {
        s->srcIn = dnnl::reorder(s->userSrc, s->src);
        s->srcBytes = alignUp(pd.src_desc().get_size());
      }
      if (s->reorderDst) {
        s->dstOut = dnnl::reorder(s->dst, s->userDst);
        s->resIn = dnnl::reorder(s->userRes, s->dst);
        s->dstBytes = alignUp(pd.dst_desc().get_size());
      }
    }
    s->args = {{DNNL_ARG_SRC, s->src}, {DNNL_ARG_WEIGHTS, pp.weights}, {DNNL_ARG_DST, s->dst},
               {DNNL_ARG_SCRATCHPAD, s->scratch}};
    if (pp.bias) s->args[DNNL_ARG_BIAS] = pp.bias;
    s->outRows = p.batch * p.outChannels;
    s->outCols = p.win.outSize();
    size_t bytes = s->scratchBytes + s->srcBytes + s->dstBytes;
    state = std::move(s);
    return bytes;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    auto& s = *static_cast<State*>(state);
    setOneDnnThreads(io.pool->size());
    auto* ws = static_cast<uint8_t*>(io.workspace);
    const float* res = residualOf(io);
    float* y = io.out[0].as<float>();
    s.scratch.set_data_handle(ws);
    if (s.reorderSrc) {
      s.userSrc.set_data_handle(io.in[0].data);
      s.src.set_data_handle(ws + s.scratchBytes);
      s.srcIn.execute(s.stream, s.userSrc, s.src);
    } else {
      s.src.set_data_handle(io.in[0].data);
    }
    if (s.reorderDst) {
      s.userDst.set_data_handle(y);
      s.dst.set_data_handle(ws + s.scratchBytes + s.srcBytes);
      if (res) {
        s.userRes.set_data_handle(const_cast<float*>(res));
        s.resIn.execute(s.stream, s.userRes, s.dst);
      }
    } else {
      s.dst.set_data_handle(y);
      // The sum post-op reads the residual from Y (R is in Y's layout). (A binary-add post-op
      // reading R directly was measured 3-5x slower in oneDNN 2.6's gemm convolution than this
      // copy + sum.)
      if (res && res != y) std::memcpy(y, res, sizeof(float) * s.outRows * s.outCols);
    }
    s.conv.execute(s.stream, s.args);
    if (s.reorderDst) s.dstOut.execute(s.stream, s.dst, s.userDst);
    s.stream.wait();
    // Elementwise, so right in any layout (a blocked Y has no padding channels).
    if (!s.prep->eltwiseInPrimitive && k_.act.kind != ActKind::kNone) {
      GemmEpilogue ep;
      ep.act = k_.act;
      io.pool->parallelFor(s.outRows, 1, [&](int64_t b, int64_t e) { applyEpilogue(ep, y, s.outCols, b, e, 0, s.outCols); });
    }
  }

 private:
  //! The blocked variant computes X / Y directly in the blocked layouts they are exchanged in
  //! (no reorder) unless oneDNN has only its reference implementation for them; plain ones are
  //! left to oneDNN's choice (and reordered).
  dnnl::convolution_forward::primitive_desc makePd(const ConvProblem& p) const {
    if (blocked_ && (inBlock_ > 1 || outBlock_ > 1)) {
      auto pd = makePd(p, inBlock_ > 1 ? exchangeTag(rank_, inBlock_) : Tag::any,
                       outBlock_ > 1 ? exchangeTag(rank_, outBlock_) : Tag::any);
      if (std::string(pd.impl_info_str()).rfind("ref", 0) != 0) return pd;
    }
    Tag dataTag = blocked_ ? Tag::any : plainDataTag(rank_);
    return makePd(p, dataTag, dataTag);
  }

  dnnl::convolution_forward::primitive_desc makePd(const ConvProblem& p, Tag srcTag, Tag dstTag) const {
    DnnlConvShapes sh = dnnlShapes(p, rank_);
    const auto f32 = memory::data_type::f32;
    memory::desc src(sh.src, f32, srcTag), dst(sh.dst, f32, dstTag), wei(sh.weights, f32, Tag::any);
    auto alg0 = dnnl::algorithm::convolution_direct;
    auto prop = dnnl::prop_kind::forward_inference;
    // The post-ops too: oneDNN refuses some activation parameters (a tampered plan's alpha = inf).
    try {
      dnnl::post_ops po;
      if (residual_) po.append_sum(1.f);  // Y holds the residual before the primitive runs
      appendOneDnnActivation(po, k_.act);
      dnnl::primitive_attr attr;
      attr.set_post_ops(po);
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      if (k_.bias.valid()) {
        memory::desc bias(sh.bias, f32, Tag::x);
        return {{prop, alg0, src, wei, bias, dst, sh.strides, sh.dilates, sh.padL, sh.padR}, attr, oneDnnEngine()};
      }
      return {{prop, alg0, src, wei, dst, sh.strides, sh.dilates, sh.padL, sh.padR}, attr, oneDnnEngine()};
    } catch (const dnnl::error& e) {
      throw Error(std::string("oneDNN cannot create this convolution: ") + e.what());
    }
  }

  Prepared prepare(const ConvProblem& p) const { return prepare(p, makePd(p)); }

  //! The weights (and bias) reordered into the layout `pd` chose.
  Prepared prepare(const ConvProblem& p, const dnnl::convolution_forward::primitive_desc& pd) const {
    try {
      return prepareOrThrow(p, pd);
    } catch (const dnnl::error& e) {
      throw Error(std::string("oneDNN convolution setup failed: ") + e.what());
    }
  }

  Prepared prepareOrThrow(const ConvProblem& p, const dnnl::convolution_forward::primitive_desc& pd) const {
    Prepared r{pd, {}, {}, false};
    dnnl::post_ops probe;
    r.eltwiseInPrimitive = appendOneDnnActivation(probe, k_.act);
    auto& eng = oneDnnEngine();
    DnnlConvShapes sh = dnnlShapes(p, rank_);
    memory::desc userWei(sh.weights, memory::data_type::f32, plainWeightsTag(rank_, p.group > 1));
    memory user(userWei, eng, const_cast<void*>(k_.weights.data()));
    r.weights = memory(r.pd.weights_desc(), eng);
    dnnl::stream st(eng);
    dnnl::reorder(user, r.weights).execute(st, user, r.weights);
    if (k_.bias.valid()) {
      r.bias = memory(r.pd.bias_desc(), eng);
      std::memcpy(r.bias.get_data_handle(), k_.bias.data(), k_.bias.bytes());
    }
    st.wait();
    return r;
  }

  ConvConstants k_;
  bool residual_;
  bool blocked_;
  size_t rank_;
  int64_t inBlock_, outBlock_;  // layouts X / Y (and R) are exchanged in (1: plain)
  std::shared_ptr<const Prepared> cached_;
};

bool supportsOneDnn(const LayerDesc& l) { return isPlainFloatConv(l); }

//! Plain layouts, or 2-D convolutions exchanging X / Y in nChw8c / nChw16c with C (and M) a
//! multiple of the block.
bool supportsOneDnnBlocked(const LayerDesc& l) {
  if (isPlainFloatConv(l)) return true;
  if (!isFloatConv(l) || l.inputs[0].dims.size() != 4) return false;
  const int64_t inBlock = inLayoutBlock(l), outBlock = outLayoutBlock(l);
  if (inBlock < 1 || outBlock < 1) return false;
  return l.inputs[0].dims[1] % inBlock == 0 && l.inputs[1].dims[0] > 0 && l.inputs[1].dims[0] % outBlock == 0;
}

std::unique_ptr<Kernel> createPlain(const LayerDesc& l) { return std::make_unique<OneDnnConvKernel>(l, false); }
std::unique_ptr<Kernel> createBlocked(const LayerDesc& l) { return std::make_unique<OneDnnConvKernel>(l, true); }

}  // namespace

int64_t preferredChannelBlock() {
  static const int64_t block = []() -> int64_t {
    // The widest block oneDNN has a JIT (non-reference) convolution for: probed on a typical
    // mid-network convolution (64 -> 64, 3x3, 56x56).
    for (int64_t b : {16, 8}) {
      try {
        const auto f32 = memory::data_type::f32;
        const memory::dims data{1, 64, 56, 56};
        memory::desc src(data, f32, exchangeTag(4, b)), dst(data, f32, exchangeTag(4, b)),
            wei({64, 64, 3, 3}, f32, Tag::any);
        dnnl::convolution_forward::primitive_desc pd(
            {dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, wei, dst, {1, 1}, {0, 0},
             {1, 1}, {1, 1}},
            oneDnnEngine());
        if (std::string(pd.impl_info_str()).rfind("ref", 0) != 0) return b;
      } catch (const dnnl::error&) {
      }
    }
    return 0;
  }();
  return block;
}

KernelFactory oneDnnConv() { return {supportsOneDnn, createPlain}; }
KernelFactory oneDnnConvBlocked() { return {supportsOneDnnBlocked, createBlocked}; }

}  // namespace kiln::cpu

#else  // !KILN_HAVE_ONEDNN

namespace kiln::cpu {
int64_t preferredChannelBlock() { return 0; }  // no tactic handles blocked layouts
}  // namespace kiln::cpu

#endif
