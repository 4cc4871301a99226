// Importing Python arrays (py_tensor.h).
#include "py_tensor.h"

#include <cstring>
#include <map>
#include <optional>

#include "dlpack_abi.h"

namespace kiln::python {

namespace {

std::string typeName(py::handle obj) { return py::str(py::type::of(obj).attr("__name__")); }

//! The kiln type of an element kind ('f' float, 'B' bfloat16, 'i' signed, 'u' unsigned integer,
//! 'b' bool) and size in bytes, as NumPy and DLPack describe types; nullopt when kiln has none.
std::optional<DataType> typeOf(char kind, size_t bytes) {
  static const std::map<std::pair<char, size_t>, DataType> types = {
      {{'f', 2}, DataType::kHALF},  {{'f', 4}, DataType::kFLOAT},  {{'f', 8}, DataType::kDOUBLE},
      {{'B', 2}, DataType::kBF16},  {{'b', 1}, DataType::kBOOL},   {{'i', 1}, DataType::kINT8},
      {{'i', 2}, DataType::kINT16}, {{'i', 4}, DataType::kINT32},  {{'i', 8}, DataType::kINT64},
      {{'u', 1}, DataType::kUINT8}, {{'u', 2}, DataType::kUINT16}, {{'u', 4}, DataType::kUINT32},
      {{'u', 8}, DataType::kUINT64}};
  auto it = types.find({kind, bytes});
  return it == types.end() ? std::nullopt : std::optional<DataType>(it->second);
}

DataType fromNumpyDtype(const py::dtype& d, const std::string& what) {
  if (d.byteorder() == '>') throw Error(what + " is big-endian (" + std::string(py::str(d)) + "); kiln takes native byte order");
  char kind = d.kind();
  if (kind == 'V' && std::string(py::str(d.attr("name"))) == "bfloat16") kind = 'B';  // ml_dtypes' bfloat16
  if (auto t = typeOf(kind, d.itemsize())) return *t;
  throw Error(what + " has dtype " + std::string(py::str(d)) + ", which kiln has no type for");
}

DataType fromDlpackType(const dlpack::DataType& t, const std::string& what) {
  static const std::map<uint8_t, char> kinds = {
      {dlpack::kFloat, 'f'}, {dlpack::kBfloat, 'B'}, {dlpack::kInt, 'i'}, {dlpack::kUInt, 'u'}, {dlpack::kBool, 'b'}};
  auto kind = kinds.find(t.code);
  if (t.lanes == 1 && t.bits % 8 == 0 && kind != kinds.end())
    if (auto type = typeOf(kind->second, t.bits / 8)) return *type;
  throw Error(what + " has DLPack type (code " + std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits, " +
              std::to_string(t.lanes) + " lanes), which kiln has no type for");
}

TensorArg fromNumpy(py::array a, const std::string& what) {
  TensorArg t;
  t.type = fromNumpyDtype(a.dtype(), what);
  const auto size = static_cast<py::ssize_t>(elementSize(t.type));
  bool elementStrides = true;
  for (py::ssize_t k = 0; k < a.ndim(); ++k) elementStrides &= a.strides(k) % size == 0;
  // Byte strides that are no multiple of the element size: NumPy makes a C-ordered copy, marked
  // read-only below so that an output is never written into a copy the caller does not see.
  if (!elementStrides) a = py::array::ensure(a, py::array::c_style);
  for (py::ssize_t k = 0; k < a.ndim(); ++k) t.shape.push_back(a.shape(k));
  if (!(a.flags() & py::array::c_style))
    for (py::ssize_t k = 0; k < a.ndim(); ++k) t.strides.push_back(a.strides(k) / size);
  t.readOnly = !a.writeable() || !elementStrides;
  t.data = const_cast<void*>(a.data());
  t.owner = std::move(a);
  return t;
}

// Calls obj.__dlpack__, asking for the versioned capsule (DLPack 1.x: read-only flag) and, for a
// CUDA consumer, for the producer's pending work to be made visible to `stream`. Producers that
// predate max_version raise TypeError for it; host-only producers may refuse a stream.
py::object callDlpack(py::handle obj, int64_t stream, bool* streamHonoured) {
  py::object fn = obj.attr("__dlpack__");
  bool versioned = true;
  bool withStream = stream != kNoCudaConsumer;
  for (;;) {
    py::dict kw;
    if (versioned) kw["max_version"] = py::make_tuple(1, 0);
    if (withStream) kw["stream"] = stream;
    try {
      py::object capsule = fn(**kw);
      *streamHonoured = withStream;
      return capsule;
    } catch (py::error_already_set& e) {
      if (versioned && e.matches(PyExc_TypeError)) {
        versioned = false;
        continue;
      }
      if (withStream) {  // a host tensor's producer may refuse any stream: the caller checks where it is
        withStream = false;
        continue;
      }
      throw;
    }
  }
}

// PyTorch's __dlpack__ is Python code (argument checks, stream ordering): 2.6 us a call on the
// development machine, where its C exporter torch._C._to_dlpack takes 0.4 us. The C exporter is
// used for torch.Tensor and Parameter (not other subclasses, which may override __dlpack__) when
// no ordering is needed: host tensors, and CUDA tensors consumed on torch's current stream of their
// device (kiln.torch, infer(stream=torch.cuda.current_stream())). Torch's private functions are
// looked up once, only when torch is already imported, and the protocol is used without them.
struct TorchExport {
  PyObject* tensorType = nullptr;
  PyObject* parameterType = nullptr;
  py::object toDlpack, currentStream;  // torch._C._to_dlpack, torch._C._cuda_getCurrentRawStream
};

const TorchExport* torchExport() {
  static TorchExport* cached = nullptr;  // leaked: outlives the interpreter's teardown safely
  static bool looked = false;
  if (looked) return cached;
  py::dict modules = py::module_::import("sys").attr("modules");
  if (!modules.contains("torch")) return nullptr;  // not imported yet: ask again next time
  looked = true;
  try {
    py::module_ torch = modules["torch"];
    py::object c = torch.attr("_C");
    auto* e = new TorchExport;
    e->tensorType = torch.attr("Tensor").ptr();
    e->parameterType = torch.attr("nn").attr("Parameter").ptr();
    Py_INCREF(e->tensorType);
    Py_INCREF(e->parameterType);
    e->toDlpack = c.attr("_to_dlpack");
    if (py::hasattr(c, "_cuda_getCurrentRawStream")) e->currentStream = c.attr("_cuda_getCurrentRawStream");
    cached = e;
  } catch (py::error_already_set&) {  // another torch: the protocol only
  }
  return cached;
}

//! torch's C exporter's capsule for `obj` when it may replace __dlpack__(stream=consumerStream).
py::object torchCapsule(py::handle obj, int64_t consumerStream) {
  const TorchExport* e = torchExport();
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr()));
  if (!e || (type != e->tensorType && type != e->parameterType)) return py::object();
  py::object capsule = e->toDlpack(obj);
  const auto* dl = &static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"))->tensor;
  if (dl->device.kind != dlpack::kCUDA) return capsule;  // host memory: nothing to order
  if (consumerStream == kNoCudaConsumer || !e->currentStream) return py::object();
  const int64_t producer = e->currentStream(dl->device.id).cast<int64_t>();
  // torch's legacy default stream is 0, DLPack's name for it 1
  return (producer == consumerStream || (producer == 0 && consumerStream == 1)) ? capsule : py::object();
}

