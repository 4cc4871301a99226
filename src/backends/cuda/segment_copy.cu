// Concat and Split in one launch: the whole tensor viewed as [outer, row] and each piece as
// [outer, pieceRow] at a column offset of the whole row. DenseNet's concatenations have up to
// ~30 inputs; one strided copy launch per input (shape_copy.cu's plans) costs a launch each, which
// at small batch is most of the time. Blocks are spread over the pieces (blockIdx.y) and copy
// 16-byte units where every row size, offset and pointer allows.
#include <algorithm>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/shape_cuda.cuh"

namespace kiln::cuda {

namespace {

struct SegmentArgs {
  int64_t outer = 0, row = 0;  // whole tensor, in units
  char* whole = nullptr;
  char* piece[kMaxSegments] = {};
  int64_t pieceRow[kMaxSegments] = {}, offset[kMaxSegments] = {};  // in units
};

template <typename U, bool kGather>
__global__ void segmentCopyKernel(SegmentArgs a) {
  const int j = blockIdx.y;
  const int64_t pr = a.pieceRow[j], total = a.outer * pr;
  U* whole = reinterpret_cast<U*>(a.whole);
  U* piece = reinterpret_cast<U*>(a.piece[j]);
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = e / pr, c = e - r * pr;
    const int64_t w = r * a.row + a.offset[j] + c;
    if (kGather) whole[w] = piece[e];
    else piece[e] = whole[w];
  }
}

template <typename U>
void launchUnits(const SegmentArgs& a, int n, int64_t maxUnits, bool gather, cudaStream_t s) {
  constexpr int kThreads = 256;
  // Enough blocks to fill the device several times over, shared among the pieces.
  const int64_t want = (maxUnits + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(want, std::max(8, 2048 / n)))), n);
  if (gather) segmentCopyKernel<U, true><<<grid, kThreads, 0, s>>>(a);
  else segmentCopyKernel<U, false><<<grid, kThreads, 0, s>>>(a);
  KILN_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void launchSegmentCopy(const SegmentPlan& plan, void* const* pieces, void* whole, bool gather, cudaStream_t stream) {
  const size_t n = plan.pieceRowBytes.size();
  for (size_t first = 0; first < n; first += kMaxSegments) {
    const size_t count = std::min<size_t>(kMaxSegments, n - first);
    // The widest unit that divides every size and offset and aligns every pointer of this group.
    uint64_t bits = plan.rowBytes | reinterpret_cast<uintptr_t>(whole) | 16;
    for (size_t k = first; k < first + count; ++k)
      bits |= plan.pieceRowBytes[k] | plan.offsetBytes[k] | reinterpret_cast<uintptr_t>(pieces[k]);
    const int64_t unit = static_cast<int64_t>(bits & (~bits + 1));  // lowest set bit, <= 16
    SegmentArgs a;
    a.outer = plan.outer;
    a.row = plan.rowBytes / unit;
    a.whole = static_cast<char*>(whole);
    int64_t maxUnits = 0;
    for (size_t k = 0; k < count; ++k) {
      a.piece[k] = static_cast<char*>(pieces[first + k]);
      a.pieceRow[k] = plan.pieceRowBytes[first + k] / unit;
      a.offset[k] = plan.offsetBytes[first + k] / unit;
      maxUnits = std::max(maxUnits, a.pieceRow[k] * plan.outer);
    }
    if (maxUnits == 0) continue;
    const int c = static_cast<int>(count);
    switch (unit) {
      case 16: launchUnits<uint4>(a, c, maxUnits, gather, stream); break;
      case 8: launchUnits<uint2>(a, c, maxUnits, gather, stream); break;
      case 4: launchUnits<uint32_t>(a, c, maxUnits, gather, stream); break;
      case 2: launchUnits<uint16_t>(a, c, maxUnits, gather, stream); break;
      default: launchUnits<uint8_t>(a, c, maxUnits, gather, stream); break;
    }
  }
}

}  // namespace kiln::cuda
