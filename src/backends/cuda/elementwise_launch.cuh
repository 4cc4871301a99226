// CUDA elementwise family: the host-side interface between the tactics (elementwise_cuda.cpp,
// compiled by the host compiler) and the kernels (elementwise_*.cu). Plain C++: no device code.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kiln/types.h"

namespace kiln::cuda::ew {

constexpr int kMaxDims = 8;  //!< rank of a broadcast after coalescing
constexpr int kMaxIn = 8;    //!< inputs of one broadcasting launch (PointwiseChain: x + 7 operands)

//! The output shape of a broadcasting op, coalesced (size-1 dims dropped, dims merged where every
//! input is contiguous across them), with each input's strides in elements (0 = broadcast).
//! rank >= 1 always (a scalar output is one dim of size 1).
struct Geom {
  int rank = 1;
  int nIn = 0;
  int64_t total = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strides[kMaxIn][kMaxDims] = {};
};

//! Builds the coalesced geometry of `ins` broadcast to `out`. Throws UnsupportedError when more
//! than kMaxDims dims remain or more than kMaxIn inputs are given.
Geom makeGeom(const Dims& out, const std::vector<Dims>& ins);

// ---------------------------------------------------------------------------------------------
// Type sets: bit i = DataType i.
constexpr uint32_t bit(DataType t) { return 1u << static_cast<unsigned>(t); }
constexpr uint32_t kHalfBf16 = bit(DataType::kHALF) | bit(DataType::kBF16);
constexpr uint32_t kFloats = bit(DataType::kFLOAT) | bit(DataType::kDOUBLE) | kHalfBf16;
constexpr uint32_t kSigned = bit(DataType::kINT8) | bit(DataType::kINT16) | bit(DataType::kINT32) | bit(DataType::kINT64);
constexpr uint32_t kUnsigned = bit(DataType::kUINT8) | bit(DataType::kUINT16) | bit(DataType::kUINT32) | bit(DataType::kUINT64);
constexpr uint32_t kInts = kSigned | kUnsigned;
constexpr uint32_t kNumeric = kFloats | kInts;
constexpr uint32_t kBoolSet = bit(DataType::kBOOL);
constexpr uint32_t kAllTypes = kNumeric | kBoolSet;
constexpr bool inSet(uint32_t set, DataType t) { return (set & bit(t)) != 0; }

// ---------------------------------------------------------------------------------------------
// Unary ops (same shape in and out; output type = input type, or bool for IsNaN/IsInf).
enum class Unary : int {
  kRelu, kLeakyRelu, kElu, kSelu, kCelu, kSigmoid, kHardSigmoid, kHardSwish, kTanh, kSoftplus, kSoftsign, kGelu,
  kGeluTanh, kErf, kSqrt, kExp, kLog, kNeg, kAbs, kReciprocal, kFloor, kCeil, kRound, kSign, kSin, kCos, kTan, kAsin,
  kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh, kMish, kThresholdedRelu, kShrink, kIsNaN, kIsInf, kNot,
  kBitwiseNot,
  kClip,       //!< bounds: device scalars p1 (min) / p2 (max), either may be null
  kPowScalar,  //!< exponent: device scalar p1 of type t1 (any numeric type)
};

//! Input types each unary op accepts (the CPU OpDefs' sets).
constexpr uint32_t unaryTypes(Unary op) {
  switch (op) {
    case Unary::kRelu: case Unary::kNeg: return kFloats | kSigned;
    case Unary::kAbs: case Unary::kSign: case Unary::kErf: case Unary::kShrink: case Unary::kClip:
    case Unary::kPowScalar: return kNumeric;
    case Unary::kNot: return kBoolSet;
    case Unary::kBitwiseNot: return kInts;
    default: return kFloats;
  }
}

struct UnaryArgs {
  float alpha = 0.f, beta = 0.f, gamma = 0.f;
  bool detectNeg = true, detectPos = true;  //!< IsInf
  const void* p1 = nullptr;                 //!< Clip min / Pow exponent (device scalar)
  DataType t1 = DataType::kFLOAT;
  const void* p2 = nullptr;                 //!< Clip max (device scalar)
  DataType t2 = DataType::kFLOAT;
};

//! y[i] = op(x[i]) for n elements of type t (output type: t, or bool for IsNaN/IsInf).
void launchUnary(Unary op, DataType t, const void* x, void* y, int64_t n, const UnaryArgs& a, cudaStream_t s);

// ---------------------------------------------------------------------------------------------
// Binary ops with numpy broadcasting (both inputs of one type).
enum class Binary : int {
  kAdd, kSub, kMul, kDiv, kMod, kFmod, kPow, kPRelu, kMax, kMin, kMean,
  kEqual, kLess, kLessOrEqual, kGreater, kGreaterOrEqual, kAnd, kOr, kXor,
  kBitwiseAnd, kBitwiseOr, kBitwiseXor, kShiftLeft, kShiftRight,
};

constexpr uint32_t binaryTypes(Binary op) {
  switch (op) {
    case Binary::kMean: return kFloats;
    case Binary::kEqual: case Binary::kLess: case Binary::kLessOrEqual: case Binary::kGreater:
    case Binary::kGreaterOrEqual: return kNumeric | kBoolSet;
    case Binary::kAnd: case Binary::kOr: case Binary::kXor: return kBoolSet;
    case Binary::kBitwiseAnd: case Binary::kBitwiseOr: case Binary::kBitwiseXor: case Binary::kShiftLeft:
    case Binary::kShiftRight: return kInts;
    default: return kNumeric;
  }
}
constexpr bool binaryBoolOut(Binary op) { return op >= Binary::kEqual && op <= Binary::kGreaterOrEqual; }

//! out = op(in[0], in[1]) broadcast by `g` (g.nIn == 2); t is the input type.
void launchBinary(Binary op, DataType t, const Geom& g, const void* const* in, void* out, cudaStream_t s);
//! Pow with a base and an exponent of different types (elementwise_binary.cu): the base's type
//! out, computed in double as the reference (integer powers for two integer types).
bool powMixedSupported(DataType base, DataType exponent);
void launchPowMixed(DataType base, DataType exponent, const Geom& g, const void* const* in, void* out, cudaStream_t s);

//! Variadic Sum/Mean/Max/Min over 3 or 4 float/half/bf16/double inputs in one pass.
enum class Fold : int { kSum, kMean, kMax, kMin };
void launchFold(Fold op, DataType t, const Geom& g, const void* const* in, void* out, cudaStream_t s);

//! Where(cond, x, y) on elements of `elemSize` bytes (1, 2, 4 or 8).
void launchWhere(size_t elemSize, const Geom& g, const void* const* in, void* out, cudaStream_t s);

// ---------------------------------------------------------------------------------------------
//! Cast of n elements between any two of the 13 kiln types (ONNX / CPU-reference semantics).
void launchCast(DataType from, DataType to, const void* x, void* y, int64_t n, cudaStream_t s);
//! Cast with a narrow type on either side (float8 kinds, float8e8m0, float4e2m1, int4/uint4/int2/
//! uint2), as the CPU reference: `saturate` for float8 targets, `rounding` for float8e8m0 ones.
void launchCastNarrow(DataType from, DataType to, const void* x, void* y, int64_t n, bool saturate, E8M0Rounding rounding,
                      cudaStream_t s);

// ---------------------------------------------------------------------------------------------
// PointwiseChain (float32): a program of steps run per element in registers.
enum class ChainOp : int {
  kAdd, kSub, kMul, kDiv, kPow, kMax, kMin,  // binary (operand > 0)
  kRelu, kLeakyRelu, kSigmoid, kTanh, kHardSwish, kHardSigmoid, kElu, kSoftplus, kGelu, kGeluTanh, kClip, kSilu, kMish,
  kErf, kSqrt, kExp, kLog, kNeg, kAbs, kReciprocal, kFloor, kCeil,
};
constexpr int kMaxChainSteps = 32;
struct ChainStep {
  int op = 0;
  int operand = -1;  //!< input index (>= 1) of a binary step's operand, -1 for unary
  int swapped = 0;   //!< operand OP value
  float alpha = 0.f, beta = 0.f;
};
struct ChainProgram {
  int nSteps = 0;
  ChainStep steps[kMaxChainSteps];
};
//! out = program(in[0], operands...) where g covers all inputs (g.nIn = number of inputs); every
//! input and the output have `type` (float, half or bfloat16), the math is float32.
void launchChain(const ChainProgram& p, const Geom& g, const void* const* in, void* out, DataType type, cudaStream_t s);

}  // namespace kiln::cuda::ew
