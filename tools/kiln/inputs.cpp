#include "inputs.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <random>

#include "kiln/onnx_parser.h"

namespace kiln::cli {

namespace {

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::ifstream openBinary(const std::string& path, uint64_t& size) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw Error("cannot open input file '" + path + "': " + std::strerror(errno));
  auto end = f.tellg();
  if (end < 0) throw Error("cannot read input file '" + path + "'");
  size = static_cast<uint64_t>(end);
  f.seekg(0);
  return f;
}

void readExactly(std::ifstream& f, void* dst, uint64_t bytes, const std::string& path) {
  if (bytes && !f.read(static_cast<char*>(dst), static_cast<std::streamsize>(bytes)))
    throw Error("input file '" + path + "' is truncated");
}

//! NumPy dtype descriptor ('<f4', '|b1', ...) -> kiln type.
DataType npyType(const std::string& descr, const std::string& path) {
  if (descr.size() < 3) throw Error("'" + path + "': bad .npy dtype '" + descr + "'");
  char order = descr[0];
  std::string code = descr.substr(1);
  bool singleByte = code == "b1" || code == "i1" || code == "u1";
  if (order == '>' && !singleByte)
    throw UnsupportedError("'" + path + "': big-endian .npy data ('" + descr + "') is not supported");
  if (order != '<' && order != '|' && order != '=' && order != '>')
    throw Error("'" + path + "': bad .npy dtype '" + descr + "'");
  static const std::pair<const char*, DataType> kTypes[] = {
      {"f4", DataType::kFLOAT},  {"f8", DataType::kDOUBLE}, {"f2", DataType::kHALF},   {"i8", DataType::kINT64},
      {"i4", DataType::kINT32},  {"i2", DataType::kINT16},  {"i1", DataType::kINT8},   {"u1", DataType::kUINT8},
      {"u2", DataType::kUINT16}, {"u4", DataType::kUINT32}, {"u8", DataType::kUINT64}, {"b1", DataType::kBOOL}};
  for (auto& [c, t] : kTypes)
    if (code == c) return t;
  throw UnsupportedError("'" + path + "': .npy dtype '" + descr + "' is not supported");
}

//! The text after "'key':" in a .npy header dict (leading spaces skipped).
std::string headerField(const std::string& header, const std::string& key, const std::string& path) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) throw Error("'" + path + "': .npy header has no '" + key + "'");
  size_t colon = header.find(':', k);
  if (colon == std::string::npos) throw Error("'" + path + "': malformed .npy header");
  size_t v = header.find_first_not_of(' ', colon + 1);
  return v == std::string::npos ? std::string() : header.substr(v);
}

Dims parseNpyShape(const std::string& text, const std::string& path) {
  if (text.empty() || text[0] != '(') throw Error("'" + path + "': malformed .npy shape");
  size_t close = text.find(')');
  if (close == std::string::npos) throw Error("'" + path + "': malformed .npy shape");
  Dims dims;
  size_t i = 1;
  while (i < close) {
    while (i < close && (text[i] == ' ' || text[i] == ',')) ++i;
    if (i >= close) break;
    int64_t v = -1;
    auto [ptr, ec] = std::from_chars(text.data() + i, text.data() + close, v);
    if (ec != std::errc() || v < 0)
      throw Error("'" + path + "': bad dimension in .npy shape " + text.substr(0, close + 1));
    dims.push_back(v);
    i = static_cast<size_t>(ptr - text.data());
  }
  return dims;
}

//! The bytes a tensor of `type` and `dims` holds, overflow-checked, without allocating it: a file
//! is checked against this before its tensor is allocated (a .npy header or --shapes claiming
//! terabytes must not make the CLI zero-fill them first).
uint64_t tensorBytes(DataType type, const Dims& dims, const std::string& path) {
  const uint64_t es = elementSize(type);
  uint64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) throw Error("'" + path + "': negative dimension in " + toString(dims));
    if (d != 0 && n > (uint64_t(1) << 62) / static_cast<uint64_t>(d) / es)
      throw Error("'" + path + "': shape " + toString(dims) + " is too large");
    n *= static_cast<uint64_t>(d);
  }
  return n * es;
}

HostTensor readRawFile(const std::string& path, DataType type, const Dims& dims) {
  if (!isStatic(dims)) throw Error("raw input file '" + path + "' needs the input's shape: give it with --shapes");
  uint64_t size = 0;
  std::ifstream f = openBinary(path, size);
  const uint64_t need = tensorBytes(type, dims, path);
  if (size != need)
    throw Error("raw input file '" + path + "' has " + std::to_string(size) + " bytes; the input " + toString(type) +
                " " + toString(dims) + " needs " + std::to_string(need));
  HostTensor t(type, dims);
  readExactly(f, t.data(), size, path);
  // int4/uint4/int2/uint2/float4 raw files hold kiln's layout, one byte per element (not ONNX's
  // packing): a byte outside the type's range is refused, not read as a value the type cannot hold.
  const int bits = packedBits(type);
  if (bits < 8) {
    const bool isSigned = type == DataType::kINT4 || type == DataType::kINT2;
    const int lo = isSigned ? -(1 << (bits - 1)) : 0, hi = isSigned ? (1 << (bits - 1)) - 1 : (1 << bits) - 1;
    for (int64_t i = 0; i < t.count(); ++i) {
      const int v = isSigned ? static_cast<int8_t>(t.as<uint8_t>()[i]) : t.as<uint8_t>()[i];
      if (v < lo || v > hi)
        throw Error("raw input file '" + path + "': byte " + std::to_string(i) + " (" + std::to_string(v) + ") is not a " +
                    toString(type) + " value (one element per byte, " + std::to_string(lo) + ".." + std::to_string(hi) + ")");
    }
  }
  return t;
}

}  // namespace

