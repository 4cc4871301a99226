// What the cuDNN tactics (conv_cudnn.cpp, matmul_cudnn.cpp, attention_cudnn.cpp) share: the process's cuDNN
// handle, the frontend error check, the enqueue of a built plan and the activations a graph applies. Built with the cuDNN frontend only.
#pragma once
#include <cuda_runtime.h>
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/plan_cache.h"
#include "kiln/types.h"
#include "ops/activation.h"

namespace kiln::cuda {

//! Created on first use and never destroyed (kernels may outlive any static owner). cuDNN
//! handles are not thread-safe: setting the stream and enqueueing happen under `mu`.
struct CudnnHandle {
  cudnnHandle_t h = nullptr;
  std::mutex mu;
};

inline CudnnHandle& cudnnHandle() {
  static CudnnHandle* s = [] {
    auto* c = new CudnnHandle;
    cudnnStatus_t st = cudnnCreate(&c->h);
    if (st != CUDNN_STATUS_SUCCESS) {
      delete c;
      throw Error(std::string("cudnnCreate failed: ") + cudnnGetErrorString(st));
    }
    return c;
  }();
  return *s;
}

//! Throws UnsupportedError naming the layer when a frontend step failed (the tactic cannot run it).
inline void checkCudnn(cudnn_frontend::error_t e, const LayerDesc& l, const std::string& what) {
  if (e.is_bad()) throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): cuDNN " + what + ": " + e.get_message());
}

//! Enqueues plan `plan` of `graph` on `stream` with the variant pack `ptrs` (the user tensors in
//! uid order) and `workspace`; `what` names the caller in errors.
inline void executeCudnnPlan(cudnn_frontend::graph::Graph& graph, int64_t plan, void** ptrs, int n, void* workspace,
                             cudaStream_t stream, const char* what) {
  CudnnHandle& h = cudnnHandle();
  std::lock_guard<std::mutex> lock(h.mu);
  cudnnStatus_t st = cudnnSetStream(h.h, stream);
  if (st != CUDNN_STATUS_SUCCESS) throw Error(std::string("cudnnSetStream: ") + cudnnGetErrorString(st));
  auto e = graph.execute_plan_at_index(h.h, ptrs, n, workspace, plan);
  if (e.is_bad()) throw Error(std::string(what) + " execute: " + e.get_message());
}

//! Activations the frontend's pointwise modes express with kiln's exact formula: Relu, Sigmoid,
//! Tanh, both GELUs, SiLU (SWISH_FWD, beta 1: EfficientNet/MobileViT/YOLO convs), and Clip with finite bounds (RELU_FWD with lower and upper clips: ReLU6 in
//! MobileNetV2, where a separate epilogue pass over every expansion conv's output cost as much as
//! the conv). The others (LeakyRelu, HardSwish, ...) run in the tactics' own epilogues.
inline bool cudnnAct(const Activation& a, cudnn_frontend::graph::Pointwise_attributes* attrs = nullptr) {
  cudnn_frontend::PointwiseMode_t mode;
  switch (a.kind) {
    case ActKind::kRelu: mode = cudnn_frontend::PointwiseMode_t::RELU_FWD; break;
    case ActKind::kSigmoid: mode = cudnn_frontend::PointwiseMode_t::SIGMOID_FWD; break;
    case ActKind::kTanh: mode = cudnn_frontend::PointwiseMode_t::TANH_FWD; break;
    case ActKind::kGelu: mode = cudnn_frontend::PointwiseMode_t::GELU_FWD; break;
    case ActKind::kGeluTanh: mode = cudnn_frontend::PointwiseMode_t::GELU_APPROX_TANH_FWD; break;
    case ActKind::kSilu: mode = cudnn_frontend::PointwiseMode_t::SWISH_FWD; break;
    case ActKind::kClip:
      if (!std::isfinite(a.alpha) || !std::isfinite(a.beta) || !(a.alpha <= a.beta)) return false;
      mode = cudnn_frontend::PointwiseMode_t::RELU_FWD;
      break;
    default: return false;
  }
  if (attrs) {
    attrs->set_mode(mode).set_compute_data_type(cudnn_frontend::DataType_t::FLOAT);
    if (a.kind == ActKind::kClip) attrs->set_relu_lower_clip(a.alpha).set_relu_upper_clip(a.beta);
    if (a.kind == ActKind::kSilu) attrs->set_swish_beta(1.f);
  }
  return true;
}


