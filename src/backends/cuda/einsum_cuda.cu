// CUDA tactic "cuda_loops" for Einsum: any equation (diagonals, broadcasting ellipses, sums over
// labels missing from the output), planned on the host by planEinsumLoops (the reference's loop
// nest) and run with one thread per output element. Exact rather than fast: the large einsums of
// real models are matmuls, which exporters emit as MatMul.
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

constexpr int kMaxInputs = 4;
constexpr int kMaxLoops = 16;

constexpr uint32_t kEinsumTypes = kFloatTypes | typeBit(DataType::kDOUBLE) | typeBit(DataType::kINT32) | typeBit(DataType::kINT64);

struct EinsumParams {
  int nIn = 0, nLoop = 0, nOut = 0;
  int64_t loopDims[kMaxLoops];
  int64_t strides[kMaxInputs][kMaxLoops];
  int64_t outCount = 0, sumCount = 0;
  const void* in[kMaxInputs];
};

template <typename T> struct EinsumAcc { using type = T; };
template <> struct EinsumAcc<__half> { using type = float; };
template <> struct EinsumAcc<__nv_bfloat16> { using type = float; };
template <> struct EinsumAcc<int32_t> { using type = int64_t; };

template <typename T> __device__ __forceinline__ typename EinsumAcc<T>::type widen(T v) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) return cuda::toF(v);
  else return static_cast<typename EinsumAcc<T>::type>(v);
}
template <typename T> __device__ __forceinline__ T narrow(typename EinsumAcc<T>::type v) {
  if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) return cuda::fromF<T>(v);
  else return static_cast<T>(v);
}

template <typename T>
__global__ void einsumKernel(T* __restrict__ y, EinsumParams p) {
  using A = typename EinsumAcc<T>::type;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < p.outCount; o += int64_t(gridDim.x) * blockDim.x) {
    int64_t base[kMaxInputs] = {0, 0, 0, 0};
    int64_t rem = o;
    for (int d = p.nOut - 1; d >= 0; --d) {
      const int64_t c = rem % p.loopDims[d];
      rem /= p.loopDims[d];
      for (int i = 0; i < p.nIn; ++i) base[i] += c * p.strides[i][d];
    }
    A acc = A(0);
    for (int64_t s = 0; s < p.sumCount; ++s) {
      int64_t off[kMaxInputs] = {base[0], base[1], base[2], base[3]};
      int64_t r = s;
      for (int d = p.nLoop - 1; d >= p.nOut; --d) {
        const int64_t c = r % p.loopDims[d];
        r /= p.loopDims[d];
        for (int i = 0; i < p.nIn; ++i) off[i] += c * p.strides[i][d];
      }
      A prod = A(1);
      for (int i = 0; i < p.nIn; ++i) prod *= widen(static_cast<const T*>(p.in[i])[off[i]]);
      acc += prod;
    }
    y[o] = narrow<T>(acc);
  }
}

class EinsumKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    std::vector<Dims> dims;
    for (const auto& in : l.inputs) dims.push_back(in.dims);
    const EinsumLoops plan = planEinsumLoops(l, dims);
    if (plan.loopDims.size() > static_cast<size_t>(kMaxLoops))
      throw UnsupportedError("CUDA Einsum: more than 16 distinct labels");
    EinsumParams& p = cuda::makeState<EinsumParams>(state);
    p.nIn = static_cast<int>(dims.size());
    p.nLoop = static_cast<int>(plan.loopDims.size());
    p.nOut = static_cast<int>(plan.outputLoops);
    p.outCount = 1;
    p.sumCount = 1;
    for (int d = 0; d < p.nLoop; ++d) {
      p.loopDims[d] = plan.loopDims[d];
      (d < p.nOut ? p.outCount : p.sumCount) *= plan.loopDims[d];
      for (int i = 0; i < p.nIn; ++i) p.strides[i][d] = plan.strides[i][d];
    }
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    EinsumParams p = cuda::paramsOf<EinsumParams>(state);
    if (p.outCount == 0) return;
    for (int i = 0; i < p.nIn; ++i) p.in[i] = io.in[i].data;
    auto launch = [&](auto tag) {
      using T = decltype(tag);
      einsumKernel<T><<<cuda::gridFor(p.outCount), 256, 0, cuda::streamOf(io)>>>(io.out[0].as<T>(), p);
    };
    cuda::dispatchCudaType<kEinsumTypes>(io.out[0].type, launch, "CUDA Einsum");
    KILN_CUDA_CHECK_LAUNCH();
  }
};

bool supportsEinsum(const LayerDesc& l) {
  if (l.inputs.empty() || l.inputs.size() > static_cast<size_t>(kMaxInputs)) return false;
  const DataType t = l.inputs[0].type;
  if (!inTypeSet(kEinsumTypes, t)) return false;
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (!l.present(i) || l.inputs[i].type != t) return false;
  return true;
}

std::unique_ptr<Kernel> createEinsum(const LayerDesc&) { return std::make_unique<EinsumKernel>(); }

}  // namespace

namespace cuda {
KernelFactory einsumCuda() { return {supportsEinsum, createEinsum}; }
}  // namespace cuda

}  // namespace kiln
