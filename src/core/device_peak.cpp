#include "kiln/profiler.h"

namespace kiln {

double DevicePeak::tflopsFor(DataType type, bool matrix) const {
  if (!matrix) return vectorTflops32;  // elementwise math runs in FP32 registers whatever the storage type
  switch (type) {
    case DataType::kHALF:
    case DataType::kBF16: return matrixTflops16 > 0 ? matrixTflops16 : vectorTflops32;
    case DataType::kINT8:
    case DataType::kUINT8: return matrixTflops8 > 0 ? matrixTflops8 : vectorTflops32;
    default: return matrixTflopsTf32 > 0 ? matrixTflopsTf32 : vectorTflops32;
  }
}

}  // namespace kiln
