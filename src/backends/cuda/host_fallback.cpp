// The CUDA backend's tactic of last resort (Backend::fallbackTactics): a layer that no CUDA
// kernel runs (a rare op such as DFT, CumProd, NegativeLogLikelihoodLoss, Col2Im, a float64
// reduction) runs its reference kernel on the host, in stream order: its inputs are copied into
// page-locked buffers, a host function (cudaLaunchHostFunc, which CUDA graphs capture as a host
// node) evaluates the layer as the CPU reference does (float16/bfloat16 widened to float32), and the
// outputs are copied back. The build warns naming each such layer: a GPU engine then builds and is
// correct for any model whose ops have a reference kernel, and the slow layers are visible.
// Not for layers whose output sizes depend on computed data (those have their own host path,
// OpDef::inferComputesValues), plugins, or layers with layout attributes.
#include "backends/cuda/host_fallback.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/pinned_memory.h"
#include "ops/fused_attrs.h"
#include "ops/op_registry.h"
#include "plugin/plugin_layer.h"

namespace kiln {

namespace {

//! Page-locked host bytes, freed with the state that owns them.
struct PinnedBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() {
    if (p) cuda::releasePinned(p);
  }
  void allocate(size_t n) {
    bytes = n;
    p = cuda::allocatePinned(n);
  }
};

struct HostFallbackState : KernelState {
  Attributes attrs;  // the layer's, owned: the host function reads them after reshape returned
  LayerDesc desc;    // concrete dims; input values filled at each run
  std::vector<std::unique_ptr<PinnedBuffer>> in, out;  // null for omitted optional inputs
  // A failure of the host function (it cannot throw into CUDA): the message is written once,
  // before `failed` is set, and read by the next execute only after it sees `failed`.
  std::atomic<bool> failed{false};
  std::string error;
};

//! Runs on a CUDA host thread once the input copies finished: no CUDA calls here.
void CUDART_CB evaluateLayer(void* arg) {
  auto* s = static_cast<HostFallbackState*>(arg);
  try {
    LayerDesc d = s->desc;
    d.attrs = &s->attrs;
    for (size_t i = 0; i < d.inputs.size(); ++i) {
      if (!s->in[i]) continue;
      HostTensor v(d.inputs[i].type, d.inputs[i].dims);
      std::memcpy(v.data(), s->in[i]->p, s->in[i]->bytes);
      d.inputs[i].value = std::move(v);
    }
    for (TensorDesc& o : d.outputs) o.value = HostTensor();
    evaluateOnHost(d);
    for (size_t k = 0; k < d.outputs.size(); ++k) {
      const HostTensor& v = d.outputs[k].value;
      if (!v.valid() || v.bytes() != s->out[k]->bytes) throw Error("output " + std::to_string(k) + " has an unexpected size");
      std::memcpy(s->out[k]->p, v.data(), v.bytes());
    }
  } catch (const std::exception& e) {
    if (!s->failed.load(std::memory_order_acquire)) {
      s->error = e.what();
      s->failed.store(true, std::memory_order_release);
    }
  }
}

class HostFallbackKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<HostFallbackState>();
    s->attrs = *l.attrs;
    s->desc = l;
    s->desc.attrs = &s->attrs;
    s->in.resize(l.inputs.size());
    s->out.resize(l.outputs.size());
    for (size_t i = 0; i < l.inputs.size(); ++i) {
      if (!l.present(i)) continue;
      if (!isStatic(l.inputs[i].dims)) throw Error("host fallback of '" + l.name + "': input dims not known");
      s->in[i] = std::make_unique<PinnedBuffer>();
      s->in[i]->allocate(static_cast<size_t>(volume(l.inputs[i].dims)) * elementSize(l.inputs[i].type));
      s->desc.inputs[i].value = HostTensor();  // filled from the copies at each run
    }
    for (size_t k = 0; k < l.outputs.size(); ++k) {
      if (!isStatic(l.outputs[k].dims)) throw Error("host fallback of '" + l.name + "': output dims not known");
      s->out[k] = std::make_unique<PinnedBuffer>();
      s->out[k]->allocate(static_cast<size_t>(volume(l.outputs[k].dims)) * elementSize(l.outputs[k].type));
      s->desc.outputs[k].value = HostTensor();
    }
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    auto* s = static_cast<HostFallbackState*>(state);
    // A failure of an earlier run (reported here: the host function had no way to).
    if (s->failed.load(std::memory_order_acquire)) throw Error("layer '" + s->desc.name + "' (" + s->desc.op + ", on the host): " + s->error);
    const cudaStream_t stream = cuda::streamOf(io);
    for (size_t i = 0; i < s->in.size(); ++i)
      if (s->in[i] && s->in[i]->bytes)
        KILN_CUDA_CHECK(cudaMemcpyAsync(s->in[i]->p, io.in[i].data, s->in[i]->bytes, cudaMemcpyDeviceToHost, stream));
    KILN_CUDA_CHECK(cudaLaunchHostFunc(stream, evaluateLayer, s));
    for (size_t k = 0; k < s->out.size(); ++k)
      if (s->out[k]->bytes)
        KILN_CUDA_CHECK(cudaMemcpyAsync(io.out[k].data, s->out[k]->p, s->out[k]->bytes, cudaMemcpyHostToDevice, stream));
  }
};

}  // namespace

namespace cuda {

bool hostFallbackSupports(const LayerDesc& l) {
  if (l.op == kPluginOp || !hasPlainLayouts(l)) return false;
  const OpDef* def = OpRegistry::instance().find(l.op);
  return def && def->ref && !def->dataDependentShape && !def->inferComputesValues;
}

std::vector<Tactic> hostFallbackTactics(const LayerDesc& l) {
  if (!hostFallbackSupports(l)) return {};
  return {Tactic{kHostFallbackTactic, [](const LayerDesc&) { return std::make_unique<HostFallbackKernel>(); }}};
}

}  // namespace cuda

}  // namespace kiln
