// "attention_half_cudnn_sdpa": Attention through cuDNN's fused scaled-dot-product-attention (the
// frontend's graph API, flash-attention engines tuned for Hopper), one more tactic that the
// builder times against our flash kernels (attention_cuda.cpp). float16/bfloat16 Q/K/V as
// [B, H, S, D], 3-D [B, S, H*D] or strided views (no head transposes); query heads a multiple of
// the K/V heads (GQA/MQA: cuDNN maps them itself); equal Q/K and V head sizes, multiples of 8 up
// to 256 on Hopper (128 elsewhere: the frontend's limits); scale; is_causal (top-left aligned, as
// ONNX); an attn_mask only when it is a build-time constant that leaves every query row a key
// (attention_bias.h), as a dense bias the kernel uploads once. A runtime mask could hide a whole
// row, and there our kernels' zeros (what the exporters' NaN guard asks for) are not what cuDNN
// computes; except a runtime bias the fusion proved bounded (kiln_mask_bias: T5's relative
// position bias of a dynamic export), [B|1, H|1, Sq, Skv] in Q's type, read in place each run.
// The graph is built once per shape (reshape); execute only enqueues its plan.
// Runtime bool key flags [B|1, 1, 1, Skv] (the attention fusion's key-padding rewrite of the
// transformers' masks, with or without is_causal / kiln_mask_fill): cuDNN's padding mask, with
// the key lengths counted on the device per run (attention_keypad_lengths.cu). That is exact for
// right-padded rows with a kept key; the flash kernel runs after cuDNN as the fallback and
// recomputes the batches whose flags are not (left padding, holes, all false), skipping the rest.
#include "backends/cuda/cuda_tactics.h"

#ifdef KILN_HAVE_CUDNN_FRONTEND
#include <cudnn_frontend.h>

#include <cmath>
#include <string>

#include "backends/cuda/attention_bias.h"
#include "backends/cuda/attention_fallback.h"
#include "backends/cuda/attention_flash.h"
#include "backends/cuda/attention_geometry.h"
#include "backends/cuda/attention_keypad_lengths.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/cudnn_handle.h"
#include "backends/cuda/device_copy.h"
#include "ops/attention_config.h"
#endif

