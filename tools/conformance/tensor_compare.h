// Output comparison with ONNX's backend-test rule: |actual - expected| <= atol + rtol * |expected|,
// NaN matching NaN, infinities matching only themselves; dtype and shape must match exactly.
#pragma once
#include <string>

#include "kiln/types.h"

namespace kiln::conformance {

struct Tolerance {
  double rtol = 1e-3;  // onnx's defaults for node tests
  double atol = 1e-7;
};

//! Empty string when `actual` matches `expected`; otherwise a one-line description of the first
//! mismatch (index, values, number of differing elements, largest absolute error).
std::string compareTensors(const HostTensor& actual, const HostTensor& expected, const Tolerance& tol);

}  // namespace kiln::conformance
