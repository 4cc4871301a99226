// libFuzzer target: the CLI's --loadInputs readers (tools/kiln/inputs.cpp). The first byte picks
// the reader: .npy, ONNX TensorProto .pb, or raw bytes for a type and static dims taken from the
// next bytes; the rest is the file. Contract: a kiln::Error that says why, or a tensor whose byte
// size matches its type and dims. Seeds in tests/fuzz/corpus/input_files.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <typeinfo>

#include "inputs.h"

namespace {

[[noreturn]] void violation(const std::string& what) {
  std::fprintf(stderr, "violation: %s\n", what.c_str());
  std::abort();
}

// The readers take paths: the bytes go to a per-process file (in /dev/shm where it exists).
std::string scratchPath(const char* ext) {
  static const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  return dir + "/kiln_fuzz_input_" + std::to_string(getpid()) + ext;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  if (size < 1) return 0;
  const int mode = data[0] % 3;
  static const char* kExt[] = {".npy", ".pb", ".bin"};
  size_t skip = 1;
  DataType rawType = DataType::kFLOAT;
  Dims rawDims;
  if (mode == 2) {  // raw: type index, then up to 3 dims of one byte each
    if (size < 3) return 0;
    rawType = static_cast<DataType>(data[1] % kNumDataTypes);
    const int rank = data[2] % 4;
    if (size < 3 + static_cast<size_t>(rank)) return 0;
    for (int i = 0; i < rank; ++i) rawDims.push_back(data[3 + i]);
    skip = 3 + static_cast<size_t>(rank);
  }
  const std::string path = scratchPath(kExt[mode]);
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data + skip), static_cast<std::streamsize>(size - skip));
  }
  try {
    HostTensor t = cli::loadInputFile(path, rawType, rawDims);
    if (t.bytes() != static_cast<size_t>(t.count()) * elementSize(t.type())) violation("tensor size does not match its dims");
    int64_t n = 1;
    for (int64_t d : t.dims()) n *= d;
    if (n != t.count()) violation("tensor count does not match its dims");
    if (t.count() && !t.data()) violation("non-empty tensor without data");
  } catch (const Error& e) {
    if (std::string(e.what()).empty()) violation("kiln::Error with an empty message");
  } catch (const std::exception& e) {
    violation(std::string("not a kiln::Error: ") + typeid(e).name() + ": " + e.what());
  }
  return 0;
}
