// Helpers for CUDA kernels and the CUDA backend: error checks that throw kiln::Error, stream
// access, launch geometry, element types.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "backends/backend.h"
#include "core/type_dispatch.h"
#include "ops/fused_attrs.h"

namespace kiln::cuda {

[[noreturn]] void throwCudaError(cudaError_t e, const char* what, const char* file, int line);

#define KILN_CUDA_CHECK(expr)                                                       \
  do {                                                                              \
    cudaError_t kiln_err_ = (expr);                                                 \
    if (kiln_err_ != cudaSuccess) ::kiln::cuda::throwCudaError(kiln_err_, #expr, __FILE__, __LINE__); \
  } while (0)

//! Checks the last kernel launch (cheap: no synchronization).
#define KILN_CUDA_CHECK_LAUNCH() KILN_CUDA_CHECK(cudaGetLastError())

inline cudaStream_t streamOf(const KernelIO& io) { return static_cast<cudaStream_t>(io.stream); }

//! Streaming multiprocessors of the current device (read from the device once per device).
int smCount();

//! Blocks for a grid-stride loop over n items (capped, at 32 per SM by default; kernels loop over
//! the rest).
inline unsigned gridFor(int64_t n, unsigned block = 256, unsigned maxBlocks = 0) {
  if (maxBlocks == 0) maxBlocks = static_cast<unsigned>(smCount()) * 32;
  int64_t b = (n + block - 1) / block;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b > maxBlocks ? maxBlocks : b);
}

//! core/type_dispatch.h's dispatchType with the CUDA types of the 2-byte floats (__half,
//! __nv_bfloat16): the one type switch of the CUDA backend. Only Set's types are instantiated.
template <uint32_t Set = kAllTypes, typename F, typename Fail = const char*>
decltype(auto) dispatchCudaType(DataType t, F&& f, const Fail& fail = "this CUDA kernel") {
  return dispatchType<Set, __half, __nv_bfloat16>(t, std::forward<F>(f), fail);
}

//! Calls f(T{}) with an unsigned type of `bytes` (1, 2, 4 or 8) for kernels that only move
//! elements; `T8` picks the 8-byte type (uint2 where a kernel must tell it apart from integer
//! arithmetic types). Throws kiln::Error for other sizes.
template <typename T8 = uint64_t, typename F>
void dispatchElementSize(size_t bytes, F&& f) {
  switch (bytes) {
    case 1: f(uint8_t{}); break;
    case 2: f(uint16_t{}); break;
    case 4: f(uint32_t{}); break;
    case 8: f(T8{}); break;
    default: throw Error("unsupported element size " + std::to_string(bytes));
  }
}

//! A kernel state holding the parameter block of one launch (filled by reshape, read by execute).
template <typename P>
struct ParamState : KernelState {
  P p{};
};
//! Creates a ParamState<P> in `state` and returns its parameter block.
template <typename P>
P& makeState(std::unique_ptr<KernelState>& state) {
  auto s = std::make_unique<ParamState<P>>();
  P& p = s->p;
  state = std::move(s);
  return p;
}
template <typename P>
const P& paramsOf(const KernelState* state) {
  return static_cast<const ParamState<P>*>(state)->p;
}

//! Whether a layer attribute allows TF32 for float32 matmul/conv (set by the builder).
inline bool allowTf32(const LayerDesc& l) { return tf32Allowed(*l.attrs); }

}  // namespace kiln::cuda
