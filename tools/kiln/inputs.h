// Input data for the CLI: files (.npy, ONNX TensorProto .pb, raw bytes) and seeded random data.
#pragma once
#include <cstdint>
#include <string>

#include "kiln/types.h"

namespace kiln::cli {

//! Reads a NumPy .npy file (format 1.0-3.0, little-endian, C order). Throws kiln::Error.
HostTensor readNpyFile(const std::string& path);

//! Loads an input file by extension: ".npy", ".pb" (ONNX TensorProto); anything else is raw
//! bytes, which need `type` and `dims` (static) to be interpreted. Throws kiln::Error.
HostTensor loadInputFile(const std::string& path, DataType type, const Dims& dims);

//! Deterministic data for an input without a file: floats uniform in [-1, 1], integers in
//! [0, 10), bools 0/1; integer and bool inputs whose name contains "mask" (any case) are ones.
//! `seed` makes every input differ while staying reproducible.
HostTensor randomInput(const std::string& name, DataType type, const Dims& dims, uint64_t seed);

}  // namespace kiln::cli
