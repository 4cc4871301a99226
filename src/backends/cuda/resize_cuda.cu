// CUDA tactic of the resize family: Resize / Upsample of the two innermost axes (NCHW and any
// tensor whose leading axes are not resized), modes nearest, linear and cubic (antialias too),
// every coordinate transformation the CPU reference supports, tf_crop_and_resize with its
// extrapolation_value included. The sampling taps (input indices and weights per output
// row/column, and which outputs fall outside the crop) come from the op definition
// (ops/resize.cpp), so rounding matches the reference; they are computed in reshape() and uploaded
// to device memory owned by the kernel state. Nearest copies raw elements of any size; linear and
// cubic compute in float32 for float32/float16/bfloat16.
#include <cmath>
#include <algorithm>
#include <cstring>

#include "core/type_dispatch.h"
#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/shape_cuda.cuh"
#include "ops/op_util.h"
#include "ops/resize_plan.h"

namespace kiln {

namespace {

using cuda::dispatchCudaType;
using cuda::dispatchElementSize;
using cuda::gridFor;
using cuda::streamOf;

struct ResizeParams {
  int64_t planes, ih, iw, oh, ow, total;
  int ty, tx;  // taps per output row / column
  const int32_t* yi;
  const float* yw;
  const int32_t* xi;
  const float* xw;
  const uint8_t* yo;  // outputs outside the crop per row / column (null: none is)
  const uint8_t* xo;
  float ext;          // extrapolation_value (linear/cubic)
  uint64_t extBits;   // the same in the tensor's type (nearest copies raw elements)
};

template <typename T>
__global__ void resizeNearestKernel(const T* __restrict__ src, T* __restrict__ dst, ResizeParams p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t ox = i % p.ow, t = i / p.ow, oy = t % p.oh, plane = t / p.oh;
    if (p.yo && (p.yo[oy] || p.xo[ox])) {
      T e;
      memcpy(&e, &p.extBits, sizeof(T));
      dst[i] = e;
      continue;
    }
    dst[i] = src[(plane * p.ih + p.yi[oy]) * p.iw + p.xi[ox]];
  }
}

template <typename T>
__global__ void resizeFilterKernel(const T* __restrict__ src, T* __restrict__ dst, ResizeParams p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t ox = i % p.ow, t = i / p.ow, oy = t % p.oh, plane = t / p.oh;
    // As the reference's separable passes (rows first): a row outside the crop holds
    // extrapolation_value before the column pass; an output column outside it gets the value.
    if (p.yo && p.xo[ox]) {
      dst[i] = static_cast<T>(p.ext);
      continue;
    }
    if (p.yo && p.yo[oy]) {
      float w = 0.f;
      for (int b = 0; b < p.tx; ++b) w += p.xw[ox * p.tx + b];
      dst[i] = static_cast<T>(p.ext * w);
      continue;
    }
    const T* base = src + plane * p.ih * p.iw;
    float acc = 0.f;
    for (int a = 0; a < p.ty; ++a) {
      const T* row = base + static_cast<int64_t>(p.yi[oy * p.ty + a]) * p.iw;
      float r = 0.f;
      for (int b = 0; b < p.tx; ++b) r += p.xw[ox * p.tx + b] * static_cast<float>(row[p.xi[ox * p.tx + b]]);
      acc += p.yw[oy * p.ty + a] * r;
    }
    dst[i] = static_cast<T>(acc);
  }
}

//! Device tap tables of one concrete shape.
struct ResizeState : KernelState {
  ResizeParams p{};
  void* tables = nullptr;
  ~ResizeState() override {
    if (tables) cudaFree(tables);
  }
};

