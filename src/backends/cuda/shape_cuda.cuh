// Shared pieces of the CUDA shape family (data movement, index ops, pad, resize): the strided
// copy plan every pure data-movement op lowers to, its launchers, fast 32-bit division, and the
// per-file tactic lists that shape_cuda.cpp collects. Included by .cpp (host) and .cu files.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/cuda_tactics.h"

namespace kiln::cuda {

//! Highest rank a strided copy handles after merging axes (Tile of rank 5 views as rank 10).
constexpr int kMaxCopyRank = 12;

//! dst[obase + sum_k i_k * ostr[k]] = src[ibase + sum_k i_k * istr[k]] for every index i of
//! `dims` (row-major: dims[0] outermost). Offsets and strides in elements; strides may be 0
//! (broadcast) or negative (reversed slices).
struct CopyPlan {
  int rank = 0;
  int64_t dims[kMaxCopyRank] = {};
  int64_t istr[kMaxCopyRank] = {};
  int64_t ostr[kMaxCopyRank] = {};
  int64_t ibase = 0, obase = 0;
  int64_t count() const;
};

//! A plan from dims and strides (any rank): size-1 axes are dropped and axes contiguous in both
//! tensors merged; throws UnsupportedError when more than kMaxCopyRank axes remain.
CopyPlan makeCopyPlan(const std::vector<int64_t>& dims, const std::vector<int64_t>& istr,
                      const std::vector<int64_t>& ostr, int64_t ibase = 0, int64_t obase = 0);

//! Row-major strides of dims (as ops/op_util.h's rowMajorStrides).
std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& dims);

//! Runs a plan on `stream` for elements of `es` bytes (1, 2, 4 or 8): a memcpy when contiguous,
//! a tiled shared-memory transpose when the innermost output axis is strided in the input and
//! another axis is contiguous there, otherwise a gather with the widest vector width (up to 16
//! bytes) the strides, sizes and pointers allow.
void launchCopy(const CopyPlan& plan, size_t es, const void* src, void* dst, cudaStream_t stream);

//! Concat/Split along one axis as [outer, row] bytes of the whole tensor and, per piece, a
//! [outer, pieceRow] block at a byte offset of each whole row; pieces of zero size are dropped.
struct SegmentPlan {
  int64_t outer = 0, rowBytes = 0;
  std::vector<int64_t> pieceRowBytes, offsetBytes;
};
//! Pieces per launch (a launch's parameters hold their pointers).
constexpr int kMaxSegments = 32;

//! gather: pieces -> whole (Concat); otherwise whole -> pieces (Split). One launch per
//! kMaxSegments pieces, 16-byte units where sizes, offsets and pointers allow.
void launchSegmentCopy(const SegmentPlan& plan, void* const* pieces, void* whole, bool gather, cudaStream_t stream);

//! Fills `count` elements of `es` bytes with the pattern `value` (es bytes, little endian).
void launchFill(void* dst, int64_t count, size_t es, uint64_t value, cudaStream_t stream);

//! Copies `bytes` device-to-device unless dst == src.
void copyDevice(void* dst, const void* src, size_t bytes, cudaStream_t stream);

//! Division by a run-time constant with a multiply and a shift (n, d < 2^31).
struct FastDiv {
  uint32_t d = 1, m = 1, s = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor) {
    s = 0;
    while ((uint64_t(1) << s) < divisor) ++s;
    m = static_cast<uint32_t>(((uint64_t(1) << 32) * ((uint64_t(1) << s) - divisor)) / divisor + 1);
  }
  __host__ __device__ __forceinline__ uint32_t div(uint32_t n) const {
#ifdef __CUDA_ARCH__
    uint32_t t = __umulhi(n, m);
#else
    uint32_t t = static_cast<uint32_t>((uint64_t(n) * m) >> 32);
#endif
    return static_cast<uint32_t>((uint64_t(t) + n) >> s);
  }
};

}  // namespace kiln::cuda