//! The key of a shared graph (plan_cache.h): the current device, then every value the graph depends on.
class GraphKey {
 public:
  GraphKey() {
    int device = 0;
    cudaGetDevice(&device);
    add(device);
  }
  GraphKey& add(int64_t v) {
    k_ += std::to_string(v) + ",";
    return *this;
  }
  //! A float by its bit pattern: distinct values (clip bounds) never share a key.
  GraphKey& addBits(float v) {
    uint32_t b = 0;
    std::memcpy(&b, &v, sizeof b);
    return add(b);
  }
  GraphKey& addList(const std::vector<int64_t>& v) {
    for (int64_t x : v) add(x);
    k_ += "|";
    return *this;
  }
  const std::string& str() const { return k_; }

 private:
  std::string k_;
};

//! Validates `g` and creates its execution plans (heuristics A, then the fallback list) on handle
//! `h` (the caller holds cudnnHandle().mu): an empty string, or what cuDNN said.
inline std::string createCudnnPlans(cudnn_frontend::graph::Graph& g, cudnnHandle_t h) {
  auto st = g.validate();
  if (st.is_good()) st = g.build_operation_graph(h);
  if (st.is_good()) st = g.create_execution_plans({cudnn_frontend::HeurMode_t::A, cudnn_frontend::HeurMode_t::FALLBACK});
  return st.is_bad() ? (st.get_message().empty() ? std::string("cuDNN refused the graph") : st.get_message()) : std::string();
}

//! What a tactic runs of a shared graph (plan_cache.h): its `index`-th plan that builds, the plan's
//! workspace bytes and the variant pack's uids in execute order.
struct CudnnPlanChoice {
  int64_t plan = -1;
  int64_t workspace = 0;
  std::vector<int64_t> uids;
};

//! Picks tactic `index`'s plan of `e` (a made graph); false when no plan builds.
inline bool chooseCudnnPlan(PlanCacheEntry<cudnn_frontend::graph::Graph>& e, int64_t index, const LayerDesc& l, CudnnPlanChoice& c) {
  cudnn_frontend::graph::Graph& g = *e.graph;
  c.plan = nthBuiltPlan(e, index, g.get_execution_plan_count(), [&](int64_t i) { return g.build_plan_at_index(i).is_good(); });
  if (c.plan < 0) return false;
  checkCudnn(g.prepare_variant_pack_template(), l, "variant pack");
  checkCudnn(g.get_workspace_size_plan_at_index(c.plan, c.workspace), l, "workspace size");
  c.uids = g.get_variant_pack_uids_sorted();
  return true;
}

//! Tactic `index`'s plan (in `c`) of the shared graph for `key` in `cache`, the graph made by `make`
//! and given its plans on first use (engine configs needing more than `maxWorkspace` bytes
//! deselected); throws UnsupportedError naming layer `l` when cuDNN refuses the graph or none of its
//! configs builds. The caller holds cudnnHandle().mu.
inline std::shared_ptr<cudnn_frontend::graph::Graph> sharedCudnnPlan(
    PlanCache<cudnn_frontend::graph::Graph>& cache, const std::string& key, int64_t maxWorkspace,
    const std::function<std::shared_ptr<cudnn_frontend::graph::Graph>()>& make, int64_t index, const LayerDesc& l, CudnnPlanChoice& c) {
  auto entry = cache.get(key, [&](PlanCacheEntry<cudnn_frontend::graph::Graph>& e) {
    auto g = make();
    e.failure = createCudnnPlans(*g, cudnnHandle().h);
    if (!e.failure.empty()) return;
    g->deselect_workspace_greater_than(maxWorkspace);
    e.graph = std::move(g);
  });
  if (!entry->graph) throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): no cuDNN graph for it: " + entry->failure);
  if (!chooseCudnnPlan(*entry, index, l, c)) throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): no cuDNN engine config builds");
  return entry->graph;
}

}  // namespace kiln::cuda
