// CUDA tactic "cuda_naive" for MatMulInteger: int32 Y = (A - a_zero_point) @ (B - b_zero_point)
// with int8/uint8 operands, batch broadcasting as MatMul, scalar or per-row (A) / per-column (B)
// zero points. One thread per output element with an exact int32 dot product (the quantized
// models that use this op are small; cuBLASLt's int8 path needs zero-point-free operands).
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

constexpr int kMaxBatchRank = 6;

struct MmiParams {
  int64_t M = 0, N = 0, K = 0, batches = 0;
  int rank = 0;                  // batch rank
  int64_t batchDims[kMaxBatchRank];
  int64_t aStride[kMaxBatchRank], bStride[kMaxBatchRank];  // in matrices; 0 where broadcast
  bool aSigned = true, bSigned = true;
  int64_t aZpCount = 0, bZpCount = 0;  // 0: no zero point; 1: scalar; else per row / column
};

__device__ __forceinline__ int32_t byteAt(const void* p, int64_t i, bool isSigned) {
  return isSigned ? static_cast<int32_t>(static_cast<const int8_t*>(p)[i]) : static_cast<int32_t>(static_cast<const uint8_t*>(p)[i]);
}

__global__ void mmiKernel(const void* __restrict__ a, const void* __restrict__ b, const void* __restrict__ aZp,
                          const void* __restrict__ bZp, int32_t* __restrict__ y, MmiParams p) {
  const int64_t total = p.batches * p.M * p.N;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < total; o += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = o % p.N, i = (o / p.N) % p.M;
    int64_t bt = o / (p.M * p.N), am = 0, bm = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      const int64_t c = bt % p.batchDims[d];
      bt /= p.batchDims[d];
      am += c * p.aStride[d];
      bm += c * p.bStride[d];
    }
    const int32_t za = p.aZpCount == 0 ? 0 : byteAt(aZp, p.aZpCount == 1 ? 0 : i, p.aSigned);
    const int32_t zb = p.bZpCount == 0 ? 0 : byteAt(bZp, p.bZpCount == 1 ? 0 : j, p.bSigned);
    const int64_t aOff = am * p.M * p.K + i * p.K, bOff = bm * p.K * p.N + j;
    int32_t acc = 0;
    for (int64_t k = 0; k < p.K; ++k) acc += (byteAt(a, aOff + k, p.aSigned) - za) * (byteAt(b, bOff + k * p.N, p.bSigned) - zb);
    y[o] = acc;
  }
}

class MatMulIntegerKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    Dims a = l.inputs[0].dims, b = l.inputs[1].dims;
    const bool aVec = a.size() == 1, bVec = b.size() == 1;
    if (aVec) a.insert(a.begin(), 1);  // [K] -> [1, K]
    if (bVec) b.push_back(1);          // [K] -> [K, 1]
    MmiParams& p = cuda::makeState<MmiParams>(state);
    p.M = a[a.size() - 2];
    p.K = a.back();
    p.N = b.back();
    const Dims aBatch(a.begin(), a.end() - 2), bBatch(b.begin(), b.end() - 2);
    const Dims batch = broadcastDims(l, aBatch, bBatch);  // numpy broadcasting of the batch dims
    if (batch.size() > static_cast<size_t>(kMaxBatchRank)) throw UnsupportedError("CUDA MatMulInteger: batch rank above 6");
    const std::vector<int64_t> sa = broadcastStrides(aBatch, batch), sb = broadcastStrides(bBatch, batch);  // in matrices
    p.rank = static_cast<int>(batch.size());
    p.batches = volume(batch);
    for (size_t d = 0; d < batch.size(); ++d) {
      p.batchDims[d] = batch[d];
      p.aStride[d] = sa[d];
      p.bStride[d] = sb[d];
    }
    p.aSigned = l.inputs[0].type == DataType::kINT8;
    p.bSigned = l.inputs[1].type == DataType::kINT8;
    p.aZpCount = l.present(2) ? volume(l.inputs[2].dims) : 0;
    p.bZpCount = l.present(3) ? volume(l.inputs[3].dims) : 0;
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const MmiParams& p = cuda::paramsOf<MmiParams>(state);
    const int64_t total = p.batches * p.M * p.N;
    if (total == 0) return;
    const void* aZp = io.in.size() > 2 ? io.in[2].data : nullptr;
    const void* bZp = io.in.size() > 3 ? io.in[3].data : nullptr;
    mmiKernel<<<cuda::gridFor(total), 256, 0, cuda::streamOf(io)>>>(io.in[0].data, io.in[1].data, aZp, bZp,
                                                                     io.out[0].as<int32_t>(), p);
    KILN_CUDA_CHECK_LAUNCH();
  }
};

bool isByte(DataType t) { return t == DataType::kINT8 || t == DataType::kUINT8; }

bool supportsMatMulInteger(const LayerDesc& l) {
  if (l.inputs.size() < 2 || !isByte(l.inputs[0].type) || !isByte(l.inputs[1].type)) return false;
  const size_t ra = l.inputs[0].dims.size(), rb = l.inputs[1].dims.size();
  return ra >= 1 && rb >= 1 && std::max(ra, rb) <= static_cast<size_t>(kMaxBatchRank) + 2;
}

std::unique_ptr<Kernel> createMatMulInteger(const LayerDesc&) { return std::make_unique<MatMulIntegerKernel>(); }

}  // namespace

namespace cuda {
KernelFactory matMulIntegerCuda() { return {supportsMatMulInteger, createMatMulInteger}; }
}  // namespace cuda

}  // namespace kiln
