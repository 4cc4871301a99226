// "quantize_linear_f32_avx2": QuantizeLinear of a float32 tensor with one (per-tensor) scale and
// zero point to uint8 / int8, 8 elements at a time. It computes what the reference kernel
// (ops/quantize.cpp) computes, bit for bit: x / scale as an IEEE float32 division (not a multiply
// by the reciprocal), rounded half to even, plus the zero point, saturated; NaN gives the zero
// point, as in the reference. Implicit INT8 puts such a layer before a tensor that
// several quantized layers read (ResNet's residual outputs), so it runs once per block.
// "dequantize_linear_f32_avx2": the inverse, uint8 / int8 -> float32, (x - zero_point) * scale in
// float32 as the reference computes it (a Q/DQ model keeps such DQs where no integer layer reads
// the tensor, e.g. before a BatchNormalization that quantize_static left unfolded).
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/cpu_tactics.h"
#include "core/thread_pool.h"
#include "ops/fused_attrs.h"
#include "ops/quantize.h"

namespace kiln::cpu {

namespace {

bool scalarOperand(const LayerDesc& l, size_t i) { return l.present(i) && volume(l.inputs[i].dims) == 1; }

bool supportsQuantize(const LayerDesc& l) {
  if (!__builtin_cpu_supports("avx2") || !hasPlainLayouts(l) || l.inputs.size() < 2 || l.outputs.size() != 1) return false;
  if (l.inputs[0].type != DataType::kFLOAT || !scalarOperand(l, 1) || l.inputs[1].type != DataType::kFLOAT) return false;
  if (l.attrs->getInt("block_size", 0) != 0) return false;
  if (quantizeDivisionType(l) != DataType::kFLOAT) return false;  // `precision` rounds x / scale to 16 bits
  const DataType y = l.outputs[0].type;
  if (y != DataType::kUINT8 && y != DataType::kINT8) return false;
  return l.inputs.size() < 3 || !l.present(2) || (scalarOperand(l, 2) && l.inputs[2].type == y);
}

template <typename Out>
void quantizeRange(const float* x, Out* y, int64_t n, float scale, int32_t zero) {
  constexpr float lo = std::is_same_v<Out, uint8_t> ? 0.f : -128.f, hi = std::is_same_v<Out, uint8_t> ? 255.f : 127.f;
  // Clamp the rounded quotient into [lo - zero, hi - zero] (exact small integers in float), then add
  // the zero point in int32: the same result as the reference's int64 sum and clamp.
  const __m256 vs = _mm256_set1_ps(scale), vlo = _mm256_set1_ps(lo - static_cast<float>(zero)),
               vhi = _mm256_set1_ps(hi - static_cast<float>(zero));
  const __m256i vz = _mm256_set1_epi32(zero);
  int64_t i = 0;
  alignas(32) int32_t q[8];
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i), vs), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm256_andnot_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q), v);  // NaN -> 0
    v = _mm256_min_ps(_mm256_max_ps(v, vlo), vhi);
    _mm256_store_si256(reinterpret_cast<__m256i*>(q), _mm256_add_epi32(_mm256_cvtps_epi32(v), vz));
    for (int k = 0; k < 8; ++k) y[i + k] = static_cast<Out>(q[k]);
  }
  for (; i < n; ++i) {
    const float r = x[i] / scale;
    __m128 v = _mm_round_ss(_mm_setzero_ps(), _mm_set_ss(r != r ? 0.f : r), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm_min_ss(_mm_max_ss(v, _mm256_castps256_ps128(vlo)), _mm256_castps256_ps128(vhi));
    y[i] = static_cast<Out>(_mm_cvtss_si32(v) + zero);
  }
}

class QuantizeKernel : public Kernel {
 public:
  void execute(const KernelIO& io, KernelState*) const override {
    const float scale = io.in[1].as<const float>()[0];
    const bool u8 = io.out[0].type == DataType::kUINT8;
    int32_t zero = 0;
    if (io.in.size() > 2 && io.in[2].data) zero = u8 ? io.in[2].as<const uint8_t>()[0] : io.in[2].as<const int8_t>()[0];
    const float* x = io.in[0].as<const float>();
    io.pool->parallelFor(io.in[0].count, 16384, [&](int64_t b, int64_t e) {
      if (u8) quantizeRange(x + b, io.out[0].as<uint8_t>() + b, e - b, scale, zero);
      else quantizeRange(x + b, io.out[0].as<int8_t>() + b, e - b, scale, zero);
    });
  }
};

std::unique_ptr<Kernel> createQuantize(const LayerDesc&) { return std::make_unique<QuantizeKernel>(); }

bool supportsDequantize(const LayerDesc& l) {
  if (!__builtin_cpu_supports("avx2") || !hasPlainLayouts(l) || l.inputs.size() < 2 || l.outputs.size() != 1) return false;
  const DataType x = l.inputs[0].type;
  if ((x != DataType::kUINT8 && x != DataType::kINT8) || !scalarOperand(l, 1) || l.inputs[1].type != DataType::kFLOAT) return false;
  if (l.attrs->getInt("block_size", 0) != 0 || l.outputs[0].type != DataType::kFLOAT) return false;
  return l.inputs.size() < 3 || !l.present(2) || (scalarOperand(l, 2) && l.inputs[2].type == x);
}

template <typename In>
void dequantizeRange(const In* x, float* y, int64_t n, float scale, float zero) {
  const __m256 vs = _mm256_set1_ps(scale), vz = _mm256_set1_ps(zero);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + i));
    const __m256i w = std::is_same_v<In, uint8_t> ? _mm256_cvtepu8_epi32(b) : _mm256_cvtepi8_epi32(b);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(w), vz), vs));
  }
  for (; i < n; ++i) y[i] = (static_cast<float>(x[i]) - zero) * scale;
}

class DequantizeKernel : public Kernel {
 public:
  void execute(const KernelIO& io, KernelState*) const override {
    const float scale = io.in[1].as<const float>()[0];
    const bool u8 = io.in[0].type == DataType::kUINT8;
    float zero = 0.f;
    if (io.in.size() > 2 && io.in[2].data) zero = u8 ? io.in[2].as<const uint8_t>()[0] : io.in[2].as<const int8_t>()[0];
    float* y = io.out[0].as<float>();
    io.pool->parallelFor(io.in[0].count, 16384, [&](int64_t b, int64_t e) {
      if (u8) dequantizeRange(io.in[0].as<const uint8_t>() + b, y + b, e - b, scale, zero);
      else dequantizeRange(io.in[0].as<const int8_t>() + b, y + b, e - b, scale, zero);
    });
  }
};

std::unique_ptr<Kernel> createDequantize(const LayerDesc&) { return std::make_unique<DequantizeKernel>(); }

}  // namespace

KernelFactory quantizeLinearAvx2() { return {supportsQuantize, createQuantize}; }
KernelFactory dequantizeLinearAvx2() { return {supportsDequantize, createDequantize}; }

}  // namespace kiln::cpu