namespace kiln {

#ifdef KILN_HAVE_CUDNN_FRONTEND

namespace {

namespace fe = cudnn_frontend;
enum Uid : int64_t { kUidQ = 1, kUidK = 2, kUidV = 3, kUidO = 4, kUidBias = 5, kUidSeqQ = 6, kUidSeqKv = 7 };
constexpr int kMaxUids = 7;
// Dense biases above this many elements are left to the flash kernels (64 MiB in float16).
constexpr int64_t kMaxBiasElements = int64_t(1) << 25;

struct SdpaState : KernelState {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t plan = 0;
  std::vector<int64_t> uids;
  int64_t offset[3] = {0, 0, 0};  //!< Q/K/V strided views: bytes into the buffers
  // Key flags: the lengths and per-row "right padded" ints live in the workspace after cuDNN's.
  size_t cudnnWorkspace = 0;
  int batch = 0, rows = 0, sq = 0, skv = 0;
  int64_t maskStrideB = 0;
  std::unique_ptr<KernelState> fallback;  //!< the flash kernel's state
};

//! Whether `l`'s attn_mask is runtime bool key flags [B|1, 1, 1, Skv] (dims may be unknown).
bool keyFlagsMask(const LayerDesc& l) {
  const TensorDesc& m = l.inputs[cuda::kAttnMask];
  if (m.type != DataType::kBOOL || m.value.valid() || m.dims.empty() || m.dims.size() > 4) return false;
  const cuda::MaskLayout ml = cuda::maskLayout(m.dims);
  const int64_t skv = l.inputs[cuda::kAttnK].dims.size() == 4 ? l.inputs[cuda::kAttnK].dims[2] : -1;
  return ml.dims4[1] == 1 && ml.dims4[2] == 1 && (skv < 0 || ml.len < 0 || ml.len == skv);
}

//! Whether `l`'s attn_mask is a runtime bias the attention fusion proved bounded (kiln_mask_bias:
//! it masks no key, so no row is fully masked), in Q's type: cuDNN reads it as its bias per run.
bool runtimeBiasMask(const LayerDesc& l) {
  const TensorDesc& m = l.inputs[cuda::kAttnMask];
  return l.attrs->getInt(kAttentionMaskBiasAttr, 0) == 1 && !m.value.valid() && m.type == l.inputs[cuda::kAttnQ].type &&
         m.dims.size() >= 2 && m.dims.size() <= 4;
}

void check(fe::error_t e, const LayerDesc& l, const char* what) { cuda::checkCudnn(e, l, std::string("SDPA ") + what); }

//! [B, H, Sq, Skv] of the scores; empty when a size is unknown.
Dims scoreDims(const cuda::AttentionGeometry& g) {
  const Dims d{g.q[0], g.q[1], g.q[2], g.k[2]};
  for (int64_t x : d)
    if (x <= 0) return {};
  return d;
}

class CudnnSdpaKernel : public Kernel {
 public:
  explicit CudnnSdpaKernel(const LayerDesc& l) {
    if (!l.present(cuda::kAttnMask)) return;
    if (keyFlagsMask(l)) {
      fallback_ = cuda::makeFlashTcFallback(l, 4);
      if (!fallback_) throw UnsupportedError("layer '" + l.name + "' (Attention): no flash fallback for cuDNN SDPA's key padding");
      return;
    }
    const HostTensor& m = l.inputs[cuda::kAttnMask].value;
    if (!m.valid() && runtimeBiasMask(l)) {
      runtimeBias_ = true;
      return;
    }
    biasTarget_ = scoreDims(cuda::attentionGeometry(l));
    if (!m.valid() || biasTarget_.empty()) throw UnsupportedError("layer '" + l.name + "' (Attention): cuDNN SDPA takes only a constant attn_mask");
    const DataType t = l.inputs[cuda::kAttnQ].type;
    const Dims target = biasTarget_;
    bias_ = cuda::sharedDeviceCopy(m, std::string("sdpa_bias:") + toString(t) + toString(target),
                                   [target, t](const HostTensor& src) { return cuda::denseSdpaBias(src, target, t); });
    biasDims_ = cuda::sdpaBiasDims(m.dims(), target);
  }

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const cuda::AttentionGeometry geo = cuda::attentionGeometry(l);
    if (bias_ && scoreDims(geo) != biasTarget_)
      throw UnsupportedError("layer '" + l.name + "' (Attention): the cuDNN SDPA bias was made for scores " + toString(biasTarget_));
    const DataType type = l.inputs[cuda::kAttnQ].type;
    const fe::DataType_t io = type == DataType::kHALF ? fe::DataType_t::HALF : fe::DataType_t::BFLOAT16;
    const Attributes& a = *l.attrs;
    const double d = static_cast<double>(geo.q[3]);
    const float scale = a.has("scale") ? a.getFloat("scale", 0.f) : static_cast<float>(1.0 / std::sqrt(d));
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
    auto tensor = [&](const char* name, int64_t uid, const Dims& dims, const cuda::FlashStrides& s) {
      return g->tensor(fe::graph::Tensor_attributes()
                           .set_name(name)
                           .set_uid(uid)
                           .set_dim(std::vector<int64_t>(dims.begin(), dims.end()))
                           .set_stride({s.b, s.h, s.row, 1})
                           .set_data_type(io));
    };
    auto q = tensor("Q", kUidQ, geo.q, geo.qs);
    auto k = tensor("K", kUidK, geo.k, geo.ks);
    auto v = tensor("V", kUidV, geo.v, geo.vs);
    auto attrs = fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(false).set_attn_scale(scale);
    if (a.getInt("is_causal", 0) != 0) attrs.set_causal_mask(true);
    auto st = std::make_unique<SdpaState>();
    if (fallback_) {
      const cuda::MaskLayout ml = cuda::maskLayout(l.inputs[cuda::kAttnMask].dims);
      if (ml.strideH != 0 || ml.strideQ != 0 || ml.len != geo.k[2])
        throw UnsupportedError("layer '" + l.name + "' (Attention): attn_mask " + toString(l.inputs[cuda::kAttnMask].dims) +
                               " is not key flags for cuDNN's padding mask");
      st->batch = static_cast<int>(geo.q[0]), st->sq = static_cast<int>(geo.q[2]), st->skv = static_cast<int>(geo.k[2]);
      st->maskStrideB = ml.strideB;
      st->rows = ml.strideB != 0 ? st->batch : 1;
      auto lengths = [&](const char* name, int64_t uid) {
        return g->tensor(fe::graph::Tensor_attributes()
                             .set_name(name)
                             .set_uid(uid)
                             .set_dim({geo.q[0], 1, 1, 1})
                             .set_stride({1, 1, 1, 1})
                             .set_data_type(fe::DataType_t::INT32));
      };
      attrs.set_padding_mask(true).set_seq_len_q(lengths("seq_q", kUidSeqQ)).set_seq_len_kv(lengths("seq_kv", kUidSeqKv));
      fallback_->reshape(l, st->fallback);
    }
    Dims runtimeDims;  // the runtime bias at this shape: [B|1, H|1, Sq, Skv], dense
    if (runtimeBias_) {
      const Dims& md = l.inputs[cuda::kAttnMask].dims;
      const Dims target = scoreDims(geo);
      runtimeDims = Dims(4 - md.size(), 1);
      runtimeDims.insert(runtimeDims.end(), md.begin(), md.end());
      if (target.empty() || runtimeDims[2] != target[2] || runtimeDims[3] != target[3] ||
          (runtimeDims[0] != 1 && runtimeDims[0] != target[0]) || (runtimeDims[1] != 1 && runtimeDims[1] != target[1]))
        throw UnsupportedError("layer '" + l.name + "' (Attention): attn_mask " + toString(md) + " is not a [B|1, H|1, Sq, Skv] bias for scores " +
                               toString(target));
    }
    if (bias_ || runtimeBias_) {
      const Dims& bd = bias_ ? biasDims_ : runtimeDims;
      auto bias = g->tensor(fe::graph::Tensor_attributes()
                                .set_name("Bias")
                                .set_uid(kUidBias)
                                .set_dim(std::vector<int64_t>(bd.begin(), bd.end()))
                                .set_stride({bd[1] * bd[2] * bd[3], bd[2] * bd[3], bd[3], 1})
                                .set_data_type(io));
      attrs.set_bias(bias);
    }
    auto [o, stats] = g->sdpa(q, k, v, attrs);
    (void)stats;
    o->set_output(true).set_uid(kUidO).set_dim(std::vector<int64_t>(geo.o.begin(), geo.o.end()))
        .set_stride({geo.os.b, geo.os.h, geo.os.row, 1});
    cuda::CudnnHandle& h = cuda::cudnnHandle();
    std::lock_guard<std::mutex> lock(h.mu);
    check(g->validate(), l, "validate");
    check(g->build_operation_graph(h.h), l, "operation graph");
    check(g->create_execution_plans({fe::HeurMode_t::A}), l, "execution plans");
    check(g->check_support(h.h), l, "support");
    int64_t chosen = -1;
    for (int64_t i = 0; i < g->get_execution_plan_count() && chosen < 0; ++i)
      if (g->build_plan_at_index(i).is_good()) chosen = i;
    if (chosen < 0) throw UnsupportedError("layer '" + l.name + "' (Attention): no cuDNN SDPA engine builds");
    check(g->prepare_variant_pack_template(), l, "variant pack");
    int64_t ws = 0;
    check(g->get_workspace_size_plan_at_index(chosen, ws), l, "workspace size");
    std::unique_ptr<SdpaState> s = std::move(st);
    s->graph = g;
    s->plan = chosen;
    s->uids = g->get_variant_pack_uids_sorted();
    const int64_t es = static_cast<int64_t>(elementSize(type));
    s->offset[0] = geo.qOffset * es, s->offset[1] = geo.kOffset * es, s->offset[2] = geo.vOffset * es;
    s->cudnnWorkspace = (static_cast<size_t>(std::max<int64_t>(ws, 0)) + 255) / 256 * 256;
    const size_t extra = fallback_ ? (2 * static_cast<size_t>(s->batch) + static_cast<size_t>(s->rows)) * sizeof(int32_t) : 0;
    const size_t total = s->cudnnWorkspace + extra;
    state = std::move(s);
    return total;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    auto* s = static_cast<SdpaState*>(state);
    int32_t *seqQ = nullptr, *seqKv = nullptr, *rightPadded = nullptr;
    if (fallback_) {
      if (s->batch == 0 || s->sq == 0) return;
      seqQ = reinterpret_cast<int32_t*>(static_cast<char*>(io.workspace) + s->cudnnWorkspace);
      seqKv = seqQ + s->batch;
      rightPadded = seqKv + s->batch;
      cuda::launchKeyPadLengths(io.in[cuda::kAttnMask].data, s->maskStrideB, s->batch, s->skv, s->sq, seqQ, seqKv, rightPadded,
                                cuda::streamOf(io));
    }
    void* ptrs[kMaxUids];
    int n = 0;
    for (int64_t uid : s->uids) {
      if (n == kMaxUids) throw Error("cuDNN SDPA: unexpected tensor uid " + std::to_string(uid));
      switch (uid) {
        case kUidQ: ptrs[n++] = static_cast<char*>(io.in[cuda::kAttnQ].data) + s->offset[0]; break;
        case kUidK: ptrs[n++] = static_cast<char*>(io.in[cuda::kAttnK].data) + s->offset[1]; break;
        case kUidV: ptrs[n++] = static_cast<char*>(io.in[cuda::kAttnV].data) + s->offset[2]; break;
        case kUidO: ptrs[n++] = io.out[0].data; break;
        case kUidBias: ptrs[n++] = bias_ ? const_cast<void*>(bias_->ptr) : const_cast<void*>(io.in[cuda::kAttnMask].data); break;
        case kUidSeqQ: ptrs[n++] = seqQ; break;
        case kUidSeqKv: ptrs[n++] = seqKv; break;
        default: throw Error("cuDNN SDPA: unexpected tensor uid " + std::to_string(uid));
      }
    }
    cuda::executeCudnnPlan(*s->graph, s->plan, ptrs, n, io.workspace, cuda::streamOf(io), "cuDNN SDPA");
    if (fallback_) {  // the batches whose flags are not right-padded (its other blocks return at once)
      cuda::setFlashSkip(s->fallback.get(), rightPadded);
      fallback_->execute(io, s->fallback.get());
    }
  }