TensorArg fromDlpack(py::handle obj, const std::string& what, int64_t consumerStream) {
  bool streamHonoured = consumerStream != kNoCudaConsumer;
  py::object capsule = torchCapsule(obj, consumerStream);
  if (!capsule) capsule = callDlpack(obj, consumerStream, &streamHonoured);
  TensorArg t;
  const dlpack::Tensor* dl = nullptr;
  if (PyCapsule_IsValid(capsule.ptr(), "dltensor_versioned")) {
    auto* m = static_cast<dlpack::ManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor_versioned"));
    if (m->major != 1) throw Error(what + ": DLPack version " + std::to_string(m->major) + " is not supported (1.x is)");
    t.readOnly = (m->flags & dlpack::kReadOnly) != 0;
    dl = &m->tensor;
  } else if (PyCapsule_IsValid(capsule.ptr(), "dltensor")) {
    dl = &static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"))->tensor;
  } else {
    throw Error(what + ": " + typeName(obj) + ".__dlpack__() returned no DLPack capsule");
  }
  switch (dl->device.kind) {
    case dlpack::kCPU:
    case dlpack::kCUDAHost: t.memory = Memory::kHost; break;
    case dlpack::kCUDA:
    case dlpack::kCUDAManaged:
      t.memory = Memory::kCuda;
      t.deviceId = dl->device.id;
      if (consumerStream != kNoCudaConsumer && !streamHonoured)
        throw Error(what + ": " + typeName(obj) + ".__dlpack__ did not accept the consumer's CUDA stream");
      break;
    default:
      throw Error(what + " is in DLPack device memory of kind " + std::to_string(dl->device.kind) +
                  ", which kiln cannot use (host and CUDA memory are)");
  }
  t.type = fromDlpackType(dl->dtype, what);
  t.shape.assign(dl->shape, dl->shape + dl->ndim);
  if (dl->strides) t.strides.assign(dl->strides, dl->strides + dl->ndim);
  t.data = static_cast<char*>(dl->data) + dl->byte_offset;
  t.owner = std::move(capsule);  // not renamed "used_dltensor": its destructor releases the producer's view
  return t;
}

DataType fromTypestr(const std::string& s, const std::string& what) {
  // e.g. "<f4", "|u1", "|b1"; one-byte types have no byte order
  if (s.size() >= 3 && (s[0] == '<' || s[0] == '|' || (s[0] == '=' ))) {
    py::dtype d(s);
    return fromNumpyDtype(d, what);
  }
  throw Error(what + " has __cuda_array_interface__ typestr '" + s + "', which kiln has no type for");
}

