// oneDNN pieces shared by the CPU tactics that call it (conv_onednn.cpp, qlinear_onednn.cpp).
#ifdef KILN_HAVE_ONEDNN
#include "backends/cpu/onednn_common.h"

#include <dlfcn.h>

namespace kiln::cpu {

dnnl::engine& oneDnnEngine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// omp_set_num_threads from the OpenMP runtime oneDNN is linked with (found at run time, so
// kiln itself does not link OpenMP).
void setOneDnnThreads(int n) {
  using Fn = void (*)(int);
  static Fn fn = [] {
    void* s = dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    if (!s)
      if (void* h = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD)) s = dlsym(h, "omp_set_num_threads");
    return reinterpret_cast<Fn>(s);
  }();
  if (fn) fn(n);
}

// oneDNN's eltwise equivalent of a fused activation; false when it has none.
bool toOneDnnEltwise(const Activation& a, dnnl::algorithm& alg, float& alpha, float& beta) {
  alpha = 0.f;
  beta = 0.f;
  switch (a.kind) {
    case ActKind::kRelu: alg = dnnl::algorithm::eltwise_relu; return true;
    case ActKind::kLeakyRelu: alg = dnnl::algorithm::eltwise_relu; alpha = a.alpha; return true;
    case ActKind::kClip: alg = dnnl::algorithm::eltwise_clip; alpha = a.alpha; beta = a.beta; return true;
    case ActKind::kSigmoid: alg = dnnl::algorithm::eltwise_logistic; return true;
    case ActKind::kTanh: alg = dnnl::algorithm::eltwise_tanh; return true;
    case ActKind::kHardSwish: alg = dnnl::algorithm::eltwise_hardswish; return true;
    case ActKind::kGelu: alg = dnnl::algorithm::eltwise_gelu_erf; return true;
    case ActKind::kGeluTanh: alg = dnnl::algorithm::eltwise_gelu_tanh; return true;
    case ActKind::kElu: alg = dnnl::algorithm::eltwise_elu; alpha = a.alpha; return true;
    case ActKind::kSoftplus: alg = dnnl::algorithm::eltwise_soft_relu; return true;
    case ActKind::kSilu: alg = dnnl::algorithm::eltwise_swish; alpha = 1.f; return true;
    case ActKind::kMish: alg = dnnl::algorithm::eltwise_mish; return true;
    default: return false;
  }
}

bool appendOneDnnActivation(dnnl::post_ops& po, const Activation& a) {
  dnnl::algorithm alg;
  float alpha, beta;
  if (toOneDnnEltwise(a, alg, alpha, beta)) {
    po.append_eltwise(1.f, alg, alpha, beta);
    return true;
  }
  if (a.kind == ActKind::kHardSigmoid) {  // max(0, min(1, alpha * x + beta))
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, a.alpha, a.beta);
    po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, 0.f, 1.f);
    return true;
  }
  return false;
}

}  // namespace kiln::cpu

#endif  // KILN_HAVE_ONEDNN