//! True when an axis's taps copy every input element to the same output position. Linear and cubic
//! filters keep 2 or 4 taps at scale 1 (all weight on one of them), so the weights decide, not
//! the tap count.
bool identityAxis(int count, const std::vector<int64_t>& index, const std::vector<float>& weight, int64_t in, int64_t out) {
  if (in != out) return false;
  for (int64_t o = 0; o < out; ++o) {
    float own = 0.f, other = 0.f;
    for (int t = 0; t < count; ++t) {
      const size_t k = static_cast<size_t>(o * count + t);
      (index[k] == o ? own : other) += std::fabs(weight[k]);
    }
    if (std::fabs(own - 1.f) > 1e-6f || other > 1e-6f) return false;
  }
  return true;
}

class ResizeKernel : public Kernel {
 public:
  explicit ResizeKernel(bool nearest) : nearest_(nearest) {}

  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& in = l.inputs[0].dims;
    const size_t rank = in.size();
    if (rank < 2) throw UnsupportedError("CUDA Resize: rank-1 input");
    const ResizeSamplingPlan plan = resizeSamplingPlan(l);
    const Dims& out = plan.outDims;
    const std::vector<int>& taps = plan.taps;
    const std::vector<std::vector<int64_t>>& index = plan.index;
    const std::vector<std::vector<float>>& weight = plan.weight;
    const std::vector<std::vector<uint8_t>>& outside = plan.outside;
    const bool anyOutside = plan.anyOutside;
    auto outsideAny = [](const std::vector<uint8_t>& v) { return std::find(v.begin(), v.end(), 1) != v.end(); };
    for (size_t a = 0; a + 2 < rank; ++a)
      if (!identityAxis(taps[a], index[a], weight[a], in[a], out[a]) || outsideAny(outside[a]))
        throw UnsupportedError("CUDA Resize: only the two innermost axes may be resized");
    auto s = std::make_unique<ResizeState>();
    ResizeParams& p = s->p;
    p.planes = volume(Dims(in.begin(), in.end() - 2));
    p.ih = in[rank - 2];
    p.iw = in[rank - 1];
    p.oh = out[rank - 2];
    p.ow = out[rank - 1];
    p.ty = taps[rank - 2];
    p.tx = taps[rank - 1];
    p.total = p.planes * p.oh * p.ow;
    if (p.ih >= (int64_t(1) << 31) || p.iw >= (int64_t(1) << 31)) throw UnsupportedError("CUDA Resize: axis too long");
    if (p.total > 0) {
      const int64_t ny = p.oh * p.ty, nx = p.ow * p.tx;
      std::vector<int32_t> idx(static_cast<size_t>(ny + nx));
      std::vector<float> w(static_cast<size_t>(ny + nx));
      for (int64_t i = 0; i < ny; ++i) {
        idx[i] = static_cast<int32_t>(index[rank - 2][i]);
        w[i] = weight[rank - 2][i];
      }
      for (int64_t i = 0; i < nx; ++i) {
        idx[ny + i] = static_cast<int32_t>(index[rank - 1][i]);
        w[ny + i] = weight[rank - 1][i];
      }
      const size_t ib = idx.size() * sizeof(int32_t), wb = w.size() * sizeof(float);
      std::vector<uint8_t> flags;  // row then column outside flags
      if (anyOutside) {
        flags.insert(flags.end(), outside[rank - 2].begin(), outside[rank - 2].end());
        flags.insert(flags.end(), outside[rank - 1].begin(), outside[rank - 1].end());
      }
      KILN_CUDA_CHECK(cudaMalloc(&s->tables, ib + wb + flags.size()));
      KILN_CUDA_CHECK(cudaMemcpy(s->tables, idx.data(), ib, cudaMemcpyHostToDevice));
      KILN_CUDA_CHECK(cudaMemcpy(static_cast<uint8_t*>(s->tables) + ib, w.data(), wb, cudaMemcpyHostToDevice));
      if (anyOutside) {
        uint8_t* fp = static_cast<uint8_t*>(s->tables) + ib + wb;
        KILN_CUDA_CHECK(cudaMemcpy(fp, flags.data(), flags.size(), cudaMemcpyHostToDevice));
        p.yo = fp;
        p.xo = fp + p.oh;
        p.ext = static_cast<float>(plan.extrapolation);
        p.extBits = plan.extBits;
      }
      auto* ip = static_cast<int32_t*>(s->tables);
      auto* wp = reinterpret_cast<float*>(static_cast<uint8_t*>(s->tables) + ib);
      p.yi = ip;
      p.xi = ip + ny;
      p.yw = wp;
      p.xw = wp + ny;
    }
    state = std::move(s);
    return 0;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const ResizeParams& p = static_cast<ResizeState*>(state)->p;
    if (p.total == 0) return;
    const unsigned grid = gridFor(p.total);
    cudaStream_t st = streamOf(io);
    if (nearest_) {
      dispatchElementSize(elementSize(io.in[0].type), [&](auto tag) {
        using T = decltype(tag);
        resizeNearestKernel<T><<<grid, 256, 0, st>>>(io.in[0].as<const T>(), io.out[0].as<T>(), p);
      });
    } else {
      dispatchCudaType<kFloatTypes>(io.in[0].type, [&](auto tag) {
        using T = decltype(tag);
        resizeFilterKernel<T><<<grid, 256, 0, st>>>(io.in[0].as<const T>(), io.out[0].as<T>(), p);
      }, "CUDA Resize linear/cubic");
    }
    KILN_CUDA_CHECK_LAUNCH();
  }

 private:
  bool nearest_;
};

