// Engine and ExecutionContext bindings.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <fstream>
#include <sstream>

#include "bindings.h"
#include "kiln/kiln.h"
#include "py_callbacks.h"
#include "py_context.h"

namespace kiln::python {

namespace {

namespace py = pybind11;

std::vector<int64_t> fromDims(const Dims& d) { return std::vector<int64_t>(d.begin(), d.end()); }

std::string readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open '" + path + "'");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::shared_ptr<Engine> load(const std::string& plan, int device, int threads, const py::object& loggerFn) {
  std::shared_ptr<PyLogger> pyLogger = loggerFor(loggerFn);
  ILogger& logger = pyLogger ? static_cast<ILogger&>(*pyLogger) : defaultLogger();
  std::unique_ptr<Engine> e;
  {
    py::gil_scoped_release release;
    e = Engine::deserialize(plan.data(), plan.size(), device, logger, threads);
  }
  return shareEngine(std::move(e), std::move(pyLogger));
}

constexpr const char* kLoadDoc =
    "a GPU plan on CUDA device `device` (-1: the current device; a CPU plan ignores it); `threads` overrides the CPU "
    "threads stored in the plan (-1: keep them); logger(severity, message) as in build_engine";

}  // namespace

void bindEngine(py::module_& m) {
  py::class_<Engine, std::shared_ptr<Engine>>(m, "Engine")
      .def_static(
          "deserialize", [](const py::bytes& plan, int device, int threads, const py::object& logger) {
            return load(std::string(plan), device, threads, logger);
          },
          py::arg("plan"), py::kw_only(), py::arg("device") = -1, py::arg("threads") = -1, py::arg("logger") = py::none(),
          (std::string("Loads a plan from bytes; ") + kLoadDoc).c_str())
      .def_static(
          "load",
          [](const std::string& path, int device, int threads, const py::object& logger) {
            std::string plan;
            {
              py::gil_scoped_release release;
              plan = readFile(path);
            }
            return load(plan, device, threads, logger);
          },
          py::arg("path"), py::kw_only(), py::arg("device") = -1, py::arg("threads") = -1, py::arg("logger") = py::none(),
          (std::string("Loads a plan file; ") + kLoadDoc).c_str())
      .def("serialize",
           [](const Engine& e) {
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
      .def("is_shape_inference_input", &isShapeInferenceInput, py::arg("name"),
           "Whether the input's values decide shapes (the context reads it before running)")
      .def(
          "profile_shape",
          [](const Engine& e, const std::string& input, int profile) {
            return py::make_tuple(fromDims(e.getProfileShape(input, profile, OptProfileSelector::kMIN)),
                                  fromDims(e.getProfileShape(input, profile, OptProfileSelector::kOPT)),
                                  fromDims(e.getProfileShape(input, profile, OptProfileSelector::kMAX)));
          },
          py::arg("input"), py::arg("profile") = 0, "(min, opt, max) of a dynamic input in a profile")
      .def(
          "create_execution_context",
          [](std::shared_ptr<Engine> e, bool cudaGraph) { return std::make_unique<ContextHandle>(std::move(e), cudaGraph); },
          py::arg("cuda_graph") = false,
          "A context (one per concurrent caller). cuda_graph: replay runs from a CUDA graph, captured again whenever "
          "the tensor addresses, input shapes or profile change (GPU; pays off with fixed buffers)");

  py::class_<ContextHandle>(m, "ExecutionContext")
      .def_property("optimization_profile", &ContextHandle::profile, &ContextHandle::setProfile,
                    "The profile the next run uses")
      .def_property("cuda_graph", &ContextHandle::cudaGraph, &ContextHandle::setCudaGraph,
                    "Replay runs from a captured CUDA graph (GPU)")
      .def_property("profiler", &ContextHandle::profiler, &ContextHandle::setProfiler,
                    "fn(layer, ms) called for every layer of every run (slower while set); None: off")
      .def_property_readonly("stream", &ContextHandle::stream,
                             "The context's own CUDA stream (what runs use when no stream is given); 0 on the CPU")
      .def_property_readonly(
          "memory_usage",
          [](ContextHandle& c) {
            const MemoryUsage m = c.memoryUsage();
            py::dict d;
            d["arena_bytes"] = m.arenaBytes;
            d["arena_lower_bound"] = m.arenaLowerBound;
            d["workspace_bytes"] = m.workspaceBytes;
            d["live_bytes"] = m.liveBytes;
            return d;
          },
          "Activation memory at the current shapes: arena_bytes, arena_lower_bound (the planner's bound), "
          "workspace_bytes, live_bytes (per layer)")
      .def("infer", &ContextHandle::infer, py::arg("inputs"), py::arg("outputs") = py::none(), py::arg("stream") = py::none(),
           "Runs the engine. inputs: {name: tensor} or a sequence in input order; a tensor is a NumPy array or any "
           "DLPack / __cuda_array_interface__ object (torch, CuPy, JAX), of the engine's type, read in place when it "
           "is in the engine's memory and contiguous. outputs (optional, same forms): tensors written in place. Returns "
           "{name: output}: the tensors given, new NumPy arrays for the others. stream (GPU): None runs on the "
           "context's stream and returns when done; a stream (int, torch.cuda.Stream, __cuda_stream__) runs "
           "asynchronously on it unless host memory is involved")
      .def("set_output_allocator", &ContextHandle::setOutputAllocator, py::arg("name"), py::arg("allocator"),
           "Gives output `name` its memory on every run from allocator.reallocate_output(name, current, size, "
           "alignment) -> int address (device memory on the GPU, host memory on the CPU; 0/None fails the run) and "
           "tells its shape through allocator.notify_shape(name, shape). Required with execute/execute_async for outputs "
           "whose shape depends on the data (get_tensor_shape reports -1 there); infer handles those itself. None: "
           "back to set_tensor_address")
      .def("get_output_allocator", &ContextHandle::outputAllocator, py::arg("name"))
      .def("set_input_shape", &ContextHandle::setInputShape, py::arg("name"), py::arg("shape"))
      .def(
          "get_tensor_shape", [](ContextHandle& c, const std::string& n) { return fromDims(c.tensorShape(n)); }, py::arg("name"),
          "Resolved shape of an input or output at the current input shapes")
      .def("set_tensor_address", &ContextHandle::setTensorAddress, py::arg("name"), py::arg("address"),
           "Binds a tensor to memory at `address` (an int: a device pointer on the GPU, host memory on the CPU), for "
           "execute_async")
      .def(
          "execute_async", [](ContextHandle& c, py::handle s) { c.executeAsync(s, false); }, py::arg("stream") = py::none(),
          "Runs with the bound addresses and shapes; on the GPU asynchronously on `stream` (None: the context's stream)")
      .def(
          "execute", [](ContextHandle& c, py::handle s) { c.executeAsync(s, true); }, py::arg("stream") = py::none(),
          "execute_async, then waits for the stream");
}

}  // namespace kiln::python
