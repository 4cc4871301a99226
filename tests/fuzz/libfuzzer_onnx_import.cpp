// libFuzzer target: any bytes as an ONNX model, imported and (when small) built and run on the
// CPU, as `kiln --onnx=` would. Built by `make fuzz` (clang, -fsanitize=fuzzer); seeds in
// tests/fuzz/corpus/onnx_import (tests/fuzz/make_onnx_seeds.py).
#include <cstdio>
#include <cstdlib>

#include "load_and_run.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::ImportOutcome o = kiln::fuzz::importBuildAndRunOnnx(data, size);
  if (!o.violation.empty()) {
    std::fprintf(stderr, "violation: %s\n", o.violation.c_str());
    std::abort();
  }
  return 0;
}
