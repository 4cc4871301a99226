// CUDA tactics (tactic_table.cpp) for QuantizeLinear / DequantizeLinear (ops/quantize.cpp has the semantics):
// per-tensor, per-axis and blocked scales / zero points (QuantIndex, ops/quantize.h, shared with
// the reference), int8/uint8/int16/uint16 and int4/uint4/int2/uint2 (one per byte; and int32 for
// DequantizeLinear), the float8 kinds and float4e2m1 (core/minifloat.h, the reference's
// conversions), with float32/float16/bfloat16 scales. One thread per element; the quotient is
// rounded to the reference's type and then to nearest-even (rint), as the CPU reference does.
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/conv_act.cuh"
#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "core/minifloat.h"
#include "core/narrow_types.h"
#include "ops/quantize.h"

namespace kiln {

namespace {

// kNF: a float8 kind or float4e2m1 (QParams::narrow says which).
enum Elem : int { kF32, kF16, kBF16, kI8, kU8, kI16, kU16, kI32, kNF };

int elemOf(DataType t) {
  switch (t) {
    case DataType::kFLOAT: return kF32;
    case DataType::kHALF: return kF16;
    case DataType::kBF16: return kBF16;
    case DataType::kINT8: case DataType::kINT4: case DataType::kINT2: return kI8;  // sign-extended bytes
    case DataType::kUINT8: case DataType::kUINT4: case DataType::kUINT2: return kU8;
    case DataType::kFP8E4M3FN: case DataType::kFP8E4M3FNUZ: case DataType::kFP8E5M2: case DataType::kFP8E5M2FNUZ:
    case DataType::kFP4E2M1: return kNF;
    case DataType::kINT16: return kI16;
    case DataType::kUINT16: return kU16;
    case DataType::kINT32: return kI32;
    default: return -1;
  }
}

struct QParams {
  bool quantize = true;
  int x = kF32, scale = kF32, zp = -1, y = kU8, div = kF32;
  int64_t count = 0, lo = 0, hi = 255;
  QuantIndex si, zi;
  MiniFloat narrow;       // the quantized type when it is kNF
  bool saturate = true;   // QuantizeLinear-19+ to a float8 kind
  bool perTensor8 = false;  // quantizePerTensor8 applies (when the pointers are aligned)
};

__device__ float loadF(const void* p, int e, int64_t i) {
  switch (e) {
    case kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}
__device__ int64_t loadI(const void* p, int e, int64_t i) {
  switch (e) {
    case kI8: return static_cast<const int8_t*>(p)[i];
    case kU8: return static_cast<const uint8_t*>(p)[i];
    case kI16: return static_cast<const int16_t*>(p)[i];
    case kU16: return static_cast<const uint16_t*>(p)[i];
    case kI32: return static_cast<const int32_t*>(p)[i];
    default: return 0;
  }
}

//! x / scale, rounded to the division's type (QuantizeLinear's `precision`, the reference's rule).
__device__ float quotient(float x, float scale, int div) {
  float q = x / scale;
  if (div == kF16) q = __half2float(__float2half_rn(q));
  else if (div == kBF16) q = __bfloat162float(__float2bfloat16_rn(q));
  return q;
}

//! A quotient as the integer QuantizeLinear stores: to nearest even, NaN -> the zero point, plus the
//! zero point, saturated to [lo, hi].
__device__ int64_t quantizedInt(double v, int64_t zero, const QParams& p) {
  v = v > 1e18 ? 1e18 : (v < -1e18 ? -1e18 : v);
  int64_t r = isnan(v) ? 0 : static_cast<int64_t>(rint(v));  // as the CPU reference
  r += zero;
  return r < p.lo ? p.lo : (r > p.hi ? p.hi : r);
}

__global__ void quantizeKernel(const void* __restrict__ x, const void* __restrict__ s, const void* __restrict__ z, void* __restrict__ y,
                               QParams p) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.count; i += int64_t(gridDim.x) * blockDim.x) {
    if (p.quantize) {
      double v;
      if (p.x == kI32) {
        v = static_cast<double>(loadI(x, kI32, i)) / static_cast<double>(loadF(s, p.scale, p.si(i)));
      } else {
        v = quotient(loadF(x, p.x, i), loadF(s, p.scale, p.si(i)), p.div);
      }
      if (p.y == kNF) {  // (x / scale + zero_point) rounded once to the narrow float
        if (z) v += miniToFloat(p.narrow, static_cast<const uint8_t*>(z)[p.zi(i)]);
        static_cast<uint8_t*>(y)[i] = miniFromDouble(p.narrow, v, p.saturate);
        continue;
      }
      const int64_t r = quantizedInt(v, z ? loadI(z, p.zp, p.zi(i)) : 0, p);
      switch (p.y) {
        case kI8: static_cast<int8_t*>(y)[i] = static_cast<int8_t>(r); break;
        case kU8: static_cast<uint8_t*>(y)[i] = static_cast<uint8_t>(r); break;
        case kI16: static_cast<int16_t*>(y)[i] = static_cast<int16_t>(r); break;
        default: static_cast<uint16_t*>(y)[i] = static_cast<uint16_t>(r); break;
      }
    } else {
      float d;
      if (p.x == kNF) {
        d = miniToFloat(p.narrow, static_cast<const uint8_t*>(x)[i]);
        if (z) d -= miniToFloat(p.narrow, static_cast<const uint8_t*>(z)[p.zi(i)]);
      } else {
        d = static_cast<float>(loadI(x, p.x, i));
        if (z) d -= static_cast<float>(loadI(z, p.zp, p.zi(i)));
      }
      const float f = d * loadF(s, p.scale, p.si(i));
      switch (p.y) {
        case kF16: static_cast<__half*>(y)[i] = __float2half_rn(f); break;
        case kBF16: static_cast<__nv_bfloat16*>(y)[i] = __float2bfloat16_rn(f); break;
        default: static_cast<float*>(y)[i] = f;
      }
    }
  }
}

//! The per-tensor QuantizeLinear of an INT8 engine (float32 / float16 / bfloat16 to int8 / uint8, one
//! scale and zero point), quantizeKernel's arithmetic (quotient, quantizedInt), 8 elements a thread with 16-byte loads:
//! the generic loop above ran ResNet-50's block-input quantizations at ~0.5 TB/s on the H100.
template <typename T>
__device__ float toF(T v) { return static_cast<float>(v); }
template <>
__device__ float toF(__half v) { return __half2float(v); }
template <>
__device__ float toF(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__global__ void quantizePerTensor8(const T* __restrict__ x, const void* __restrict__ s, const void* __restrict__ z, void* __restrict__ y,
                                   QParams p) {
  const float scale = loadF(s, p.scale, 0);
  const int64_t zero = z ? loadI(z, p.zp, 0) : 0;
  const int64_t groups = p.count / 8;
  for (int64_t g = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; g < groups; g += int64_t(gridDim.x) * blockDim.x) {
    T in[8];
    if (sizeof(T) == 2) *reinterpret_cast<uint4*>(in) = reinterpret_cast<const uint4*>(x)[g];
    else reinterpret_cast<uint4*>(in)[0] = reinterpret_cast<const uint4*>(x)[2 * g], reinterpret_cast<uint4*>(in)[1] = reinterpret_cast<const uint4*>(x)[2 * g + 1];
    uint32_t out[2] = {0, 0};
    for (int k = 0; k < 8; ++k) {
      const int64_t r = quantizedInt(quotient(toF(in[k]), scale, p.div), zero, p);
      out[k / 4] |= (static_cast<uint32_t>(r) & 0xffu) << (8 * (k % 4));
    }
    reinterpret_cast<uint2*>(y)[g] = make_uint2(out[0], out[1]);
  }
}

class QuantizeKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    QParams& p = cuda::makeState<QParams>(state);
    p.quantize = l.op == "QuantizeLinear";
    p.x = elemOf(l.inputs[0].type);
    p.scale = elemOf(l.inputs[1].type);
    p.y = elemOf(l.outputs[0].type);
    p.count = volume(l.inputs[0].dims);
    p.si = quantIndex(l, l.inputs[0].dims, l.inputs[1].dims, "scale");
    if (l.present(2)) {
      p.zp = elemOf(l.inputs[2].type);
      p.zi = quantIndex(l, l.inputs[0].dims, l.inputs[2].dims, "zero point");
    }
    if (p.quantize) {
      quantRange(l.outputs[0].type, p.lo, p.hi);
      p.div = elemOf(quantizeDivisionType(l));
      p.saturate = l.attrs->getInt("saturate", 1) != 0;
    }
    const DataType q = p.quantize ? l.outputs[0].type : l.inputs[0].type;
    if (elemOf(q) == kNF) p.narrow = miniFloatOf(q);
    p.perTensor8 = p.quantize && (p.x == kF32 || p.x == kF16 || p.x == kBF16) && (p.y == kI8 || p.y == kU8) && p.count % 8 == 0 &&
                  volume(l.inputs[1].dims) == 1 && (!l.present(2) || volume(l.inputs[2].dims) == 1);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const QParams& p = cuda::paramsOf<QParams>(state);
    if (p.count == 0) return;
    const void* z = io.in.size() > 2 ? io.in[2].data : nullptr;
    const cudaStream_t st = cuda::streamOf(io);
    const bool aligned = reinterpret_cast<uintptr_t>(io.in[0].data) % 16 == 0 && reinterpret_cast<uintptr_t>(io.out[0].data) % 8 == 0;
    if (p.perTensor8 && aligned) {
      const int64_t groups = p.count / 8;
      const void* x = io.in[0].data;
      if (p.x == kF16) quantizePerTensor8<<<cuda::gridFor(groups), 256, 0, st>>>(static_cast<const __half*>(x), io.in[1].data, z, io.out[0].data, p);
      else if (p.x == kBF16)
        quantizePerTensor8<<<cuda::gridFor(groups), 256, 0, st>>>(static_cast<const __nv_bfloat16*>(x), io.in[1].data, z, io.out[0].data, p);
      else quantizePerTensor8<<<cuda::gridFor(groups), 256, 0, st>>>(static_cast<const float*>(x), io.in[1].data, z, io.out[0].data, p);
    } else {
      quantizeKernel<<<cuda::gridFor(p.count), 256, 0, st>>>(io.in[0].data, io.in[1].data, z, io.out[0].data, p);
    }
    KILN_CUDA_CHECK_LAUNCH();
  }
};

bool supportsQuantize(const LayerDesc& l) {
  if (l.inputs.size() < 2 || l.outputs.size() != 1) return false;
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (l.present(i) && elemOf(l.inputs[i].type) < 0) return false;
  return elemOf(l.outputs[0].type) >= 0;
}

std::unique_ptr<Kernel> createQuantize(const LayerDesc&) { return std::make_unique<QuantizeKernel>(); }

}  // namespace

namespace cuda {
KernelFactory quantizeCuda() { return {supportsQuantize, createQuantize}; }  // Quantize/DequantizeLinear
}  // namespace cuda

}  // namespace kiln
