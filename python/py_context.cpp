// ExecutionContext for Python (py_context.h).
#include "py_context.h"

#include <pybind11/numpy.h>

#include <cstdlib>
#include <cstring>

#include "kiln/shape_inputs.h"
#include "py_tensor.h"

namespace kiln::python {

namespace {

void* toHandle(uintptr_t v) { return reinterpret_cast<void*>(v); }

//! A tensor of `container`: by name from a dict, by position from a list/tuple; None when absent.
py::object lookup(py::handle container, const std::vector<std::string>& names, size_t i) {
  if (py::isinstance<py::dict>(container)) {
    py::dict d = py::reinterpret_borrow<py::dict>(container);
    return d.contains(names[i]) ? py::object(d[names[i].c_str()]) : py::object(py::none());
  }
  py::sequence s = py::reinterpret_borrow<py::sequence>(container);
  return i < s.size() ? py::object(s[i]) : py::object(py::none());
}

//! A dict may only name the engine's tensors of that kind; a list or tuple must not be longer.
void checkNames(py::handle container, const std::vector<std::string>& names, const char* kind) {
  if (py::isinstance<py::dict>(container)) {
    for (auto item : py::reinterpret_borrow<py::dict>(container)) {
      std::string n = py::str(item.first);
      if (std::find(names.begin(), names.end(), n) == names.end())
        throw Error("'" + n + "' is not an " + kind + " of the engine");
    }
  } else if (py::isinstance<py::list>(container) || py::isinstance<py::tuple>(container)) {
    const size_t n = py::len(container);
    if (n > names.size())
      throw Error(std::to_string(n) + " " + kind + "s given but the engine has " + std::to_string(names.size()));
  } else {
    throw Error(std::string(kind) + "s must be a dict {name: tensor} or a list/tuple in the engine's order, not " +
                std::string(py::str(py::type::of(container).attr("__name__"))));
  }
}

void checkType(const TensorArg& t, DataType expected, const std::string& what) {
  if (t.type != expected)
    throw Error(what + " is " + toString(t.type) + " but the engine takes " + toString(expected) +
                " (kiln converts no types)");
}

}  // namespace

// infer()'s memory for outputs whose shape is known only during the run: the context's staging
// buffers (device memory on the GPU, host memory on the CPU), grown as needed; remembers the dims.
class ContextHandle::InferAllocator : public IOutputAllocator {
 public:
  explicit InferAllocator(ContextHandle& c) : c_(c) {}
  void* reallocateOutput(const std::string& name, void*, uint64_t size, uint64_t) override {
    if (c_.device_) return c_.staging(name, static_cast<size_t>(size));
    Staging& s = c_.hostStaging_[name];
    const size_t bytes = std::max<size_t>(static_cast<size_t>(size), 256);
    if (bytes > s.bytes) {
      std::free(s.ptr);
      s.bytes = 0;
      s.ptr = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
      if (!s.ptr) throw Error("out of host memory for output '" + name + "'");
      s.bytes = bytes;
    }
    return s.ptr;
  }
  void notifyShape(const std::string& name, const Dims& dims) override { dims_[name] = dims; }
  std::map<std::string, Dims> dims_;

