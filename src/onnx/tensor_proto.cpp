#include "onnx/tensor_proto.h"

#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <fstream>

#include "core/narrow_types.h"

namespace kiln {

DataType fromOnnxType(int t, const std::string& what) {
  switch (t) {
    case onnx::TensorProto::FLOAT: return DataType::kFLOAT;
    case onnx::TensorProto::UINT8: return DataType::kUINT8;
    case onnx::TensorProto::INT8: return DataType::kINT8;
    case onnx::TensorProto::UINT16: return DataType::kUINT16;
    case onnx::TensorProto::INT16: return DataType::kINT16;
    case onnx::TensorProto::INT32: return DataType::kINT32;
    case onnx::TensorProto::INT64: return DataType::kINT64;
    case onnx::TensorProto::BOOL: return DataType::kBOOL;
    case onnx::TensorProto::FLOAT16: return DataType::kHALF;
    case onnx::TensorProto::DOUBLE: return DataType::kDOUBLE;
    case onnx::TensorProto::UINT32: return DataType::kUINT32;
    case onnx::TensorProto::UINT64: return DataType::kUINT64;
    case onnx::TensorProto::BFLOAT16: return DataType::kBF16;
    case onnx::TensorProto::FLOAT8E4M3FN: return DataType::kFP8E4M3FN;
    case onnx::TensorProto::FLOAT8E4M3FNUZ: return DataType::kFP8E4M3FNUZ;
    case onnx::TensorProto::FLOAT8E5M2: return DataType::kFP8E5M2;
    case onnx::TensorProto::FLOAT8E5M2FNUZ: return DataType::kFP8E5M2FNUZ;
    case onnx::TensorProto::INT4: return DataType::kINT4;
    case onnx::TensorProto::UINT4: return DataType::kUINT4;
    case onnx::TensorProto::FLOAT4E2M1: return DataType::kFP4E2M1;
    case onnx::TensorProto::INT2: return DataType::kINT2;
    case onnx::TensorProto::UINT2: return DataType::kUINT2;
    case onnx::TensorProto::FLOAT8E8M0: return DataType::kFP8E8M0;
    default: break;
  }
  std::string name = onnx::TensorProto::DataType_IsValid(t) ? onnx::TensorProto::DataType_Name(t) : std::to_string(t);
  throw UnsupportedError(what + ": data type " + name + " is not supported by kiln");
}

namespace {

// Reads `length` bytes at `offset` of an external-data file confined to `baseDir`.
std::string readExternal(const onnx::TensorProto& t, const std::string& baseDir, size_t expected) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::strtoll(kv.value().c_str(), nullptr, 10);
    else if (kv.key() == "length") length = std::strtoll(kv.value().c_str(), nullptr, 10);
  }
  const std::string what = "tensor '" + t.name() + "' external data";
  if (baseDir.empty()) throw Error(what + ": external data is not allowed for a model read from memory");
  if (location.empty()) throw Error(what + ": no location");
  if (location[0] == '/' || location.find('\\') != std::string::npos)
    throw Error(what + ": absolute location '" + location + "' refused (must be relative to the model's folder)");
  size_t start = 0;
  while (start <= location.size()) {
    size_t e = location.find('/', start);
    std::string part = location.substr(start, e == std::string::npos ? std::string::npos : e - start);
    if (part == "..") throw Error(what + ": location '" + location + "' escapes the model's folder");
    if (e == std::string::npos) break;
    start = e + 1;
  }
  std::string path = baseDir + "/" + location;
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) throw Error(what + ": cannot open '" + location + "'");
  if (S_ISLNK(st.st_mode)) throw Error(what + ": '" + location + "' is a symbolic link (refused)");
  char realBase[PATH_MAX], realFile[PATH_MAX];
  if (!realpath(baseDir.c_str(), realBase) || !realpath(path.c_str(), realFile))
    throw Error(what + ": cannot resolve '" + location + "'");
  std::string rb = realBase, rf = realFile;
  if (rf.compare(0, rb.size() + 1, rb + "/") != 0)
    throw Error(what + ": '" + location + "' resolves outside the model's folder (refused)");
  if (!S_ISREG(st.st_mode)) throw Error(what + ": '" + location + "' is not a regular file");
  int64_t fileSize = st.st_size;
  if (offset < 0 || offset > fileSize) throw Error(what + ": offset out of range");
  if (length < 0) length = fileSize - offset;
  if (length > fileSize - offset) throw Error(what + ": offset+length exceeds the file size");
  if (static_cast<size_t>(length) != expected)
    throw Error(what + ": holds " + std::to_string(length) + " bytes, the tensor needs " + std::to_string(expected));
  std::ifstream f(path, std::ios::binary);
  f.seekg(offset);
  std::string buf(static_cast<size_t>(length), '\0');
  f.read(buf.data(), length);
  if (!f) throw Error(what + ": read failed");
  return buf;
}

