// "im2col_gemm": Conv as a matrix product per (image, group): Y[Mg, OHW] = W[Mg, Cg*k] x col[Cg*k, OHW]
// with kiln's own sgemm. 1x1 stride-1 unpadded convolutions skip im2col (X already is `col`).
// Bias and the fused activation run in the GEMM epilogue; the residual is copied into Y first and
// accumulated with beta = 1.
#include <algorithm>
#include <cstring>

#include "backends/cpu/conv_cpu_common.h"
#include "backends/cpu/gemm.h"
#include "core/thread_pool.h"

namespace kiln::cpu {

namespace {

bool isPointwise(const Window3& w) {
  for (int a = 0; a < 3; ++a)
    if (w.kernel[a] != 1 || w.stride[a] != 1 || w.padBegin[a] != 0 || w.padEnd[a] != 0) return false;
  return true;
}

//! Fills row r of the column matrix: tap (c, kd, kh, kw) for every output position.
void im2colRow(const float* x, const Window3& w, int64_t r, float* row) {
  const int64_t kSize = w.kernelSize();
  const int64_t c = r / kSize, k = r % kSize;
  const int64_t kd = k / (w.kernel[1] * w.kernel[2]), kh = (k / w.kernel[2]) % w.kernel[1], kw = k % w.kernel[2];
  const float* xc = x + c * w.inSize();
  // Output columns whose input column iw = ow*s - pb + kw*d lies inside [0, in).
  const int64_t off = kw * w.dilation[2] - w.padBegin[2], s = w.stride[2];
  int64_t owLo = off >= 0 ? 0 : (-off + s - 1) / s;
  int64_t owHi = w.in[2] - 1 - off < 0 ? 0 : (w.in[2] - 1 - off) / s + 1;
  owLo = std::min(owLo, w.out[2]);
  owHi = std::clamp(owHi, owLo, w.out[2]);
  for (int64_t od = 0; od < w.out[0]; ++od) {
    const int64_t id = od * w.stride[0] - w.padBegin[0] + kd * w.dilation[0];
    for (int64_t oh = 0; oh < w.out[1]; ++oh, row += w.out[2]) {
      const int64_t ih = oh * w.stride[1] - w.padBegin[1] + kh * w.dilation[1];
      if (id < 0 || id >= w.in[0] || ih < 0 || ih >= w.in[1]) {
        std::memset(row, 0, sizeof(float) * w.out[2]);
        continue;
      }
      const float* xr = xc + (id * w.in[1] + ih) * w.in[2] + off;
      std::fill(row, row + owLo, 0.f);
      if (s == 1) std::memcpy(row + owLo, xr + owLo, sizeof(float) * (owHi - owLo));
      else
        for (int64_t ow = owLo; ow < owHi; ++ow) row[ow] = xr[ow * s];
      std::fill(row + owHi, row + w.out[2], 0.f);
    }
  }
}

class Im2colConvKernel : public Kernel {
 public:
  explicit Im2colConvKernel(const LayerDesc& l) : k_(convConstants(l)) {}

  size_t reshape(const LayerDesc& concrete, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<ConvShapeState>();
    s->problem = resolveConv(concrete);
    const ConvProblem& p = s->problem;
    size_t bytes = 0;
    if (!isPointwise(p.win))
      bytes = static_cast<size_t>(volume({p.inChannelsPerGroup(), p.win.kernelSize(), p.win.outSize()})) * sizeof(float);
    state = std::move(s);
    return bytes;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const ConvProblem& p = static_cast<ConvShapeState*>(state)->problem;
    const Window3& w = p.win;
    const int64_t cg = p.inChannelsPerGroup(), mg = p.outChannelsPerGroup();
    const int64_t kDim = cg * w.kernelSize(), outSize = w.outSize();
    const bool pointwise = isPointwise(w);
    const float* x = io.in[0].as<const float>();
    const float* res = residualOf(io);
    float* y = io.out[0].as<float>();
    float* col = static_cast<float*>(io.workspace);
    const float* weights = k_.weights.as<float>();
    for (int64_t n = 0; n < p.batch; ++n)
      for (int64_t g = 0; g < p.group; ++g) {
        const float* xg = x + (n * p.inChannels + g * cg) * w.inSize();
        const int64_t yOff = (n * p.outChannels + g * mg) * outSize;
        const float* b = xg;
        if (!pointwise) {
          io.pool->parallelFor(kDim, 4, [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) im2colRow(xg, w, r, col + r * outSize);
          });
          b = col;
        }
        if (res && res != y) std::memcpy(y + yOff, res + yOff, sizeof(float) * mg * outSize);
        GemmEpilogue ep;
        ep.rowBias = k_.biasData() ? k_.biasData() + g * mg : nullptr;
        ep.act = k_.act;
        sgemm(false, false, mg, outSize, kDim, 1.f, weights + g * mg * kDim, kDim, b, outSize, res ? 1.f : 0.f,
              y + yOff, outSize, io.pool, ep);
      }
  }

 private:
  ConvConstants k_;
};

bool supportsIm2col(const LayerDesc& l) { return isPlainFloatConv(l); }

std::unique_ptr<Kernel> createIm2col(const LayerDesc& l) { return std::make_unique<Im2colConvKernel>(l); }

}  // namespace

KernelFactory im2colConv() { return {supportsIm2col, createIm2col}; }

}  // namespace kiln::cpu