 private:
  ContextHandle& c_;
};

StreamArg parseStream(py::handle o) {
  if (o.is_none()) return {};
  if (py::isinstance<py::int_>(o)) return {toHandle(o.cast<uintptr_t>()), true};
  if (py::hasattr(o, "__cuda_stream__")) {  // the CUDA stream protocol: (version, handle)
    py::object r = o.attr("__cuda_stream__");
    if (PyCallable_Check(r.ptr())) r = r();
    return {toHandle(py::tuple(r)[1].cast<uintptr_t>()), true};
  }
  if (py::hasattr(o, "cuda_stream")) return {toHandle(o.attr("cuda_stream").cast<uintptr_t>()), true};
  throw Error("stream must be None, an int (a cudaStream_t) or an object with __cuda_stream__ or cuda_stream "
              "(e.g. torch.cuda.Stream), not " + std::string(py::str(py::type::of(o).attr("__name__"))));
}

ContextHandle::ContextHandle(std::shared_ptr<Engine> engine, bool cudaGraph) : engine_(std::move(engine)) {
  // The engine's device, made current first: the context allocates on the current device.
  if (engine_->device() == DeviceType::kGPU) device_ = std::make_unique<Device>(DeviceType::kGPU, engine_->getDeviceIndex());
  ctx_ = engine_->createExecutionContext();
  if (device_) {
    stream_ = device_->createStream();
    event_ = device_->createEvent();
  }
  for (int i = 0; i < engine_->getNbIOTensors(); ++i) {
    std::string n = engine_->getIOTensorName(i);
    if (engine_->getTensorIOMode(n) == TensorIOMode::kINPUT) {
      inputs_.push_back(n);
      shapeInputs_.push_back(isShapeInferenceInput(*engine_, n));
    } else {
      outputs_.push_back(n);
    }
  }
  setCudaGraph(cudaGraph);
}

ContextHandle::~ContextHandle() {
  // Work this context enqueued on a caller's stream may still read its arena and buffers.
  if (device_ && lastStream_.has_value()) {
    try {
      device_->synchronize(*lastStream_);
    } catch (const Error&) {  // the caller's stream is gone (and its work with it)
    }
  }
  ctx_.reset();
  for (auto& [name, s] : hostStaging_) std::free(s.ptr);
  if (device_) {
    for (auto& [name, s] : staging_)
      if (s.ptr) device_->release(s.ptr);
    if (event_) device_->destroyEvent(event_);
    if (stream_) device_->destroyStream(stream_);
  }
}

std::unique_lock<std::mutex> ContextHandle::claim() {
  std::unique_lock<std::mutex> lock(busy_, std::try_to_lock);
  if (!lock.owns_lock()) throw Error("this ExecutionContext is running in another thread; use one context per thread");
  return lock;
}

void* ContextHandle::staging(const std::string& name, size_t bytes) {
  Staging& s = staging_[name];
  bytes = std::max<size_t>(bytes, 64);
  if (bytes > s.bytes) {
    if (s.ptr) device_->release(s.ptr);
    s.ptr = nullptr;  // stays null if the allocation below throws
    s.bytes = 0;
    s.ptr = device_->allocate(bytes);
    s.bytes = bytes;
  }
  return s.ptr;
}

void ContextHandle::bind(const std::string& name, void* address) {
  void*& b = bound_[name];
  if (b != address) graphStale_ = true;  // a captured graph holds the old address
  b = address;
  ctx_->setTensorAddress(name, address);
}

void ContextHandle::shape(const std::string& name, const Dims& dims) {
  auto it = shapes_.find(name);
  if (it != shapes_.end() && it->second == dims) return;
  ctx_->setInputShape(name, dims);
  shapes_[name] = dims;
  graphStale_ = true;
}

void ContextHandle::launch(void* stream) {
  lastStream_ = stream;
  if (useGraph_ && device_) {
    if (graphStale_) {  // (re)capture after the bindings changed; a failure warns once per change
      graphCaptured_ = ctx_->captureGraph(stream);
      graphStale_ = false;
    }
    if (graphCaptured_) {
      ctx_->launchGraph(stream);  // a plain enqueue when shape-deciding input values changed
      return;
    }
  }
  ctx_->enqueue(stream);
}

py::dict ContextHandle::infer(py::handle inputs, py::handle outputs, py::handle streamObj) {
  auto lock = claim();
  const Engine& e = *engine_;
  const StreamArg sa = parseStream(streamObj);
  void* s = device_ ? (sa.given ? sa.handle : stream_) : nullptr;
  // DLPack's name for the stream that consumes the tensors (1: the legacy default stream).
  const int64_t consumer = device_ ? (s ? static_cast<int64_t>(reinterpret_cast<uintptr_t>(s)) : 1) : kNoCudaConsumer;
  checkNames(inputs, inputs_, "input");
  if (!outputs.is_none()) checkNames(outputs, outputs_, "output");

  struct Copy {
    void* dst;
    const void* src;
    size_t bytes;
  };
  std::vector<TensorArg> keep;  // their owners keep the memory alive until the call returns
  std::vector<Copy> uploads, downloads;
  std::vector<void*> producers;  // __cuda_array_interface__ streams `s` must wait for
  bool shapeInputOnDevice = false;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const std::string& n = inputs_[i];
    const std::string what = "input '" + n + "'";
    py::object obj = lookup(inputs, inputs_, i);
    if (obj.is_none()) throw Error("no value given for " + what);
    TensorArg t = importTensor(obj, what, consumer);
    checkType(t, e.getTensorDataType(n), what);
    const Dims& declared = e.getTensorShape(n);
    if (!isStatic(declared)) shape(n, t.shape);
    else if (t.shape != declared)
      throw Error(what + " has shape " + toString(t.shape) + " but the engine takes " + toString(declared));
    if (t.memory == Memory::kCuda) {
      if (!device_) throw Error(what + " is " + t.describe() + " but the engine runs on the CPU");
      if (t.deviceId >= 0 && t.deviceId != e.getDeviceIndex())
        throw Error(what + " is " + t.describe() + " but the engine runs on cuda:" + std::to_string(e.getDeviceIndex()));
      if (!t.contiguous())
        throw Error(what + " is not contiguous (strides " + toString(t.strides) + "): pass a contiguous tensor (.contiguous())");
      if (t.producerStream && toHandle(t.producerStream) != s) producers.push_back(toHandle(t.producerStream));
      bind(n, t.data);
      shapeInputOnDevice |= shapeInputs_[i];
    } else {
      if (!t.contiguous()) t = contiguousHostCopy(t);
      if (device_) {
        void* d = staging(n, t.bytes());
        uploads.push_back({d, t.data, t.bytes()});
        bind(n, d);
        shapeInputOnDevice |= shapeInputs_[i];
      } else {
        bind(n, t.data);  // read in place: no copy
      }
    }
    keep.push_back(std::move(t));
  }
  if (device_) {
    py::gil_scoped_release release;
    for (void* p : producers) {
      device_->recordEvent(event_, p);
      device_->streamWaitEvent(s, event_);
    }
    for (const Copy& c : uploads) device_->copyToDevice(c.dst, c.src, c.bytes, s);
    // The context reads shape-deciding inputs with a copy outside `s`: their data must be there.
    if (shapeInputOnDevice) device_->synchronize(s);
  }

