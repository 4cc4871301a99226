// Output comparison. dtype and shape must match exactly; integer and bool outputs (values, indices,
// masks, bit patterns) must match exactly; floats follow ONNX's backend-test rule
// |actual - expected| <= atol + rtol * |expected|, NaN matching NaN, infinities only themselves.
// The float tolerances are per test, hence per op: onnx declares them on its test cases (rtol/atol
// in meta.json, default rtol 1e-3, atol 1e-7); float16 outputs get rtol >= 2^-9 and bfloat16
// rtol >= 2^-6 (two ULPs of the type). tests/conformance/README.md lists them.
#pragma once
#include <string>

#include "kiln/types.h"

namespace kiln::conformance {

struct Tolerance {
  double rtol = 1e-3;  // onnx's defaults for node tests
  double atol = 1e-7;
};

//! Whether outputs of type `t` are compared exactly (integers and bool).
bool comparesExactly(DataType t);

//! Empty string when `actual` matches `expected`; otherwise a one-line description of the first
//! mismatch (index, values, number of differing elements, largest absolute error).
std::string compareTensors(const HostTensor& actual, const HostTensor& expected, const Tolerance& tol);

}  // namespace kiln::conformance
