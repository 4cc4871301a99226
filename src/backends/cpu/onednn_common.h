// oneDNN pieces shared by the CPU tactics that call it (built only with KILN_HAVE_ONEDNN).
#pragma once
#ifdef KILN_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>

#include "ops/activation.h"

namespace kiln::cpu {

//! The process-wide oneDNN CPU engine.
dnnl::engine& oneDnnEngine();
//! Sets the calling thread's OpenMP thread count (oneDNN's runtime; looked up at run time, so
//! kiln itself does not link OpenMP; conv_onednn.cpp says why it matters).
void setOneDnnThreads(int n);
//! oneDNN's eltwise equivalent of a fused activation; false when it has none.
bool toOneDnnEltwise(const Activation& a, dnnl::algorithm& alg, float& alpha, float& beta);
//! Appends the fused activation to `po` as eltwise post-ops: one (toOneDnnEltwise), or for
//! HardSigmoid, which oneDNN 2.6 lacks, linear(alpha, beta) then clip(0, 1). False when it has no
//! equivalent (nothing appended).
bool appendOneDnnActivation(dnnl::post_ops& po, const Activation& a);

}  // namespace kiln::cpu

#endif  // KILN_HAVE_ONEDNN