HostTensor readNpyFile(const std::string& path) {
  uint64_t size = 0;
  std::ifstream f = openBinary(path, size);
  char magic[8] = {};
  if (size < 10 || !f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    throw Error("'" + path + "' is not a .npy file (bad magic)");
  int major = static_cast<unsigned char>(magic[6]);
  uint64_t headerLen = 0;
  uint64_t prefix = 0;
  if (major == 1) {
    unsigned char len[2];
    f.read(reinterpret_cast<char*>(len), 2);
    headerLen = len[0] | (uint64_t(len[1]) << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    unsigned char len[4];
    if (!f.read(reinterpret_cast<char*>(len), 4)) throw Error("'" + path + "': truncated .npy header");
    headerLen = len[0] | (uint64_t(len[1]) << 8) | (uint64_t(len[2]) << 16) | (uint64_t(len[3]) << 24);
    prefix = 12;
  } else {
    throw UnsupportedError("'" + path + "': .npy format version " + std::to_string(major) + " is not supported");
  }
  if (prefix + headerLen > size) throw Error("'" + path + "': truncated .npy header");
  std::string header(headerLen, '\0');
  readExactly(f, header.data(), headerLen, path);

  std::string descrText = headerField(header, "descr", path);
  if (descrText.empty() || descrText[0] != '\'') throw Error("'" + path + "': malformed .npy dtype");
  std::string descr = descrText.substr(1, descrText.find('\'', 1) - 1);
  if (headerField(header, "fortran_order", path).rfind("False", 0) != 0)
    throw UnsupportedError("'" + path +
                           "': Fortran-ordered .npy data is not supported (save with np.ascontiguousarray)");
  DataType type = npyType(descr, path);
  Dims dims = parseNpyShape(headerField(header, "shape", path), path);

  const uint64_t need = tensorBytes(type, dims, path);
  if (size - prefix - headerLen != need)
    throw Error("'" + path + "': .npy data holds " + std::to_string(size - prefix - headerLen) + " bytes; shape " +
                toString(dims) + " of " + descr + " needs " + std::to_string(need));
  HostTensor t(type, dims);
  readExactly(f, t.data(), t.bytes(), path);
  return t;
}

HostTensor loadInputFile(const std::string& path, DataType type, const Dims& dims) {
  if (endsWith(path, ".npy")) return readNpyFile(path);
  if (endsWith(path, ".pb")) return readTensorProtoFile(path);
  return readRawFile(path, type, dims);
}

HostTensor randomInput(const std::string& name, DataType type, const Dims& dims, uint64_t seed) {
  HostTensor t(type, dims);
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  bool ones = !isFloat(type) && lower.find("mask") != std::string::npos;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> real(-1.f, 1.f);
  std::uniform_int_distribution<int> integer(0, type == DataType::kBOOL ? 1 : 9);
  for (int64_t i = 0; i < t.count(); ++i) {
    float f = isFloat(type) || isNarrowFloat(type) ? real(rng) : static_cast<float>(ones ? 1 : integer(rng));
    switch (type) {
      case DataType::kFLOAT:
        t.as<float>()[i] = f;
        break;
      case DataType::kDOUBLE:
        t.as<double>()[i] = f;
        break;
      case DataType::kHALF:
        t.as<uint16_t>()[i] = floatToHalf(f);
        break;
      case DataType::kBF16:
        t.as<uint16_t>()[i] = floatToBf16(f);
        break;
      case DataType::kINT64:
        t.as<int64_t>()[i] = static_cast<int64_t>(f);
        break;
      case DataType::kINT32:
        t.as<int32_t>()[i] = static_cast<int32_t>(f);
        break;
      case DataType::kINT16:
        t.as<int16_t>()[i] = static_cast<int16_t>(f);
        break;
      case DataType::kINT8:
        t.as<int8_t>()[i] = static_cast<int8_t>(f);
        break;
      case DataType::kUINT8:
        t.as<uint8_t>()[i] = static_cast<uint8_t>(f);
        break;
      case DataType::kUINT16:
        t.as<uint16_t>()[i] = static_cast<uint16_t>(f);
        break;
      case DataType::kUINT32:
        t.as<uint32_t>()[i] = static_cast<uint32_t>(f);
        break;
      case DataType::kUINT64:
        t.as<uint64_t>()[i] = static_cast<uint64_t>(f);
        break;
      case DataType::kBOOL:
        t.as<uint8_t>()[i] = f != 0.f;
        break;
      default:  // the narrow types, one byte each: a float8/float4 code, or an int4/int2 in range
        t.as<uint8_t>()[i] = isNarrowFloat(type) ? floatToNarrow(type, f, true)
                                                 : static_cast<uint8_t>(static_cast<int>(f) % (1 << (packedBits(type) - 1)));
        break;
    }
  }
  return t;
}

}  // namespace kiln::cli
