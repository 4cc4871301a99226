// QLinearConv / QLinearMatMul: the integer conv and matmul that Q/DQ models lower to
// (builder/passes/lower_qdq.cpp) and that ONNX also defines as ops. What every implementation
// shares: the input slots, the per-channel scalars read from those inputs, and the requantizing
// epilogue, written once so that the reference kernel, the oneDNN tactics and the CUDA tactics
// round the same way.
//
// kiln's extensions (internal; the ONNX ops are the case without them):
//   - y_scale (input 6) omitted: the output is float, act(acc * x_scale * w_scale[c]): float32, or
//     QLinearConv's kiln_float_out_type (float16 / bfloat16 in a reduced-precision GPU engine);
//   - QLinearMatMul input 8: an int32 bias of N values in accumulator units (like QLinearConv's B);
//   - kiln_activation (ops/fused_attrs.h) on both, applied to the real value before requantizing;
//   - QLinearConv inputs 9..11: an int8/uint8 residual R of Y's shape with its per-tensor scale and
//     zero point, added as a real value before the activation (a ResNet block's last conv + Add +
//     Relu + Q in one integer layer, as TensorRT runs INT8 residual networks).
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "ir/layer_desc.h"
#include "ops/activation.h"

namespace kiln {

//! Input slots (ONNX order); kQBias is QLinearConv's B and kiln's bias on QLinearMatMul.
enum QLinearSlot : int { kQX = 0, kQXScale, kQXZero, kQW, kQWScale, kQWZero, kQYScale, kQYZero, kQBias, kQR, kQRScale, kQRZero };

//! The scalars of one quantized conv / matmul, per output channel c (conv: M; matmul: N) and, for
//! QLinearMatMul's per-row a_scale, per row r.
struct QLinearParams {
  std::vector<float> xScale;   //!< 1 value, or M rows (QLinearMatMul per-row a_scale)
  int32_t xZero = 0;           //!< per-tensor (per-row zero points are refused)
  std::vector<float> wScale;   //!< 1 or `channels` values
  std::vector<int32_t> wZero;  //!< 1 or `channels` values
  bool floatOut = false;       //!< y_scale omitted: float32 output
  float yScale = 1.f;
  int32_t yZero = 0;
  int64_t lo = 0, hi = 0;      //!< the quantized output's range
  std::vector<int32_t> bias;   //!< `channels` values in accumulator units, or empty
  Activation act;
  bool residual = false;       //!< QLinearConv's R (inputs 9..11) present
  float rScale = 1.f;
  int32_t rZero = 0;

  float xs(int64_t row) const { return xScale.size() == 1 ? xScale[0] : xScale[row]; }
  float ws(int64_t c) const { return wScale.size() == 1 ? wScale[0] : wScale[c]; }
  int32_t wz(int64_t c) const { return wZero.size() == 1 ? wZero[0] : wZero[c]; }
  int32_t biasAt(int64_t c) const { return bias.empty() ? 0 : bias[c]; }
  //! The float output, or the quantized one as a float holding an integer, for accumulator `acc`
  //! (bias included) of row `row`, channel `c`. Without an activation (or with Relu) the
  //! quantized value is round(acc * (xs * ws / ys)) + y_zero, ONNX Runtime's requantization;
  //! other activations act on the real value acc * xs * ws before it is divided by ys.
  //! With a residual, `r` is its integer value at this output: the real acc * xs * ws + (r - r_zero)
  //! * r_scale (in y_scale units: acc * (xs * ws / ys) + (r - r_zero) * (r_scale / ys)).
  float output(int64_t acc, int64_t row, int64_t c, int32_t r = 0) const {
    const float xw = xs(row) * ws(c);
    const float rq = residual ? static_cast<float>(r - rZero) : 0.f;
    if (floatOut) return act(static_cast<float>(acc) * xw + rq * rScale);
    float v;
    if (act.kind == ActKind::kNone || act.kind == ActKind::kRelu) {
      v = static_cast<float>(acc) * (xw / yScale);
      if (residual) v += rq * (rScale / yScale);
      if (act.kind == ActKind::kRelu && v < 0.f) v = 0.f;
    } else {
      v = act(static_cast<float>(acc) * xw + rq * rScale) / yScale;
    }
    double q = std::nearbyint(static_cast<double>(v)) + yZero;  // round half to even (default mode)
    return static_cast<float>(q < lo ? lo : (q > hi ? hi : q));
  }
};

//! Reads the scalars from the layer's input buffers `in` (io.in, or views of constant values);
//! `channels` is the output channel count, `rows` QLinearMatMul's M (1 for QLinearConv). Checks
//! scale positivity, zero-point types and counts; throws kiln::Error naming the layer.
QLinearParams readQLinearParams(const LayerDesc& l, const std::vector<TensorView>& in, int64_t channels, int64_t rows);
//! Views of the layer's constant input values (empty views where a value is unknown or absent),
//! for tactics that read the scalars at create time.
std::vector<TensorView> constantInputViews(const LayerDesc& l);
//! QLinearConv as a Conv desc with only X and W (slots 0 and 1), for the conv geometry helpers.
LayerDesc qlinearConvView(const LayerDesc& l);
//! Whether every scalar input (scales, zero points, bias) is a known constant.
bool qlinearScalarsConstant(const LayerDesc& l);

class OpRegistry;
//! QLinearConv and QLinearMatMul (ops/qlinear.cpp; registered with the quantize family).
void registerQLinearOps(OpRegistry& r);

}  // namespace kiln