  py::dict result;
  // infer() gives every output its memory itself: data-dependent ones through its own allocator,
  // the others by address; allocators set with set_output_allocator are back after the call.
  InferAllocator dynamicOutputs(*this);
  struct Restore {
    ContextHandle& c;
    ~Restore() {
      for (const std::string& n : c.outputs_) {
        auto it = c.allocators_.find(n);
        c.ctx_->setOutputAllocator(n, it == c.allocators_.end() ? nullptr : it->second.get());
      }
    }
  } restore{*this};
  std::vector<std::string> dynamic;
  for (size_t j = 0; j < outputs_.size(); ++j) {
    const std::string& n = outputs_[j];
    const std::string what = "output '" + n + "'";
    const Dims dims = ctx_->getTensorShape(n);
    const DataType type = e.getTensorDataType(n);
    py::object obj = outputs.is_none() ? py::object(py::none()) : lookup(outputs, outputs_, j);
    if (!isStatic(dims)) {  // known only during the run: returned as a new NumPy array
      if (!obj.is_none())
        throw Error(what + " has a data-dependent shape " + toString(dims) +
                    ": it cannot be given; leave it out and infer returns it as a new array");
      ctx_->setOutputAllocator(n, &dynamicOutputs);
      dynamic.push_back(n);
      continue;
    }
    ctx_->setOutputAllocator(n, nullptr);
    if (obj.is_none()) {  // a new NumPy array
      py::array a(numpyDtype(type), std::vector<py::ssize_t>(dims.begin(), dims.end()));
      if (device_) {
        void* d = staging(n, static_cast<size_t>(a.nbytes()));
        downloads.push_back({a.mutable_data(), d, static_cast<size_t>(a.nbytes())});
        bind(n, d);
      } else {
        bind(n, a.mutable_data());
      }
      result[n.c_str()] = a;
      continue;
    }
    TensorArg t = importTensor(obj, what, consumer);
    checkType(t, type, what);
    if (t.shape != dims) throw Error(what + " has shape " + toString(t.shape) + " but the engine writes " + toString(dims));
    if (t.readOnly) throw Error(what + " is read-only");
    if (!t.contiguous())
      throw Error(what + " is not contiguous (strides " + toString(t.strides) + "): pass a contiguous tensor");
    if (t.memory == Memory::kCuda) {
      if (!device_) throw Error(what + " is " + t.describe() + " but the engine runs on the CPU");
      if (t.deviceId >= 0 && t.deviceId != e.getDeviceIndex())
        throw Error(what + " is " + t.describe() + " but the engine runs on cuda:" + std::to_string(e.getDeviceIndex()));
      bind(n, t.data);
    } else if (device_) {
      void* d = staging(n, t.bytes());
      downloads.push_back({t.data, d, t.bytes()});
      bind(n, d);
    } else {
      bind(n, t.data);  // written in place: no copy
    }
    result[n.c_str()] = obj;
    keep.push_back(std::move(t));
  }
  // Host memory (NumPy arrays, host tensors) must be complete before the call returns; so must
  // everything when no stream was given (the call is then synchronous).
  const bool wait = device_ && (!sa.given || !uploads.empty() || !downloads.empty() || !dynamic.empty());
  {
    py::gil_scoped_release release;
    launch(s);
    for (const Copy& c : downloads) device_->copyToHost(c.dst, c.src, c.bytes, s);
    if (wait) device_->synchronize(s);
  }
  for (const std::string& n : dynamic) {
    const Dims& dims = dynamicOutputs.dims_.at(n);
    py::array a(numpyDtype(e.getTensorDataType(n)), std::vector<py::ssize_t>(dims.begin(), dims.end()));
    const size_t bytes = static_cast<size_t>(a.nbytes());
    if (bytes && device_) {
      py::gil_scoped_release release;
      device_->copyToHost(a.mutable_data(), staging_.at(n).ptr, bytes, s);
      device_->synchronize(s);
    } else if (bytes) {
      std::memcpy(a.mutable_data(), hostStaging_.at(n).ptr, bytes);
    }
    result[n.c_str()] = a;
  }
  return result;
}