//! Whether input i's known value leaves every leading axis (all but the last two) unchanged.
bool leadingAxesKept(const LayerDesc& l, int i, bool sizes) {
  if (i >= static_cast<int>(l.inputs.size()) || !l.present(i) || !l.inputs[i].value.valid()) return true;
  const HostTensor& v = l.inputs[i].value;
  const Dims& d = l.inputs[0].dims;
  if (v.count() == 0) return true;  // an empty scales/sizes input is absent
  if (v.count() != static_cast<int64_t>(d.size())) return true;  // per `axes`: checked on the attribute
  for (size_t a = 0; a + 2 < d.size(); ++a) {
    double expect = sizes ? static_cast<double>(d[a]) : 1.0;
    if (sizes && d[a] < 0) continue;
    if (v.getDouble(static_cast<int64_t>(a)) != expect) return false;
  }
  return true;
}

bool supportsResize(const LayerDesc& l) {
  if (l.inputs.empty() || l.inputs[0].dims.size() < 2) return false;
  const int64_t rank = static_cast<int64_t>(l.inputs[0].dims.size());
  const std::string mode = l.attrs->getString("mode", "nearest");
  const DataType t = l.inputs[0].type;
  const size_t es = elementSize(t);
  if (mode == "nearest") {
    if (es != 1 && es != 2 && es != 4 && es != 8) return false;
  } else if (mode == "linear" || mode == "cubic") {
    if (!isFloatType(t)) return false;
  } else {
    return false;
  }
  if (l.op == "Upsample") return leadingAxesKept(l, 1, false);
  for (int64_t a : l.attrs->getInts("axes")) {
    int64_t n = a < 0 ? a + rank : a;
    if (n < rank - 2) return false;
  }
  if (l.attrs->getString("keep_aspect_ratio_policy", "stretch") != "stretch" && l.attrs->getInts("axes").empty() && rank > 2)
    return false;  // one scale for every axis would resize the leading ones
  return leadingAxesKept(l, 2, false) && leadingAxesKept(l, 3, true);
}

std::unique_ptr<Kernel> createResize(const LayerDesc& l) {
  return std::make_unique<ResizeKernel>(l.attrs->getString("mode", "nearest") == "nearest");
}

}  // namespace

namespace cuda {
KernelFactory resizeCuda() { return {supportsResize, createResize}; }  // Resize, Upsample
}  // namespace cuda

}  // namespace kiln
