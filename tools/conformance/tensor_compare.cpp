#include "tensor_compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace kiln::conformance {
namespace {

bool closeEnough(double a, double b, const Tolerance& tol) {
  if (a == b) return true;  // also equal infinities
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return false;
  return std::fabs(a - b) <= tol.atol + tol.rtol * std::fabs(b);
}

// Integers, booleans and indices compare exactly: a bitwise or index result off by one is wrong,
// however large the value (a relative tolerance let int32 results off by 2 million pass). Bytes, not
// values: a bool byte of 0xA5 (the output poison) must not read as `true`.
bool elementMatches(const HostTensor& actual, const HostTensor& expected, int64_t i, const Tolerance& tol) {
  if (comparesExactly(expected.type())) {
    const size_t n = elementSize(expected.type());
    return std::memcmp(static_cast<const char*>(actual.data()) + i * n, static_cast<const char*>(expected.data()) + i * n, n) == 0;
  }
  return closeEnough(actual.getDouble(i), expected.getDouble(i), tol);
}

std::string multiIndex(const Dims& dims, int64_t flat) {
  Dims idx(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    idx[d] = dims[d] ? flat % dims[d] : 0;
    flat = dims[d] ? flat / dims[d] : 0;
  }
  return toString(idx);
}

}  // namespace

bool comparesExactly(DataType t) { return isInteger(t) || t == DataType::kBOOL; }

std::string compareTensors(const HostTensor& actual, const HostTensor& expected, const Tolerance& tol) {
  // As onnx's own backend-test runner: bfloat16 outputs are compared with at least two bf16 ULPs
  // of relative tolerance (the tests' rtol is below bfloat16's resolution).
  Tolerance tolerance = tol;
  if (expected.type() == DataType::kBF16) tolerance.rtol = std::max(tol.rtol, 1.0 / 64);
  // float16: two ULPs too (2^-9). The tests' rtol of 1e-3 is one float16 ULP, and kiln computes a
  // float16 chain in float32 between its layers (as GPUs do) where NumPy rounds after every op:
  // test_attention_4d_causal_fp16_expanded differs from the reference by 2 ULPs in 2 of 192 values.
  if (expected.type() == DataType::kHALF) tolerance.rtol = std::max(tol.rtol, 1.0 / 512);
  if (actual.type() != expected.type())
    return std::string("dtype ") + toString(actual.type()) + ", expected " + toString(expected.type());
  if (actual.dims() != expected.dims())
    return "shape " + toString(actual.dims()) + ", expected " + toString(expected.dims());

  int64_t firstBad = -1, nbBad = 0;
  double maxAbsErr = 0.0;
  for (int64_t i = 0; i < expected.count(); ++i) {
    if (elementMatches(actual, expected, i, tolerance)) continue;
    if (firstBad < 0) firstBad = i;
    ++nbBad;
    double err = std::fabs(actual.getDouble(i) - expected.getDouble(i));
    if (!std::isnan(err) && err > maxAbsErr) maxAbsErr = err;
  }
  if (nbBad == 0) return "";

  std::ostringstream msg;
  msg.precision(9);
  msg << nbBad << " of " << expected.count() << " elements differ; first at "
      << multiIndex(expected.dims(), firstBad) << ": got " << actual.getDouble(firstBad) << ", expected "
      << expected.getDouble(firstBad) << "; max abs err " << maxAbsErr;
  if (comparesExactly(expected.type())) msg << " (compared exactly)";
  else msg << " (rtol " << tolerance.rtol << ", atol " << tolerance.atol << ")";
  return msg.str();
}

}  // namespace kiln::conformance
