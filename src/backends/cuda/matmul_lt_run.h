// Shared execution path of the cuBLASLt matmul tactics (MatMul, Gemm): a GemmSetup (what the op's
// reshape derives from the concrete shapes) becomes an LtState (plans + epilogue pass), run at
// execute. Also: constant weights repacked to K-contiguous [N,K] matrices in device memory.
#pragma once
#include <memory>
#include <vector>

#include "backends/cuda/device_copy.h"
#include "backends/cuda/matmul_cublaslt.h"
#include "backends/cuda/matmul_epilogue.h"

namespace kiln::cuda {

//! Element offsets of A, B and D (and C) for one cuBLASLt launch of a strided batch.
struct LtCall {
  int64_t a = 0, b = 0, d = 0;
};

//! A concrete matmul: the cuBLASLt problem (epilogue fields unset), its launches and its addends.
struct GemmSetup {
  GemmProblem prob;               //!< bias/act/useC are chosen by buildLtState
  std::vector<LtCall> calls;      //!< one per outer batch (usually one)
  Dims outDims;
  bool empty = false;             //!< the output has no elements: nothing to do
  bool zeroK = false;             //!< K == 0: the product is zero, only the addend + activation remain
  int rowBias = -1;               //!< input holding a row of N values added to every row (scale 1)
  Dims rowBiasDims;
  int fullC = -1;                 //!< input of the output's shape, added with scale prob.beta
  int addend = -1;                //!< any other addend, broadcast to the output, scale addScale
  Dims addendDims;
  float addScale = 1.f;
  Activation act;
  int gate = -1;                  //!< input of the output's shape multiplying the activated result (post pass)
};

//! One way to run the setup: a plan (fused epilogue where possible) and the post pass.
struct LtVariant {
  std::unique_ptr<LtPlan> plan;
  MatMulPost post;
  int postInput = -1;  //!< input read by the post pass as its addend
};

struct LtState : KernelState {
  GemmSetup setup;
  int64_t outCount = 0;
  LtVariant fast;  //!< every pointer 16-byte aligned: fused epilogues
  LtVariant safe;  //!< any alignment: element-aligned algorithm, epilogue in the post pass
};

constexpr size_t kLtMaxWorkspace = size_t(32) << 20;

//! Whether cuBLASLt's epilogue computes activation `k` (ReLU, tanh-GELU; kNone); others run in
//! the post pass.
bool ltFusable(ActKind k);

//! Builds the plans for `s` (heuristic candidate `algoIndex`); sets `workspace`.
std::unique_ptr<LtState> buildLtState(GemmSetup s, int algoIndex, size_t& workspace);

//! Enqueues the layer. `b` overrides input 1 (repacked weights), `a` input 0 (operands the
//! caller prepared, e.g. patch rows) and `d` output 0 (a staging buffer) when not null; cuBLASLt's
//! workspace starts `workspaceOffset` bytes into io.workspace (a multiple of 256: the caller's own
//! scratch comes first).
void runLtState(LtState& st, const KernelIO& io, const void* b, const void* a = nullptr, size_t workspaceOffset = 0, void* d = nullptr);

//! Fills s.prob's batch/strides and s.calls from the operands' batch dims (numpy broadcast to
//! `batch`): the longest run of inner batch dims with one stride per operand becomes cuBLASLt's
//! strided batch (stride 0 = broadcast), the remaining outer dims become separate launches.
//! Needs s.prob.M/N/K.
void splitBatch(GemmSetup& s, const Dims& aBatch, const Dims& bBatch, const Dims& batch);

//! Device copy of constant weights: `matrices` matrices, each stored [K,N] (or [N,K] when
//! `transposed`), repacked to [N,K] (K contiguous, the layout cuBLASLt's tensor-core kernels read
//! best). Shared (device_copy.h) by layers and tactics that upload the same host buffer with the
//! same contents and geometry (ALBERT's one set of weights for every layer: plans store a shared
//! buffer once).
class DeviceWeights {
 public:
  DeviceWeights(const HostTensor& value, int64_t matrices, int64_t K, int64_t N, bool transposed);
  const void* data() const { return copy_ ? copy_->ptr : nullptr; }

 private:
  std::shared_ptr<const DeviceCopy> copy_;
};

}  // namespace kiln::cuda
