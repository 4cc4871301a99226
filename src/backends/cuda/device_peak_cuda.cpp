// A CUDA device's peak rates for rooflines, from its attributes: SMs * peak clock * operations per
// SM per cycle of its architecture (dense, no sparsity), and memory clock * bus width * 2 (DDR).
// The clock attribute is the highest boost clock, so these are at or slightly above the vendor's
// datasheet figures (H100/H200: ~1070 vs 989 TFLOP/s FP16); a large FP16 GEMM reaches ~790 here.
#include <cuda_runtime.h>

#include "backends/cuda/cuda_util.h"
#include "backends/cuda/device_peak_cuda.h"

namespace kiln::cuda {
namespace {

struct PerSm {
  double fp16, int8, tf32, fp32;  // FLOPs per SM per cycle
};

PerSm perSm(int major, int minor) {
  if (major == 7) return {1024, minor >= 5 ? 2048.0 : 1024.0, 0, 128};  // Volta has no int8 or tf32 tensor math
  if (major == 8 && minor == 0) return {2048, 4096, 1024, 128};         // A100
  if (major == 8) return {1024, 2048, 512, 256};                        // Ampere/Ada workstation parts
  if (major == 9) return {4096, 8192, 2048, 256};                       // Hopper
  if (major >= 10) return {8192, 16384, 4096, 256};                     // Blackwell (data-center rate)
  return {0, 0, 0, 128};                                                // older: FP32 only
}

}  // namespace

DevicePeak devicePeak(int device) {
  DevicePeak p;
  cudaDeviceProp prop;
  KILN_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  int sms = 0, clockKHz = 0, memKHz = 0, busBits = 0;
  KILN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  KILN_CUDA_CHECK(cudaDeviceGetAttribute(&clockKHz, cudaDevAttrClockRate, device));
  KILN_CUDA_CHECK(cudaDeviceGetAttribute(&memKHz, cudaDevAttrMemoryClockRate, device));
  KILN_CUDA_CHECK(cudaDeviceGetAttribute(&busBits, cudaDevAttrGlobalMemoryBusWidth, device));
  p.name = prop.name;
  const PerSm r = perSm(prop.major, prop.minor);
  const double cycles = double(sms) * clockKHz * 1e3;  // SM cycles per second
  p.matrixTflops16 = cycles * r.fp16 / 1e12;
  p.matrixTflops8 = cycles * r.int8 / 1e12;
  p.matrixTflopsTf32 = cycles * r.tf32 / 1e12;
  p.vectorTflops32 = cycles * r.fp32 / 1e12;
  p.memoryGBs = 2.0 * memKHz * 1e3 * (busBits / 8.0) / 1e9;
  return p;
}

}  // namespace kiln::cuda