template <typename Dst, typename Field>
void copyTyped(HostTensor& h, const Field& f, const std::string& what) {
  if (static_cast<int64_t>(f.size()) != h.count())
    throw Error(what + ": holds " + std::to_string(f.size()) + " values, dims need " + std::to_string(h.count()));
  Dst* d = h.as<Dst>();
  for (int i = 0; i < f.size(); ++i) d[i] = static_cast<Dst>(f.Get(i));
}

//! How many values the typed field that holds `type` carries.
int64_t typedValueCount(const onnx::TensorProto& t, DataType type) {
  switch (type) {
    case DataType::kFLOAT: return t.float_data_size();
    case DataType::kDOUBLE: return t.double_data_size();
    case DataType::kINT64: return t.int64_data_size();
    case DataType::kUINT32: case DataType::kUINT64: return t.uint64_data_size();
    default: return t.int32_data_size();
  }
}

//! A narrow-type tensor from its ONNX bytes (`n` elements; packed for the sub-byte types).
HostTensor fromNarrowBytes(DataType type, const Dims& dims, int64_t n, const uint8_t* bytes) {
  HostTensor h(type, dims);
  if (packedBits(type) < 8) unpackSubByte(type, bytes, n, h.as<uint8_t>());
  else if (n) std::memcpy(h.data(), bytes, static_cast<size_t>(n));
  return h;
}

//! Narrow types in int32_data: one byte per entry (float8 codes; sub-byte types packed).
HostTensor narrowFromInt32Data(const onnx::TensorProto& t, DataType type, const Dims& dims, int64_t n,
                               const std::string& what) {
  const size_t need = packedBytes(type, n);
  if (static_cast<size_t>(t.int32_data_size()) != need)
    throw Error(what + ": int32_data holds " + std::to_string(t.int32_data_size()) + " values, " + toString(type) +
                " dims " + toString(dims) + " need " + std::to_string(need) + (need != static_cast<size_t>(n) ? " (packed)" : ""));
  std::vector<uint8_t> bytes(need);
  for (size_t i = 0; i < need; ++i) {
    const int32_t v = t.int32_data(static_cast<int>(i));
    if (v < 0 || v > 255) throw Error(what + ": int32_data value " + std::to_string(v) + " is not a " + toString(type) + " byte");
    bytes[i] = static_cast<uint8_t>(v);
  }
  return fromNarrowBytes(type, dims, n, bytes.data());
}

}  // namespace

