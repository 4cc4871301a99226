// kiln's Python API (pybind11): the C++ API's shape (OptimizationProfile, BuilderConfig, Engine,
// ExecutionContext) with NumPy arrays for I/O. ExecutionContext.infer copies host arrays to the
// engine's device (or reads them in place on the CPU), runs one enqueue and returns the outputs.
// A context is not thread-safe (as in TensorRT): one thread at a time per context; one context per
// thread runs concurrently (the GIL is released while the engine runs).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "kiln/kiln.h"
#include "kiln/onnx_parser.h"
#include "kiln/plugin.h"
#include "kiln/timing_cache.h"
#include "kiln/version.h"

namespace py = pybind11;
using namespace kiln;

namespace {

//! NumPy dtype of a kiln type; bfloat16 is ml_dtypes' (NumPy has none; onnx depends on ml_dtypes).
py::dtype dtypeOf(DataType t) {
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

Dims toDims(const std::vector<int64_t>& v) { return Dims(v.begin(), v.end()); }
std::vector<int64_t> fromDims(const Dims& d) { return std::vector<int64_t>(d.begin(), d.end()); }

//! Buffers of one context on its engine's device; grown as shapes grow, reused across calls.
struct DeviceBuffer {
  std::shared_ptr<Device> device;
  void* ptr = nullptr;
  size_t bytes = 0;
  void reserve(size_t n) {
    if (n <= bytes) return;
    if (ptr) device->release(ptr);
    ptr = nullptr;  // stays null if the allocation below throws
    bytes = 0;
    ptr = device->allocate(n);
    bytes = n;
  }
  ~DeviceBuffer() {
    if (ptr) device->release(ptr);
  }
};

//! A context plus the device buffers and stream that ExecutionContext.infer uses.
struct ContextHandle {
  std::shared_ptr<Engine> engine;  // keeps the engine alive as long as its context
  std::unique_ptr<ExecutionContext> ctx;
  std::shared_ptr<Device> device;  // GPU only
  void* stream = nullptr;
  std::map<std::string, std::unique_ptr<DeviceBuffer>> buffers;
  //! A context runs one call at a time; a second thread gets an error, not a corrupted heap.
  std::mutex busy;

  explicit ContextHandle(std::shared_ptr<Engine> e) : engine(std::move(e)) {
    // The engine's device, made current first: the context allocates on the current device.
    if (engine->device() == DeviceType::kGPU) device = std::make_shared<Device>(DeviceType::kGPU, engine->getDeviceIndex());
    ctx = engine->createExecutionContext();
    if (device) stream = device->createStream();
  }
  ~ContextHandle() {
    buffers.clear();
    ctx.reset();
    if (stream) device->destroyStream(stream);
  }

  void* deviceBuffer(const std::string& name, size_t bytes) {
    auto& b = buffers[name];
    if (!b) {
      b = std::make_unique<DeviceBuffer>();
      b->device = device;
    }
    b->reserve(std::max<size_t>(bytes, 64));
    return b->ptr;
  }

  py::dict infer(const py::dict& feeds) {
    std::unique_lock<std::mutex> lock(busy, std::try_to_lock);
    if (!lock.owns_lock()) throw Error("this ExecutionContext is running in another thread; use one context per thread");
    const Engine& e = *engine;
    std::vector<std::string> inputs, outputs;
    for (int i = 0; i < e.getNbIOTensors(); ++i) {
      std::string n = e.getIOTensorName(i);
      (e.getTensorIOMode(n) == TensorIOMode::kINPUT ? inputs : outputs).push_back(n);
    }
    for (auto item : feeds) {
      std::string n = py::str(item.first);
      if (std::find(inputs.begin(), inputs.end(), n) == inputs.end()) throw Error("'" + n + "' is not an input of the engine");
    }
    // Inputs: C-contiguous arrays of the engine's type (no silent conversion: a float64 array for
    // a float32 input is an error, as in ONNX Runtime).
    std::vector<py::array> keep;
    for (const std::string& n : inputs) {
      if (!feeds.contains(n)) throw Error("no value given for input '" + n + "'");
      py::array a = py::array::ensure(feeds[n.c_str()]);
      if (!a) throw Error("input '" + n + "' is not an array");
      const DataType t = e.getTensorDataType(n);
      if (!a.dtype().equal(dtypeOf(t)))
        throw Error("input '" + n + "' is " + std::string(py::str(a.dtype())) + " but the engine takes " + toString(t));
      a = py::array::ensure(a, py::array::c_style);
      Dims dims;
      for (py::ssize_t k = 0; k < a.ndim(); ++k) dims.push_back(a.shape(k));
      if (!isStatic(e.getTensorShape(n))) ctx->setInputShape(n, dims);
      else if (dims != e.getTensorShape(n))
        throw Error("input '" + n + "' has shape " + toString(dims) + " but the engine takes " + toString(e.getTensorShape(n)));
      keep.push_back(a);
      if (device) {
        void* d = deviceBuffer(n, a.nbytes());
        device->copyToDevice(d, a.data(), a.nbytes(), stream);
        ctx->setTensorAddress(n, d);
      } else {
        ctx->setTensorAddress(n, const_cast<void*>(a.data()));
      }
    }
    // Output shapes may be computed from input values, which the context reads from the device:
    // the uploads above must have landed.
    if (device) device->synchronize(stream);
    py::dict result;
    std::vector<std::pair<std::string, py::array>> outs;
    for (const std::string& n : outputs) {
      Dims dims = ctx->getTensorShape(n);
      if (!isStatic(dims))
        throw UnsupportedError("output '" + n + "' has a data-dependent shape " + toString(dims) + ", which kiln does not support yet");
      std::vector<py::ssize_t> shape(dims.begin(), dims.end());
      py::array a(dtypeOf(e.getTensorDataType(n)), shape);
      ctx->setTensorAddress(n, device ? deviceBuffer(n, a.nbytes()) : a.mutable_data());
      outs.emplace_back(n, a);
    }
    // Raw pointers and sizes are taken while the GIL is held: py::array's accessors create Python
    // objects (nbytes() makes a dtype), which pybind11 refuses without the GIL.
    struct HostCopy { void* dst; const void* src; size_t bytes; };
    std::vector<HostCopy> copies;
    if (device)
      for (auto& [n, a] : outs) copies.push_back({a.mutable_data(), buffers[n]->ptr, static_cast<size_t>(a.nbytes())});
    {
      py::gil_scoped_release release;  // the arrays are held in `keep` and `outs`
      ctx->enqueue(stream);
      if (device) {
        for (const HostCopy& c : copies) device->copyToHost(c.dst, c.src, c.bytes, stream);
        device->synchronize(stream);
      }
    }
    for (auto& [n, a] : outs) result[n.c_str()] = a;
    return result;
  }
};

std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open '" + path + "'");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

PYBIND11_MODULE(_kiln, m) {  // kiln._kiln, re-exported by python/kiln/__init__.py
  m.doc() = "kiln: build, save, load and run optimized inference engines from ONNX models";
  m.attr("__version__") = KILN_VERSION_STRING;

  auto error = py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception<UnsupportedError>(m, "UnsupportedError", error.ptr());

  m.def(
      "set_log_level",
      [](const std::string& level) {
        static const std::map<std::string, ILogger::Severity> levels = {{"error", ILogger::Severity::kERROR},
                                                                        {"warning", ILogger::Severity::kWARNING},
                                                                        {"info", ILogger::Severity::kINFO},
                                                                        {"verbose", ILogger::Severity::kVERBOSE}};
        auto it = levels.find(level);
        if (it == levels.end()) throw Error("log level must be error, warning, info or verbose, not '" + level + "'");
        setDefaultLoggerThreshold(it->second);
      },
      py::arg("level"), "The least severe messages kiln prints on stderr: error, warning (default), info or verbose");
  m.def("gpu_available", &gpuAvailable, "Whether this build has a CUDA backend and a GPU is present");
  m.def("load_plugin_library", &loadPluginLibrary, py::arg("path"),
        "Loads a plugin library (KILN_PLUGIN_LIBRARY); its plugins become importable and runnable");

  py::class_<OptimizationProfile>(m, "OptimizationProfile")
      .def(py::init<>())
      .def(
          "set_shape",
          [](OptimizationProfile& p, const std::string& input, const std::vector<int64_t>& min, const std::vector<int64_t>& opt,
             const std::vector<int64_t>& max) {
            p.setDimensions(input, OptProfileSelector::kMIN, toDims(min));
            p.setDimensions(input, OptProfileSelector::kOPT, toDims(opt));
            p.setDimensions(input, OptProfileSelector::kMAX, toDims(max));
          },
          py::arg("input"), py::arg("min"), py::arg("opt"), py::arg("max"), "min/opt/max shapes of a dynamic input");

  // BuilderConfig with keyword arguments for what trtexec's flags set.
  struct PyBuilderConfig {
    BuilderConfig cfg;
    std::string timingCachePath;
  };
  py::class_<PyBuilderConfig>(m, "BuilderConfig")
      .def(py::init([](const std::string& device, bool fp16, bool bf16, bool tf32, bool stronglyTyped, int level, int maxAux,
                       int threads, const std::string& timingCache) {
             auto c = std::make_unique<PyBuilderConfig>();
             if (device != "cpu" && device != "gpu") throw Error("device must be 'cpu' or 'gpu', not '" + device + "'");
             if (level < 0 || level > 5) throw Error("optimization_level must be 0..5");
             c->cfg.setDevice(device == "gpu" ? DeviceType::kGPU : DeviceType::kCPU);
             c->cfg.setFlag(BuilderFlag::kFP16, fp16);
             c->cfg.setFlag(BuilderFlag::kBF16, bf16);
             c->cfg.setFlag(BuilderFlag::kTF32, tf32);
             c->cfg.setFlag(BuilderFlag::kSTRONGLY_TYPED, stronglyTyped);
             c->cfg.setBuilderOptimizationLevel(level);
             c->cfg.setMaxAuxStreams(maxAux);
             c->cfg.setThreads(threads);
             c->timingCachePath = timingCache;
             return c;
           }),
           py::kw_only(), py::arg("device") = "cpu", py::arg("fp16") = false, py::arg("bf16") = false, py::arg("tf32") = true,
           py::arg("strongly_typed") = false, py::arg("optimization_level") = 3, py::arg("max_aux_streams") = -1,
           py::arg("threads") = 0, py::arg("timing_cache") = "")
      .def(
          "add_optimization_profile", [](PyBuilderConfig& c, const OptimizationProfile& p) { c.cfg.addOptimizationProfile(p); },
          py::arg("profile"))
      .def_property_readonly("num_optimization_profiles", [](const PyBuilderConfig& c) { return c.cfg.profiles().size(); });

  py::class_<Engine, std::shared_ptr<Engine>>(m, "Engine")
      .def_static(
          "deserialize",
          [](const py::bytes& plan, int device) {
            std::string s = plan;
            py::gil_scoped_release release;
            return std::shared_ptr<Engine>(Engine::deserialize(s.data(), s.size(), device));
          },
          py::arg("plan"), py::kw_only(), py::arg("device") = -1,
          "Loads a plan from bytes; a GPU plan on CUDA device `device` (-1: the current device; a CPU plan ignores it)")
      .def_static(
          "load",
          [](const std::string& path, int device) {
            py::gil_scoped_release release;
            std::string s = readFile(path);
            return std::shared_ptr<Engine>(Engine::deserialize(s.data(), s.size(), device));
          },
          py::arg("path"), py::kw_only(), py::arg("device") = -1,
          "Loads a plan file; a GPU plan on CUDA device `device` (-1: the current device; a CPU plan ignores it)")
      .def("serialize", [](const Engine& e) {
        auto plan = e.serialize();
        return py::bytes(reinterpret_cast<const char*>(plan.data()), plan.size());
      })
      .def(
          "save",
          [](const Engine& e, const std::string& path) {
            auto plan = e.serialize();
            std::ofstream f(path, std::ios::binary);
            f.write(reinterpret_cast<const char*>(plan.data()), static_cast<std::streamsize>(plan.size()));
            if (!f) throw Error("failed writing '" + path + "'");
          },
          py::arg("path"))
      .def_property_readonly("device", [](const Engine& e) { return std::string(toString(e.device())); })
      .def_property_readonly("device_index", &Engine::getDeviceIndex, "The CUDA device the engine runs on; -1 on the CPU")
      .def_property_readonly("num_layers", &Engine::getNbLayers)
      .def_property_readonly("num_aux_streams", &Engine::getNbAuxStreams)
      .def_property_readonly("device_memory_size", &Engine::getDeviceMemorySize)
      .def_property_readonly("weight_bytes", &Engine::getWeightBytes, "Bytes of the weights as the plan stores them")
      .def_property_readonly("num_optimization_profiles", &Engine::getNbOptimizationProfiles)
      .def_property_readonly("layer_information", &Engine::getLayerInformation, "Layers, fused ops, tactics, precisions (JSON)")
      .def_property_readonly(
          "io_tensors",
          [](const Engine& e) {
            py::list l;
            for (int i = 0; i < e.getNbIOTensors(); ++i) {
              std::string n = e.getIOTensorName(i);
              py::dict d;
              d["name"] = n;
              d["mode"] = e.getTensorIOMode(n) == TensorIOMode::kINPUT ? "input" : "output";
              d["dtype"] = toString(e.getTensorDataType(n));
              d["shape"] = fromDims(e.getTensorShape(n));
              l.append(d);
            }
            return l;
          },
          "Inputs then outputs: name, mode, dtype, build-time shape (-1: dynamic)")
      .def(
          "profile_shape",
          [](const Engine& e, const std::string& input, int profile) {
            return py::make_tuple(fromDims(e.getProfileShape(input, profile, OptProfileSelector::kMIN)),
                                  fromDims(e.getProfileShape(input, profile, OptProfileSelector::kOPT)),
                                  fromDims(e.getProfileShape(input, profile, OptProfileSelector::kMAX)));
          },
          py::arg("input"), py::arg("profile") = 0, "(min, opt, max) of a dynamic input in a profile")
      .def("create_execution_context", [](std::shared_ptr<Engine> e) { return std::make_unique<ContextHandle>(std::move(e)); });

  py::class_<ContextHandle>(m, "ExecutionContext")
      .def_property(
          "optimization_profile", [](const ContextHandle& c) { return c.ctx->getOptimizationProfile(); },
          [](ContextHandle& c, int p) {
            std::unique_lock<std::mutex> lock(c.busy, std::try_to_lock);
            if (!lock.owns_lock()) throw Error("this ExecutionContext is running in another thread; use one context per thread");
            c.ctx->setOptimizationProfile(p);
          },
          "The profile the next inference runs with")
      .def_property_readonly(
          "memory_usage",
          [](ContextHandle& c) {
            std::unique_lock<std::mutex> lock(c.busy, std::try_to_lock);
            if (!lock.owns_lock()) throw Error("this ExecutionContext is running in another thread; use one context per thread");
            const MemoryUsage m = c.ctx->getMemoryUsage();
            py::dict d;
            d["arena_bytes"] = m.arenaBytes;
            d["arena_lower_bound"] = m.arenaLowerBound;
            d["workspace_bytes"] = m.workspaceBytes;
            d["live_bytes"] = m.liveBytes;
            return d;
          },
          "Activation memory at the current shapes: arena_bytes, arena_lower_bound (the planner's bound), "
          "workspace_bytes, live_bytes (per layer)")
      .def("infer", &ContextHandle::infer, py::arg("inputs"),
           "Runs the engine on {input name: NumPy array} and returns {output name: NumPy array}");

  m.def(
      "build_engine",
      [](const py::object& model, const PyBuilderConfig& c) {
        BuilderConfig cfg = c.cfg;  // this build's own copy: other threads may use or change `c`
        const std::string cachePath = c.timingCachePath;
        // A path (str or os.PathLike) or the serialized model (bytes, e.g. ModelProto.SerializeToString()).
        const bool inMemory = py::isinstance<py::bytes>(model);
        const std::string source = inMemory ? std::string(py::bytes(model)) : std::string(py::str(py::module_::import("os").attr("fspath")(model)));
        py::gil_scoped_release release;
        Network net;
        if (inMemory) parseOnnxBuffer(source.data(), source.size(), net);
        else parseOnnxFile(source, net);
        TimingCache cache;
        if (!cachePath.empty()) {
          cache = TimingCache::load(cachePath);
          cfg.setTimingCache(&cache);
        }
        std::shared_ptr<Engine> e = Builder().build(net, cfg);
        if (!cachePath.empty()) cache.save(cachePath);
        return e;
      },
      py::arg("model"), py::arg("config"),
      "Parses an ONNX model (a file path, or the serialized model as bytes; external data needs a path) and builds an engine "
      "with `config`");
}
