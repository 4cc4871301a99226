// Physical layouts of the 4-D float tensors that conv/pool layers exchange (see docs/internals.md,
// "Tensor layouts on the CPU" / "on the GPU"): op semantics shared by the layout passes, the
// reference kernels and every backend. Dims stay logical NCHW everywhere in the IR; a layer's
// `kiln_layout_in` / `kiln_layout_out` string attributes (ops/fused_attrs.h) say how the bytes of its X (and, for
// Conv, of its residual R, which always matches Y) / Y are arranged:
//   "nchw"    plain row-major (the default when the attribute is absent);
//   "nChw8c"  [N][C/8][H][W][8]   (oneDNN's AVX2 blocked layout);
//   "nChw16c" [N][C/16][H][W][16] (oneDNN's AVX-512 blocked layout);
//   "nhwc"    [N][H][W][C] (the GPU's layout for float16/bfloat16 conv chains: cuDNN's tensor-core
//             kernels and its runtime fusions want channels last), block kNhwcBlock.
// Blocked layouts are only used when C is a multiple of the block, so a blocked tensor holds
// exactly N*C*H*W elements: buffer sizes never change with the layout.
#pragma once
#include <cstdint>
#include <string>

#include "ir/layer_desc.h"

namespace kiln {
class ThreadPool;

//! The "block" of the nhwc layout (channels last: a block of all C channels, whatever C is).
constexpr int64_t kNhwcBlock = -1;

//! Channel block of a layout name: 1 for "nchw", 8 / 16 for the blocked layouts, kNhwcBlock for
//! "nhwc", 0 when unknown.
int64_t layoutBlock(const std::string& layout);
//! The layout name of a channel block (1, 8, 16 or kNhwcBlock); throws kiln::Error otherwise.
std::string layoutName(int64_t block);

//! Whether a tensor of these dims (right-aligned to rank 4) has the same bytes in NCHW and NHWC
//! order: C == 1 or H == W == 1 (a squeeze-excitation scale [N, C, 1, 1], a bias [C, 1, 1]).
bool layoutInvariantDims(const Dims& d);
//! The dims an elementwise kernel indexes for a tensor of logical dims d (rank <= 4) stored in layout
//! `block`: d itself (plain), {N, H, W, C} (kNhwcBlock; d right-aligned to rank 4), or {N, C/b, H, W, b} for a blocked layout, where a
//! C == 1 broadcast is {N, 1, H, W, 1}. For the tensors of Y's shape and the layout-invariant
//! broadcasts (layoutInvariantDims) these index the bytes as they are stored.
Dims physicalDims(const Dims& d, int64_t block);

//! [n][a][b] -> [n][b][a] for elements of `elem` bytes: NCHW <-> NHWC (a, b = C, H*W or H*W, C),
//! and KCRS -> KRSC weights (a, b = C, R*S).
void transposeInner(const void* x, void* y, int64_t n, int64_t a, int64_t b, size_t elem);

//! Copies n*c*hw floats from layout block `fromBlock` to `toBlock` (1 = plain). c must be a
//! multiple of both blocks. Parallel over (n, channel block) when `pool` is not null.
void convertLayout(const float* x, int64_t fromBlock, float* y, int64_t toBlock, int64_t n, int64_t c, int64_t hw,
                   ThreadPool* pool);

}  // namespace kiln
