// Op definitions for the type-converting elementwise ops: Cast, CastLike.
// These are `anyType`: they handle every kiln element type themselves, including float16 and
// bfloat16 (the builder relies on Cast to convert those to and from float32); casts to or from
// the narrow types (float8, float4, int4, int2) go through cast_narrow.cpp.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/cast_narrow.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerElementwiseCastOps(OpRegistry& r);  // called from elementwise.cpp
void registerBitCastOps(OpRegistry& r);           // bitcast.cpp

namespace {

// Storage types for the two 16-bit float formats (distinct from uint16_t for dispatch).
struct Half { uint16_t bits; };
struct Bf16 { uint16_t bits; };

//! Calls f(T{}) with T the storage type of `t` (the 13 standard types; narrow ones: cast_narrow.cpp).
template <typename F>
void dispatchAll(DataType t, F&& f) {
  dispatchType<kAllTypes, Half, Bf16>(t, std::forward<F>(f));
}

//! Rounds `v` to float with round-to-odd: a later round-to-nearest-even to a narrower format
//! (half: 11 bits, bf16: 8 bits) then equals a single correct rounding of `v`.
float roundToOddFloat(long double v) {
  float f = static_cast<float>(v);
  if (!std::isfinite(v) || static_cast<long double>(f) == v) return f;
  if (std::fabs(static_cast<long double>(f)) > std::fabs(v)) f = std::nextafter(f, 0.0f);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= 1u;
  std::memcpy(&f, &bits, 4);
  return f;
}

//! Float -> integer as ONNX/numpy: truncation toward zero; out-of-range values (undefined in
//! ONNX) saturate to the int64 range and then wrap to the target width; NaN gives 0.
template <typename D>
D floatToInt(long double v) {
  if (std::isnan(v)) return D(0);
  v = std::trunc(v);
  if constexpr (std::is_same_v<D, uint64_t>) {
    if (v >= 0x1p63L) return v >= 0x1p64L ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(v);
  }
  if (v >= 0x1p63L) return static_cast<D>(std::numeric_limits<int64_t>::max());
  if (v < -0x1p63L) return static_cast<D>(std::numeric_limits<int64_t>::min());
  return static_cast<D>(static_cast<int64_t>(v));  // modular narrowing (C++20)
}

template <typename T>
constexpr bool kIsHalfLike = std::is_same_v<T, Half> || std::is_same_v<T, Bf16>;

//! Converts one element from S to D following ONNX Cast (numpy astype) rules.
template <typename D, typename S>
D castOne(S s) {
  if constexpr (std::is_same_v<S, Half>) {
    return castOne<D>(halfToFloat(s.bits));
  } else if constexpr (std::is_same_v<S, Bf16>) {
    return castOne<D>(bf16ToFloat(s.bits));
  } else if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, Bf16>) {
    float f;
    if constexpr (std::is_same_v<S, bool>) f = s ? 1.f : 0.f;
    else if constexpr (std::is_same_v<S, float>) f = s;
    else f = roundToOddFloat(static_cast<long double>(s));  // double and 64-bit ints: exact in long double
    if constexpr (std::is_same_v<D, Half>) return Half{floatToHalf(f)};
    else return Bf16{floatToBf16(f)};
  } else if constexpr (std::is_same_v<D, bool>) {
    return s != S(0);  // NaN -> true, like numpy
  } else if constexpr (std::is_same_v<S, bool>) {
    return D(s ? 1 : 0);
  } else if constexpr (std::is_floating_point_v<D>) {
    return static_cast<D>(s);  // round to nearest even; out of range -> inf
  } else if constexpr (std::is_floating_point_v<S>) {
    return floatToInt<D>(static_cast<long double>(s));
  } else {
    return static_cast<D>(s);  // integer -> integer: keeps the low bits (two's complement)
  }
}

}  // namespace

void castStandard(const TensorView& in, const TensorView& out) {
  if (in.type == out.type) {
    if (in.count) std::memmove(out.data, in.data, static_cast<size_t>(in.count) * elementSize(in.type));
    return;
  }
  dispatchAll(in.type, [&](auto stag) {
    using S = decltype(stag);
    dispatchAll(out.type, [&](auto dtag) {
      using D = decltype(dtag);
      const S* x = in.as<S>();
      D* y = out.as<D>();
      for (int64_t i = 0; i < in.count; ++i) y[i] = castOne<D>(x[i]);
    });
  });
}

