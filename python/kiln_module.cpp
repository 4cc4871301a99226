// kiln's Python API (pybind11): the C++ API's shape (OptimizationProfile, BuilderConfig, Engine,
// ExecutionContext) over any array that speaks NumPy, DLPack or __cuda_array_interface__. The
// parts: py_builder.cpp (build), py_engine.cpp + py_context.cpp (run), py_tensor.cpp (arrays),
// py_callbacks.cpp (Python callables behind kiln's logger, progress and profiler).
#include <pybind11/pybind11.h>

#include <map>

#include "bindings.h"
#include "kiln/kiln.h"

namespace py = pybind11;
using namespace kiln;

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
      py::arg("level"), "The least severe messages kiln's default logger prints on stderr: error, warning (default), info or verbose");
  m.def("gpu_available", &gpuAvailable, "Whether this build has a CUDA backend and a GPU is present");
  m.def("load_plugin_library", &loadPluginLibrary, py::arg("path"),
        "Loads a plugin library (KILN_PLUGIN_LIBRARY); its plugins become importable and runnable");

  python::bindBuilder(m);
  python::bindEngine(m);
}
