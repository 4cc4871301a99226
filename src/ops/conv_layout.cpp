// Layout names and the plain <-> blocked conversion shared by the CPU conv/pool tactics and the
// internal LayoutConvert op (ops/layout.cpp).
#include "ops/conv_layout.h"

#include <cstring>

#include "core/thread_pool.h"

namespace kiln {

namespace {
Dims rank4(const Dims& d) {
  Dims p(d.size() < 4 ? 4 - d.size() : 0, 1);
  p.insert(p.end(), d.begin(), d.end());
  return p;
}
}  // namespace

bool layoutInvariantDims(const Dims& d) {
  if (d.size() > 4) return false;
  const Dims p = rank4(d);
  return p[1] == 1 || (p[2] == 1 && p[3] == 1);
}

Dims physicalDims(const Dims& d, int64_t block) {
  if (block == 1) return d;
  const Dims p = rank4(d);
  if (block == kNhwcBlock) return {p[0], p[2], p[3], p[1]};
  if (p[1] % block != 0) return {p[0], 1, p[2], p[3], p[1]};  // C == 1 (a broadcast): {N, 1, H, W, 1}
  return {p[0], p[1] / block, p[2], p[3], block};
}

int64_t layoutBlock(const std::string& layout) {
  if (layout == "nchw") return 1;
  if (layout == "nChw8c") return 8;
  if (layout == "nChw16c") return 16;
  if (layout == "nhwc") return kNhwcBlock;
  return 0;
}

std::string layoutName(int64_t block) {
  switch (block) {
    case 1: return "nchw";
    case 8: return "nChw8c";
    case 16: return "nChw16c";
    case kNhwcBlock: return "nhwc";
    default: throw Error("no tensor layout has a channel block of " + std::to_string(block));
  }
}

void transposeInner(const void* x, void* y, int64_t n, int64_t a, int64_t b, size_t elem) {
  const auto* src = static_cast<const uint8_t*>(x);
  auto* dst = static_cast<uint8_t*>(y);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t p = 0; p < a; ++p)
      for (int64_t q = 0; q < b; ++q)
        std::memcpy(dst + ((i * b + q) * a + p) * elem, src + ((i * a + p) * b + q) * elem, elem);
}

namespace {

//! Offset of element (n, c, s) in layout block b (b = 1: plain NCHW).
inline int64_t offsetOf(int64_t n, int64_t c, int64_t s, int64_t C, int64_t hw, int64_t b) {
  return ((n * (C / b) + c / b) * hw + s) * b + c % b;
}

//! One (n, channel block of `b`) slab: plain -> blocked or back.
template <int kBlock, bool kToBlocked>
void convertSlab(const float* x, float* y, int64_t hw) {
  for (int64_t s = 0; s < hw; ++s)
    for (int j = 0; j < kBlock; ++j) {
      if constexpr (kToBlocked) y[s * kBlock + j] = x[j * hw + s];
      else y[j * hw + s] = x[s * kBlock + j];
    }
}

}  // namespace

void convertLayout(const float* x, int64_t fromBlock, float* y, int64_t toBlock, int64_t n, int64_t c, int64_t hw,
                   ThreadPool* pool) {
  layoutName(fromBlock);  // throws for a block no layout has
  layoutName(toBlock);
  if (c % fromBlock != 0 || c % toBlock != 0)
    throw Error("layout conversion: " + std::to_string(c) + " channels are not a multiple of the channel block");
  const int64_t total = n * c * hw;
  if (fromBlock == toBlock) {
    if (total > 0 && x != y) std::memcpy(y, x, sizeof(float) * static_cast<size_t>(total));
    return;
  }
  // Slabs of one (n, block of the blocked side's channels): contiguous on the blocked side.
  const int64_t b = fromBlock == 1 ? toBlock : toBlock == 1 ? fromBlock : 0;
  auto slabs = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      if (b == 0) {  // blocked -> other blocked (not produced by the layout pass): by index
        const int64_t nb = fromBlock, ni = i / (c / nb), cb = i % (c / nb);
        for (int64_t j = 0; j < nb; ++j)
          for (int64_t s = 0; s < hw; ++s)
            y[offsetOf(ni, cb * nb + j, s, c, hw, toBlock)] = x[offsetOf(ni, cb * nb + j, s, c, hw, fromBlock)];
        continue;
      }
      const float* xs = x + i * b * hw;
      float* ys = y + i * b * hw;
      if (b == 8) fromBlock == 1 ? convertSlab<8, true>(xs, ys, hw) : convertSlab<8, false>(xs, ys, hw);
      else fromBlock == 1 ? convertSlab<16, true>(xs, ys, hw) : convertSlab<16, false>(xs, ys, hw);
    }
  };
  const int64_t count = n * (c / (b == 0 ? fromBlock : b));
  if (pool) pool->parallelFor(count, 1, slabs);
  else slabs(0, count);
}

}  // namespace kiln
