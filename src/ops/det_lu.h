// The determinant of an n x n row-major matrix by LU with partial pivoting, in place. Shared by
// the CPU reference (ops/attention_norms.cpp) and the CUDA kernel (backends/cuda/norm_misc.cu),
// so both compute exactly the same sequence of operations.
#pragma once
#include <cstdint>

#include "core/host_device.h"

namespace kiln {

KILN_HOST_DEVICE inline double luDeterminant(double* a, int64_t n) {
  double det = 1;
  for (int64_t c = 0; c < n; ++c) {
    int64_t piv = c;
    for (int64_t r = c + 1; r < n; ++r) {
      const double x = a[r * n + c], y = a[piv * n + c];
      if ((x < 0 ? -x : x) > (y < 0 ? -y : y)) piv = r;
    }
    if (a[piv * n + c] == 0) return 0;
    if (piv != c) {
      for (int64_t k = 0; k < n; ++k) {
        const double t = a[c * n + k];
        a[c * n + k] = a[piv * n + k];
        a[piv * n + k] = t;
      }
      det = -det;
    }
    const double p = a[c * n + c];
    det *= p;
    for (int64_t r = c + 1; r < n; ++r) {
      const double f = a[r * n + c] / p;
      for (int64_t k = c; k < n; ++k) a[r * n + k] -= f * a[c * n + k];
    }
  }
  return det;
}

}  // namespace kiln