TensorArg fromCudaArrayInterface(py::handle obj, const std::string& what) {
  py::dict cai = obj.attr("__cuda_array_interface__");
  TensorArg t;
  t.memory = Memory::kCuda;
  t.type = fromTypestr(py::str(cai["typestr"]), what);
  for (py::handle d : py::tuple(cai["shape"])) t.shape.push_back(d.cast<int64_t>());
  py::tuple data = cai["data"];
  t.data = reinterpret_cast<void*>(data[0].cast<uintptr_t>());
  t.readOnly = data[1].cast<bool>();
  if (cai.contains("mask") && !cai["mask"].is_none()) throw Error(what + " has a mask (__cuda_array_interface__), which kiln cannot use");
  if (cai.contains("strides") && !cai["strides"].is_none()) {
    const int64_t size = static_cast<int64_t>(elementSize(t.type));
    for (py::handle s : py::tuple(cai["strides"])) {
      const int64_t bytes = s.cast<int64_t>();
      if (bytes % size) throw Error(what + " has strides that are not a multiple of its element size");
      t.strides.push_back(bytes / size);
    }
  }
  if (cai.contains("stream") && !cai["stream"].is_none()) t.producerStream = cai["stream"].cast<uintptr_t>();
  t.owner = py::reinterpret_borrow<py::object>(obj);
  return t;
}

void gather(const char* src, char* dst, const Dims& shape, const std::vector<int64_t>& strides, size_t elem, size_t dim,
            size_t& written) {
  if (dim == shape.size()) {
    std::memcpy(dst + written, src, elem);
    written += elem;
    return;
  }
  for (int64_t i = 0; i < shape[dim]; ++i)
    gather(src + i * strides[dim] * static_cast<int64_t>(elem), dst, shape, strides, elem, dim + 1, written);
}

}  // namespace

bool TensorArg::contiguous() const {
  if (strides.empty()) return true;
  int64_t expected = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k] != 1 && strides[k] != expected) return false;
    expected *= shape[k];
  }
  return true;
}

std::string TensorArg::describe() const {
  std::string where = memory == Memory::kHost ? "host memory" : deviceId >= 0 ? "cuda:" + std::to_string(deviceId) : "CUDA memory";
  return std::string(toString(type)) + " " + toString(shape) + " in " + where;
}

TensorArg importTensor(py::handle obj, const std::string& what, int64_t consumerStream) {
  if (py::isinstance<py::array>(obj)) return fromNumpy(py::reinterpret_borrow<py::array>(obj), what);
  if (py::hasattr(obj, "__dlpack__")) return fromDlpack(obj, what, consumerStream);
  if (py::hasattr(obj, "__cuda_array_interface__")) return fromCudaArrayInterface(obj, what);
  // Anything else NumPy reads without a copy (the buffer protocol, __array_interface__).
  if (py::hasattr(obj, "__array_interface__") || PyObject_CheckBuffer(obj.ptr()))
    return fromNumpy(py::array::ensure(obj), what);
  throw Error(what + " is a " + typeName(obj) +
              ", not an array: pass a NumPy array or an object with __dlpack__ or __cuda_array_interface__ "
              "(torch, CuPy, JAX tensors)");
}

TensorArg contiguousHostCopy(const TensorArg& t) {
  TensorArg c = t;
  c.strides.clear();
  c.readOnly = false;
  py::array_t<uint8_t> buffer(static_cast<py::ssize_t>(t.bytes()));
  c.data = buffer.mutable_data();
  size_t written = 0;
  if (t.bytes()) gather(static_cast<const char*>(t.data), static_cast<char*>(c.data), t.shape, t.strides, elementSize(t.type), 0, written);
  c.owner = std::move(buffer);
  return c;
}

py::dtype numpyDtype(DataType t) {
  switch (t) {
    case DataType::kBF16:
      try {
        return py::dtype::from_args(py::module_::import("ml_dtypes").attr("bfloat16"));
      } catch (const py::error_already_set&) {
        throw Error("bfloat16 tensors need the ml_dtypes package (pip install ml_dtypes)");
      }
    case DataType::kFLOAT: return py::dtype("float32");
    case DataType::kHALF: return py::dtype("float16");
    case DataType::kDOUBLE: return py::dtype("float64");
    case DataType::kINT8: return py::dtype("int8");
    case DataType::kUINT8: return py::dtype("uint8");
    case DataType::kINT16: return py::dtype("int16");
    case DataType::kUINT16: return py::dtype("uint16");
    case DataType::kINT32: return py::dtype("int32");
    case DataType::kUINT32: return py::dtype("uint32");
    case DataType::kINT64: return py::dtype("int64");
    case DataType::kUINT64: return py::dtype("uint64");
    case DataType::kBOOL: return py::dtype("bool");
    default: throw Error(std::string("tensors of type ") + toString(t) + " cannot be exchanged with NumPy");
  }
}

}  // namespace kiln::python