  bool holdsInput(size_t i) const override { return i == cuda::kAttnMask && bias_; }

 private:
  std::shared_ptr<const cuda::DeviceCopy> bias_;  //!< the dense bias of a constant attn_mask
  std::unique_ptr<Kernel> fallback_;              //!< key flags: the flash kernel for rows cuDNN cannot express
  bool runtimeBias_ = false;                      //!< a runtime bias (kiln_mask_bias), read from the input each run
  Dims biasTarget_, biasDims_;                    //!< the scores it was made for, its own dims
};

//! Whether cuDNN may take the attn_mask of `l` as its bias: a float or bool constant whose dense
//! bias is not too large and leaves every query row a key.
bool maskAsBias(const LayerDesc& l) {
  const TensorDesc& m = l.inputs[cuda::kAttnMask];
  if (!m.value.valid() || cuda::flashMaskOf(m.type) == cuda::FlashMask::kNone) return false;
  Dims target;
  try {
    target = scoreDims(cuda::attentionGeometry(l));
  } catch (const Error&) {
    return false;
  }
  const Dims bd = target.empty() ? Dims{} : cuda::sdpaBiasDims(m.value.dims(), target);
  if (bd.empty() || bd[0] * bd[1] * bd[2] * bd[3] > kMaxBiasElements) return false;
  return cuda::sdpaMaskLeavesRowsOpen(m.value, target, l.attrs->getInt("is_causal", 0) != 0);
}

bool supportsCudnnSdpa(const LayerDesc& l) {
  if (l.inputs.size() < 3 || l.outputs.size() != 1) return false;
  for (size_t i = cuda::kAttnMask + 1; i < l.inputs.size(); ++i)
    if (l.present(i)) return false;  // KV cache, nonpad_kv_seqlen
  const DataType t = l.inputs[cuda::kAttnQ].type;
  if (t != DataType::kHALF && t != DataType::kBF16) return false;
  if (l.inputs[cuda::kAttnK].type != t || l.inputs[cuda::kAttnV].type != t) return false;
  cuda::HeadDims h;
  if (!cuda::headDims(l, h) || h.qHeads <= 0 || h.kvHeads <= 0 || h.qHeads % h.kvHeads != 0) return false;
  // d != dv passes the frontend's checks on Hopper, but is not known to build there: not offered.
  if (h.d <= 0 || h.d != h.dv || h.d % 8 != 0) return false;
  const Attributes& a = *l.attrs;
  if (a.getFloat("softcap", 0.f) != 0.f) return false;
  const int64_t prec = a.getInt("softmax_precision", 0);
  if (prec != 0 && prec != 1) return false;
  if (a.getInt("left_window_size", -1) != -1 || a.getInt("right_window_size", -1) != -1) return false;
  if (a.getInt(kAttentionMaskPeriodAttr, 0) != 0) return false;  // a batch-periodic mask: not a cuDNN bias
  // kiln_mask_fill with a mask: fully masked rows are uniform, not cuDNN's; only key flags, whose
  // such rows go to the flash fallback.
  const bool keyFlags = l.present(cuda::kAttnMask) && keyFlagsMask(l);
  if (a.has(kAttentionMaskFillAttr) && l.present(cuda::kAttnMask) && !keyFlags) return false;
  int major = 0, dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess)
    return false;
  if (major < 8) return false;  // cuDNN's fused flash attention: Ampere and newer
  const int64_t maxD = major == 9 ? 256 : 128;  // the frontend's limits: 256 on Hopper, 128 elsewhere
  if (h.d > maxD) return false;
  if (keyFlags) return cuda::flashTcSupported(t, static_cast<int>(h.d), static_cast<int>(h.dv), 4);
  return !l.present(cuda::kAttnMask) || maskAsBias(l) || runtimeBiasMask(l);
}

}  // namespace

namespace cuda {
KernelFactory cudnnSdpa() {
  return {supportsCudnnSdpa, [](const LayerDesc& l) -> std::unique_ptr<Kernel> { return std::make_unique<CudnnSdpaKernel>(l); }};
}
}  // namespace cuda

#endif

}  // namespace kiln