//! Cast-25+'s round_mode ("up", the default, "down" or "nearest"), used by float8e8m0 targets only.
E8M0Rounding castRounding(const LayerDesc& l) {
  const std::string mode = l.attrs->getString("round_mode", "up");
  if (mode == "up") return E8M0Rounding::kUp;
  if (mode == "down") return E8M0Rounding::kDown;
  if (mode == "nearest") return E8M0Rounding::kNearest;
  opError(l, "round_mode must be up, down or nearest, got '" + mode + "'");
}

namespace {

void castBuffer(const TensorView& in, const TensorView& out, bool saturate, E8M0Rounding rounding) {
  if (isNarrowCast(in.type, out.type) && in.type != out.type) castNarrow(in, out, saturate, rounding);
  else castStandard(in, out);
}

void castInfer(LayerDesc& l) {
  requireInputs(l, 1, 1);
  if (!l.attrs->has("to")) opError(l, "missing required attribute 'to'");
  castRounding(l);
  setOutput(l, 0, fromOnnxType(l, l.attrs->getInt("to", 0)), l.inputs[0].dims);
}

void castLikeInfer(LayerDesc& l) {
  requireInputs(l, 2, 2);
  setOutput(l, 0, l.inputs[1].type, l.inputs[0].dims);
}

//! saturate (Cast-19+, default 1) only matters for float8 targets, round_mode for float8e8m0.
void castRef(const LayerDesc& l, const KernelIO& io) {
  castBuffer(io.in[0], io.out[0], l.attrs->getInt("saturate", 1) != 0, castRounding(l));
}

//! Cast-1..5 names the target type with a string; later opsets use the TensorProto code.
void castNormalize(Network&, Layer& layer, int opset) {
  if (opset >= 6 || !layer.attrs.has("to")) return;
  static const char* const kNames[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING",
                                       "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  std::string name = layer.attrs.getString("to", "");
  for (int64_t code = 1; code < static_cast<int64_t>(std::size(kNames)); ++code)
    if (name == kNames[code]) {
      layer.attrs.set("to", code);
      return;
    }
  throw Error("layer '" + layer.name + "' (Cast-" + std::to_string(opset) + "): unknown target type '" + name + "'");
}

}  // namespace

DataType fromOnnxType(const LayerDesc& l, int64_t code) {
  switch (code) {
    case 1: return DataType::kFLOAT;
    case 2: return DataType::kUINT8;
    case 3: return DataType::kINT8;
    case 4: return DataType::kUINT16;
    case 5: return DataType::kINT16;
    case 6: return DataType::kINT32;
    case 7: return DataType::kINT64;
    case 9: return DataType::kBOOL;
    case 10: return DataType::kHALF;
    case 11: return DataType::kDOUBLE;
    case 12: return DataType::kUINT32;
    case 13: return DataType::kUINT64;
    case 16: return DataType::kBF16;
    case 17: return DataType::kFP8E4M3FN;
    case 18: return DataType::kFP8E4M3FNUZ;
    case 19: return DataType::kFP8E5M2;
    case 20: return DataType::kFP8E5M2FNUZ;
    case 21: return DataType::kUINT4;
    case 22: return DataType::kINT4;
    case 23: return DataType::kFP4E2M1;
    case 24: return DataType::kFP8E8M0;
    case 25: return DataType::kUINT2;
    case 26: return DataType::kINT2;
    default: break;
  }
  if (code == 8 || code == 14 || code == 15 || code == 27 || code == 28)
    throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): ONNX data type " + std::to_string(code) +
                           " (string/complex/float6) is not supported");
  opError(l, "attribute 'to' has an invalid ONNX data type " + std::to_string(code));
}

void registerElementwiseCastOps(OpRegistry& r) {
  OpDef cast;
  cast.name = "Cast";
  cast.infer = castInfer;
  cast.ref = castRef;
  cast.anyType = true;
  cast.normalize = castNormalize;
  r.add(cast);

  OpDef like;
  like.name = "CastLike";
  like.infer = castLikeInfer;
  like.ref = castRef;
  like.anyType = true;
  like.minOpset = 15;
  r.add(like);
  registerBitCastOps(r);
  // Identity is registered by the shape family (shape.cpp), as an anyType copy.
}

}  // namespace kiln
