// Op definition for Col2Im (opset 18): the inverse of im2col. input (N, C * prod(block_shape), L)
// holds, for each of the L sliding-block positions, one column of block values per channel;
// they are summed back into an image (N, C, image_shape...) of any number of spatial axes.
// Block position l (a multi-index over the blocks grid, row-major) and kernel offset j cover the
// image position l * stride - pad_begin + j * dilation; positions in the padding are dropped.
// image_shape and block_shape are value inputs (the output shape and L depend on them).
#include <type_traits>
#include <vector>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

struct Col2ImGeom {
  std::vector<int64_t> image, block, strides, dilations, padBegin, padEnd, blocks;  // per spatial axis
  int64_t blockVolume = 1, blockCount = 1;
};

std::vector<int64_t> shapeInput(const LayerDesc& l, size_t i, const char* what) {
  const HostTensor& h = knownValue(l, i);
  if (h.dims().size() != 1) opError(l, std::string(what) + " must be rank 1, got " + toString(h.dims()));
  return h.toInts();
}

Col2ImGeom col2ImGeom(const LayerDesc& l) {
  Col2ImGeom g;
  g.image = shapeInput(l, 1, "image_shape");
  g.block = shapeInput(l, 2, "block_shape");
  const size_t s = g.image.size();
  if (s == 0 || g.block.size() != s) opError(l, "image_shape and block_shape must have the same nonzero length");
  auto perAxis = [&](const char* name, size_t count, int64_t dflt) {
    std::vector<int64_t> v = l.attrs->getInts(name, std::vector<int64_t>(count, dflt));
    if (v.size() != count) opError(l, std::string(name) + " must have " + std::to_string(count) + " values");
    return v;
  };
  g.strides = perAxis("strides", s, 1);
  g.dilations = perAxis("dilations", s, 1);
  const std::vector<int64_t> pads = perAxis("pads", 2 * s, 0);
  g.padBegin.assign(pads.begin(), pads.begin() + s);
  g.padEnd.assign(pads.begin() + s, pads.end());
  for (size_t a = 0; a < s; ++a) {
    if (g.image[a] <= 0 || g.block[a] <= 0) opError(l, "image_shape and block_shape must be positive");
    if (g.strides[a] <= 0 || g.dilations[a] <= 0) opError(l, "strides and dilations must be positive");
    if (g.padBegin[a] < 0 || g.padEnd[a] < 0) opError(l, "pads must not be negative");
    const int64_t span = g.dilations[a] * (g.block[a] - 1) + 1, padded = g.image[a] + g.padBegin[a] + g.padEnd[a];
    if (span > padded) opError(l, "the block is larger than the padded image on axis " + std::to_string(a));
    g.blocks.push_back((padded - span) / g.strides[a] + 1);
  }
  g.blockVolume = volume(g.block);  // throws on overflow
  g.blockCount = volume(g.blocks);
  return g;
}

void inferCol2Im(LayerDesc& l) {
  requireInputs(l, 3, 3);
  const Dims& x = l.inputs[0].dims;
  if (x.size() != 3) opError(l, "input must be rank 3 (N, C * prod(block_shape), L), got " + toString(x));
  for (size_t i : {1, 2})
    if (l.inputs[i].type != DataType::kINT64) opError(l, "image_shape and block_shape must be int64");
  if (!l.inputs[1].value.valid() || !l.inputs[2].value.valid()) {
    const int64_t s = l.inputs[1].dims.size() == 1 ? l.inputs[1].dims[0] : -1;
    if (s < 0) opError(l, "image_shape must be a constant or computable at build time (its length sets the rank)");
    setOutput(l, 0, l.inputs[0].type, Dims(static_cast<size_t>(s) + 2, -1));
    return;
  }
  const Col2ImGeom g = col2ImGeom(l);
  if (x[1] >= 0 && x[1] % g.blockVolume != 0)
    opError(l, "input's dim 1 (" + std::to_string(x[1]) + ") is not a multiple of prod(block_shape) = " + std::to_string(g.blockVolume));
  if (x[2] >= 0 && x[2] != g.blockCount)
    opError(l, "input's dim 2 (" + std::to_string(x[2]) + ") must be the number of blocks, " + std::to_string(g.blockCount));
  Dims out{x[0], x[1] >= 0 ? x[1] / g.blockVolume : -1};
  out.insert(out.end(), g.image.begin(), g.image.end());
  setOutput(l, 0, l.inputs[0].type, out);
}

void refCol2Im(const LayerDesc& l, const KernelIO& io) {
  const Col2ImGeom g = col2ImGeom(l);
  const size_t s = g.image.size();
  const int64_t n = io.in[0].dims[0], channels = io.in[0].dims[1] / g.blockVolume;
  const int64_t imageVolume = volume(g.image);
  // For each (kernel offset, block) pair the image element it lands on, or -1 in the padding.
  std::vector<int64_t> target(static_cast<size_t>(g.blockVolume * g.blockCount));
  std::vector<int64_t> j(s), b(s);
  for (int64_t jk = 0; jk < g.blockVolume; ++jk) {
    for (int64_t r = jk, a = static_cast<int64_t>(s) - 1; a >= 0; --a) j[a] = r % g.block[a], r /= g.block[a];
    for (int64_t bk = 0; bk < g.blockCount; ++bk) {
      for (int64_t r = bk, a = static_cast<int64_t>(s) - 1; a >= 0; --a) b[a] = r % g.blocks[a], r /= g.blocks[a];
      int64_t pos = 0;
      for (size_t a = 0; a < s && pos >= 0; ++a) {
        const int64_t p = b[a] * g.strides[a] - g.padBegin[a] + j[a] * g.dilations[a];
        pos = p < 0 || p >= g.image[a] ? -1 : pos * g.image[a] + p;
      }
      target[jk * g.blockCount + bk] = pos;
    }
  }
  dispatchNumeric(io.in[0].type, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw UnsupportedError("Col2Im: bool input");
    } else {
      const T* x = io.in[0].as<const T>();
      T* y = io.out[0].as<T>();
      io.pool->parallelFor(n * channels, 1, [&](int64_t begin, int64_t end) {
        for (int64_t nc = begin; nc < end; ++nc) {
          T* img = y + nc * imageVolume;
          for (int64_t i = 0; i < imageVolume; ++i) img[i] = T(0);
          const T* cols = x + nc * g.blockVolume * g.blockCount;
          for (int64_t i = 0; i < g.blockVolume * g.blockCount; ++i)
            if (target[i] >= 0) img[target[i]] += cols[i];
        }
      });
    }
  });
}

}  // namespace

void registerCol2ImOps(OpRegistry& r) {
  OpDef d;
  d.name = "Col2Im";
  d.infer = inferCol2Im;
  d.ref = refCol2Im;
  d.valueInputs = {1, 2};
  d.minOpset = 18;
  r.add(d);
}

}  // namespace kiln