void ContextHandle::setInputShape(const std::string& name, const Dims& dims) {
  auto lock = claim();
  shape(name, dims);
}

Dims ContextHandle::tensorShape(const std::string& name) {
  auto lock = claim();
  return ctx_->getTensorShape(name);
}

void ContextHandle::setTensorAddress(const std::string& name, uintptr_t address) {
  auto lock = claim();
  bind(name, toHandle(address));
}

void ContextHandle::executeAsync(py::handle streamObj, bool wait) {
  auto lock = claim();
  const StreamArg sa = parseStream(streamObj);
  void* s = device_ ? (sa.given ? sa.handle : stream_) : nullptr;
  py::gil_scoped_release release;
  launch(s);
  if (wait && device_) device_->synchronize(s);
}

void ContextHandle::setOutputAllocator(const std::string& name, py::object allocator) {
  auto lock = claim();
  if (std::find(outputs_.begin(), outputs_.end(), name) == outputs_.end())
    throw Error("'" + name + "' is not an output of the engine");
  if (allocator.is_none()) {
    ctx_->setOutputAllocator(name, nullptr);
    allocators_.erase(name);
    return;
  }
  for (const char* m : {"reallocate_output", "notify_shape"})
    if (!py::hasattr(allocator, m))
      throw Error(std::string("an output allocator needs the methods reallocate_output(name, current, size, alignment) "
                              "and notify_shape(name, shape); this one has no ") + m);
  auto a = std::make_unique<PyOutputAllocator>(std::move(allocator));
  ctx_->setOutputAllocator(name, a.get());
  allocators_[name] = std::move(a);
  graphStale_ = true;
}

py::object ContextHandle::outputAllocator(const std::string& name) const {
  auto it = allocators_.find(name);
  return it == allocators_.end() ? py::object(py::none()) : it->second->object();
}

void ContextHandle::setProfile(int p) {
  auto lock = claim();
  if (p != ctx_->getOptimizationProfile()) graphStale_ = true;
  ctx_->setOptimizationProfile(p);
}

void ContextHandle::setCudaGraph(bool on) {
  if (on && !device_) {
    if (PyErr_WarnEx(PyExc_RuntimeWarning, "cuda_graph has no effect on the CPU (it has no CUDA graphs); runs are plain enqueues", 1))
      throw py::error_already_set();  // warnings turned into errors
    on = false;
  }
  if (on != useGraph_) graphStale_ = true;
  useGraph_ = on;
}

void ContextHandle::setProfiler(py::object fn) {
  auto lock = claim();
  if (fn.is_none()) {
    ctx_->setProfiler(nullptr);
    profiler_.reset();
    return;
  }
  auto p = std::make_unique<PyProfiler>(std::move(fn));
  ctx_->setProfiler(p.get());
  profiler_ = std::move(p);
}

MemoryUsage ContextHandle::memoryUsage() {
  auto lock = claim();
  return ctx_->getMemoryUsage();
}

}  // namespace kiln::python