HostTensor fromTensorProto(const onnx::TensorProto& t, const std::string& baseDir) {
  const std::string what = "tensor '" + t.name() + "'";
  if (t.has_segment()) throw UnsupportedError(what + ": segmented tensors are not supported");
  DataType type = fromOnnxType(t.data_type(), what);
  Dims dims;
  for (int64_t d : t.dims()) {
    if (d < 0) throw Error(what + ": negative dimension " + std::to_string(d));
    dims.push_back(d);
  }
  int64_t n = volume(dims);
  if (n > (int64_t(1) << 36)) throw Error(what + ": absurd size " + toString(dims));
  // The data is checked against the dims before the tensor is allocated: dims claiming gigabytes
  // over a few bytes of data are refused without zero-filling them first (found by
  // kiln_libfuzzer_input_files: a 16-byte .pb claiming 6 GiB).
  const bool narrow = isNarrowFloat(type) || packedBits(type) < 8;
  const size_t bytes = narrow ? packedBytes(type, n) : static_cast<size_t>(n) * elementSize(type);
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string buf = readExternal(t, baseDir, bytes);
    if (narrow) return fromNarrowBytes(type, dims, n, reinterpret_cast<const uint8_t*>(buf.data()));
    HostTensor h(type, dims);
    if (bytes) std::memcpy(h.data(), buf.data(), bytes);
    return h;
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != bytes)
      throw Error(what + ": raw_data holds " + std::to_string(t.raw_data().size()) + " bytes, dims " + toString(dims) +
                  " need " + std::to_string(bytes) + (narrow && packedBits(type) < 8 ? " (packed)" : ""));
    if (narrow) return fromNarrowBytes(type, dims, n, reinterpret_cast<const uint8_t*>(t.raw_data().data()));
    HostTensor h(type, dims);
    if (bytes) std::memcpy(h.data(), t.raw_data().data(), bytes);
    return h;
  }
  if (narrow) return narrowFromInt32Data(t, type, dims, n, what);
  const int64_t values = typedValueCount(t, type);
  if (values != n) throw Error(what + ": holds " + std::to_string(values) + " values, dims need " + std::to_string(n));
  HostTensor h(type, dims);
  switch (type) {
    case DataType::kFLOAT: copyTyped<float>(h, t.float_data(), what); break;
    case DataType::kDOUBLE: copyTyped<double>(h, t.double_data(), what); break;
    case DataType::kINT64: copyTyped<int64_t>(h, t.int64_data(), what); break;
    case DataType::kUINT32: copyTyped<uint32_t>(h, t.uint64_data(), what); break;  // stored widened
    case DataType::kUINT64: copyTyped<uint64_t>(h, t.uint64_data(), what); break;
    case DataType::kINT32: copyTyped<int32_t>(h, t.int32_data(), what); break;
    case DataType::kINT16: copyTyped<int16_t>(h, t.int32_data(), what); break;
    case DataType::kINT8: copyTyped<int8_t>(h, t.int32_data(), what); break;
    case DataType::kUINT16: case DataType::kHALF: case DataType::kBF16: copyTyped<uint16_t>(h, t.int32_data(), what); break;
    case DataType::kUINT8: case DataType::kBOOL: copyTyped<uint8_t>(h, t.int32_data(), what); break;
    default: throw Error(what + ": no typed field for " + toString(type));  // narrow types returned above
  }
  return h;
}

HostTensor constantNodeValue(const onnx::NodeProto& node, const std::string& name, const std::string& baseDir) {
  HostTensor v;
  for (const auto& a : node.attribute()) {
    const std::string& n = a.name();
    if (n == "value") v = fromTensorProto(a.t(), baseDir);
    else if (n == "value_float") { v = HostTensor(DataType::kFLOAT, {}); *v.as<float>() = a.f(); }
    else if (n == "value_int") { v = HostTensor(DataType::kINT64, {}); *v.as<int64_t>() = a.i(); }
    else if (n == "value_floats") {
      v = HostTensor(DataType::kFLOAT, {a.floats_size()});
      for (int i = 0; i < a.floats_size(); ++i) v.as<float>()[i] = a.floats(i);
    } else if (n == "value_ints") {
      v = HostTensor(DataType::kINT64, {a.ints_size()});
      for (int i = 0; i < a.ints_size(); ++i) v.as<int64_t>()[i] = a.ints(i);
    } else {
      throw UnsupportedError("Constant node '" + name + "': attribute '" + n + "' is not supported");
    }
  }
  if (!v.valid()) throw Error("Constant node '" + name + "' has no value");
  return v;
}

}  // namespace kiln
