// CUDA tactic (tactic_table.cpp) for a run-time If (ops/control_flow.cpp): both branches have run,
// the layer passes the taken branch's outputs on. When the branches' dims differ, the execution
// context has read the condition back to resolve the output's shape (data-dependent shapes,
// runtime/context.cpp), so the concrete layer carries its value: one device copy of the taken
// branch. Otherwise the condition stays on the device and a kernel selects byte-wise, so nothing
// synchronizes the host.
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/detection_tactics.h"
#include "backends/cuda/cuda_util.h"

namespace kiln {

namespace {

struct IfParams {
  int known = -1;  //!< the taken branch (1 then, 0 else) when the condition's value was read; -1 on the device
  std::vector<size_t> bytes;  //!< per output
};

__global__ void selectBytesKernel(const uint8_t* __restrict__ cond, const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
                                  uint8_t* __restrict__ y, int64_t n) {
  const bool taken = *cond != 0;
  const uint8_t* src = taken ? a : b;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) y[i] = src[i];
}

class IfKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    IfParams& p = cuda::makeState<IfParams>(state);
    const size_t n = l.outputs.size();
    const HostTensor& c = l.inputs[0].value;
    p.known = c.valid() ? (c.getInt(0) != 0 ? 1 : 0) : -1;
    p.bytes.clear();
    for (size_t k = 0; k < n; ++k) {
      if (p.known < 0 && l.inputs[1 + k].dims != l.inputs[1 + n + k].dims)
        throw Error("layer '" + l.name + "' (If): branches of different dims need the condition's value");
      p.bytes.push_back(static_cast<size_t>(volume(l.outputs[k].dims)) * elementSize(l.outputs[k].type));
    }
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const IfParams& p = cuda::paramsOf<IfParams>(state);
    const size_t n = io.out.size();
    for (size_t k = 0; k < n; ++k) {
      if (p.bytes[k] == 0) continue;
      if (p.known >= 0) {
        KILN_CUDA_CHECK(cudaMemcpyAsync(io.out[k].data, io.in[p.known ? 1 + k : 1 + n + k].data, p.bytes[k], cudaMemcpyDeviceToDevice,
                                        cuda::streamOf(io)));
        continue;
      }
      const int64_t bytes = static_cast<int64_t>(p.bytes[k]);
      selectBytesKernel<<<cuda::gridFor(bytes), 256, 0, cuda::streamOf(io)>>>(
          static_cast<const uint8_t*>(io.in[0].data), static_cast<const uint8_t*>(io.in[1 + k].data),
          static_cast<const uint8_t*>(io.in[1 + n + k].data), static_cast<uint8_t*>(io.out[k].data), bytes);
      KILN_CUDA_CHECK_LAUNCH();
    }
  }
};

bool supportsIf(const LayerDesc& l) { return !l.inputs.empty() && l.inputs[0].type == DataType::kBOOL; }
std::unique_ptr<Kernel> createIf(const LayerDesc&) { return std::make_unique<IfKernel>(); }

}  // namespace

namespace cuda {
KernelFactory ifCuda() { return {supportsIf, createIf}; }
}  // namespace cuda

}  // namespace kiln
