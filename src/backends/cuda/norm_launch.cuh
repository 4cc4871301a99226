// Host-side interface of the normalization / softmax / reduction / selection kernels (the .cu
// files): parameter blocks filled at reshape (sizes, launch geometry), completed with buffer
// pointers at execute, and the launchers. Included by host C++ (normalization_cuda.cpp) too:
// declarations only, no device code.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "backends/cuda/cuda_util.h"
#include "kiln/types.h"

namespace kiln::cuda {

constexpr int kMaxReduceDims = 8;
//! Vectors each thread keeps in registers in the cached row kernels.
constexpr int kRowItems = 4;

//! Launch geometry of a kernel that processes contiguous rows: `threads` (a multiple of 32, at
//! most 1024) per row, `rowsPerBlock` rows per block, `vec` elements per load, and whether a
//! row fits in registers (cached: one read of the input) or is streamed from memory.
struct RowGeometry {
  int threads = 32;
  int rowsPerBlock = 1;
  int vec = 1;
  bool cached = false;
};

//! Chooses the geometry for rows of `cols` elements of `elemSize` bytes. `vectorize`: whether
//! 16-byte vectors may be used (pointer alignment is checked again at launch).
//! `subWarp`: rows shorter than 32 vectors get fewer threads (a power of two, one vector each), so
//! that short rows (LayerNorm over 32-96 channels, softmax over a few keys) keep every lane busy;
//! only for kernels that reduce through rowReduce (norm_common.cuh), which handles such groups.
inline RowGeometry planRows(int64_t rows, int64_t cols, size_t elemSize, bool vectorize = true, bool subWarp = false) {
  RowGeometry g;
  const int64_t wide = static_cast<int64_t>(16 / elemSize);
  g.vec = (vectorize && wide > 1 && cols % wide == 0) ? static_cast<int>(wide) : 1;
  const int64_t nvec = cols / g.vec;
  int t = 32;
  if (subWarp)
    for (t = 1; t < 32 && t < nvec;) t *= 2;
  while (t < 1024 && static_cast<int64_t>(t) * kRowItems < nvec) t *= 2;
  // Few rows: spread a row over more threads (each keeps at least one vector). Only below a quarter
  // of the GPU's threads: a row split over several warps synchronizes the block twice per
  // reduction and leaves each thread fewer loads in flight (BERT-base's [4096, 768] LayerNorm ran
  // with 64 threads a row at ~760 GB/s; ncu on the H200: latency-bound, 12% of DRAM bandwidth).
  while (t < 1024 && rows * t < int64_t(cuda::smCount()) * 512 && static_cast<int64_t>(t) * 2 <= nvec) t *= 2;
  g.threads = t;
  g.cached = nvec <= static_cast<int64_t>(t) * kRowItems;
  g.rowsPerBlock = std::max(1, 256 / t);
  return g;
}

//! Geometry of the warp-row kernels (norm_warp_rows.cu): `lanes` threads per row (a power of two
//! up to 32, so a row never spans warps), `items` vectors of `vec` elements per thread, all loaded
//! before any arithmetic. lanes == 0: the row does not fit in registers.
struct WarpRowPlan {
  int lanes = 0, items = 0, vec = 1;
};

//! Register counts the warp-row kernels are compiled for (vectors per thread).
constexpr int kWarpRowItems[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};

//! The plan for rows of `cols` elements of `elemSize` bytes: 16-byte vectors when `vectorize`
//! and cols allows them, else single elements; the fewest idle vector slots (lanes * items - vectors),
//! then the most lanes. `maxItems`: the register budget (the skip input doubles the loads held).
inline WarpRowPlan planWarpRows(int64_t cols, size_t elemSize, bool vectorize, int maxItems = 32) {
  WarpRowPlan best;
  const int64_t wide = static_cast<int64_t>(16 / elemSize);
  const int vec = (vectorize && wide > 1 && cols % wide == 0) ? static_cast<int>(wide) : 1;
  const int64_t nvec = cols / vec;
  if (cols <= 0 || nvec > int64_t(32) * maxItems) return best;
  int64_t bestWaste = -1;
  for (int lanes = 32; lanes >= 1; lanes /= 2)
    for (int items : kWarpRowItems) {
      if (items > maxItems) break;
      if (int64_t(lanes) * items < nvec) continue;
      const int64_t waste = int64_t(lanes) * items - nvec;
      if (bestWaste < 0 || waste < bestWaste) bestWaste = waste, best = {lanes, items, vec};
      break;  // more items only add waste
    }
  return best;
}

// ---- LayerNormalization, RMSNormalization, GroupNormalization, InstanceNormalization ---------

//! Rows of `cols` contiguous elements normalized by their mean/variance (or mean square), then
//! scaled and shifted by parameters whose index depends on `mode`.
struct RowNormParams {
  enum Mode : int {
    kDirect = 0,      //!< scale[k], bias[k] (k: index within the row)
    kBroadcast = 1,   //!< scale/bias broadcast to X: offsets from the element's coordinates
    kPerChannel = 2,  //!< Group/InstanceNorm: channel = (row % groups) * perGroup + k / spatial
    kPerGroup = 3,    //!< GroupNorm with one scale/bias per group: row % groups
  };
  DataType type = DataType::kFLOAT;
  int64_t rows = 0, cols = 0;
  float eps = 1e-5f;
  bool rms = false;
  int mode = kDirect;
  int64_t groups = 1, perGroup = 1, spatial = 1;
  int act = 0;  //!< a fused activation (ActKind; GroupNorm -> SiLU etc.), applied after the affine
  float actAlpha = 0.f, actBeta = 0.f;
  int rank = 0;  //!< kBroadcast: X dims and the strides of scale / bias (0 on broadcast dims)
  int64_t dims[kMaxReduceDims] = {};
  int64_t scaleStrides[kMaxReduceDims] = {};
  int64_t biasStrides[kMaxReduceDims] = {};
  RowGeometry geo;
  WarpRowPlan warp;  //!< launchRowNormWarp's geometry (kDirect rows only)
  //! launchRowNormWarp only (kFp8OutScaleAttr): float8e4m3fn codes of Y / codeScale to `codes`
  //! (set at execute), besides Y or instead of it (y null).
  float codeScale = 0.f;
  // Set at execute.
  const void* x = nullptr;
  void* y = nullptr;
  const void* scale = nullptr;
  const void* bias = nullptr;  //!< may be null (RMSNorm, LayerNorm without B)
  const void* skip = nullptr;  //!< skip LayerNorm (kiln_skip): added to X (rounded to T) first
  void* sum = nullptr;         //!< skip LayerNorm's optional second output: X + skip
  //! GroupNorm / InstanceNorm's fused residual (input 3, laid out like Y): added after the affine,
  //! before the activation (fuse_residual.cpp)
  const void* residual = nullptr;
  uint8_t* codes = nullptr;    //!< see codeScale
  float* mean = nullptr;       //!< optional outputs (float32), one per row
  float* invStd = nullptr;
};
void launchRowNorm(const RowNormParams& p, cudaStream_t stream);

//! GroupNormalization / InstanceNormalization over many blocks per group (norm_group_split.cu):
//! `chunks` blocks per group of `chunkElems` elements (whole vectors of `vec`).
struct GroupSplitPlan {
  int vec = 1;
  int64_t chunkElems = 0, chunks = 1;
  //! Elements per thread of the one-pass cooperative kernel (planGroupSplitOnePass; chunkElems =
  //! its block's threads times this); 0: the two passes.
  int perThread = 0;
  //! Workspace: one float2 (sum, sum of squares) per group and chunk, then each group's shift
  //! (its first element, read by the statistics pass: the apply pass may write over X).
  size_t workspaceBytes(int64_t rows) const { return static_cast<size_t>(rows * chunks * 2 + rows) * sizeof(float); }
};
GroupSplitPlan planGroupSplit(int64_t rows, int64_t cols, int64_t spatial, size_t elemSize);
//! The one-pass plan where the grid fits on the GPU at once (small tensors: batch-1 CNNs), else
//! planGroupSplit's.
GroupSplitPlan planGroupSplitOnePass(int64_t rows, int64_t cols, int64_t spatial, DataType type);
//! p: as for launchRowNorm with mode kPerChannel or kPerGroup; `workspace`: plan.workspaceBytes(p.rows).
void launchGroupNormSplit(const RowNormParams& p, const GroupSplitPlan& plan, void* workspace, cudaStream_t stream);
//! kDirect rows with one row per lane group (p.warp); where the buffers' alignment does not allow
//! p.warp's vectors and single elements do not fit in registers, launchRowNorm runs instead.
void launchRowNormWarp(const RowNormParams& p, cudaStream_t stream);

//! BatchNormalization (inference): y = (x - mean) / sqrt(var + eps) * scale + bias, per channel
//! (or per activation: the parameters have X's shape without the batch dim).
struct BatchNormParams {
  DataType type = DataType::kFLOAT;
  int64_t count = 0, channels = 1, spatial = 1;
  bool perActivation = false;
  float eps = 1e-5f;
  const void* x = nullptr;
  void* y = nullptr;
  const void *scale = nullptr, *bias = nullptr, *mean = nullptr, *var = nullptr;
};
void launchBatchNorm(const BatchNormParams& p, cudaStream_t stream);

// ---- Softmax, LogSoftmax --------------------------------------------------------------------

//! X viewed as [outer, length, inner]; softmax along `length`.
struct SoftmaxParams {
  DataType type = DataType::kFLOAT;
  int64_t outer = 1, length = 1, inner = 1;
  bool log = false;
  RowGeometry geo;  //!< inner == 1: rows of `length`
  const void* x = nullptr;
  void* y = nullptr;
};
void launchSoftmax(const SoftmaxParams& p, cudaStream_t stream);

// ---- Reduce* ----------------------------------------------------------------------------------

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

struct ReduceParams {
  DataType type = DataType::kFLOAT;
  ReduceKind kind = ReduceKind::kSum;
  bool copy = false;  //!< noop_with_empty_axes with empty axes: Y = X
  int64_t inCount = 0, outCount = 0, redCount = 0;
  bool rowForm = false;  //!< the reduced elements of an output are contiguous (rows of redCount)
  RowGeometry geo;
  //! General form: output o's elements are at sum(kept coords * keptStrides) + sum(reduced
  //! coords * redStrides); dims merged where possible (size-1 dims dropped).
  int nKept = 0, nRed = 0;
  int64_t keptDims[kMaxReduceDims] = {}, keptStrides[kMaxReduceDims] = {};
  int64_t redDims[kMaxReduceDims] = {}, redStrides[kMaxReduceDims] = {};
  const void* x = nullptr;
  void* y = nullptr;
};
void launchReduce(const ReduceParams& p, cudaStream_t stream);

// ---- ArgMax / ArgMin, TopK, CumSum: along one axis of X viewed as [outer, len, inner] -------

struct ArgParams {
  DataType type = DataType::kFLOAT;
  int64_t outer = 1, len = 1, inner = 1;
  bool isMax = true, last = false;
  const void* x = nullptr;
  int64_t* y = nullptr;
};
void launchArg(const ArgParams& p, cudaStream_t stream);

struct TopKParams {
  DataType type = DataType::kFLOAT;
  int64_t outer = 1, len = 1, inner = 1, k = 0;
  bool largest = true;
  const void* x = nullptr;
  void* values = nullptr;
  int64_t* indices = nullptr;
};
void launchTopK(const TopKParams& p, cudaStream_t stream);

struct CumSumParams {
  DataType type = DataType::kFLOAT;
  int64_t outer = 1, len = 1, inner = 1;
  bool exclusive = false, reverse = false;
  bool product = false;  //!< CumProd
  const void* x = nullptr;
  void* y = nullptr;
};
void launchCumSum(const CumSumParams& p, cudaStream_t stream);

}  // namespace kiln::cuda
