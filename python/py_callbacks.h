// Python callables behind kiln's C++ callbacks (logger, build progress, per-layer profiler).
// kiln calls them from threads that do not hold the GIL (builds and enqueues release it), so each
// call takes the GIL first; the callables are owned through shared_ptr so that copying a callback
// (a BuilderConfig copy, a std::function copy) never touches a Python reference count.
#pragma once
#include <pybind11/pybind11.h>

#include <memory>

#include "kiln/builder.h"
#include "kiln/logger.h"
#include "kiln/profiler.h"
#include "kiln/runtime.h"

namespace kiln::python {

namespace py = pybind11;

//! A Python callable; released with the GIL held (or leaked at interpreter exit).
class PyCallable {
 public:
  explicit PyCallable(py::object fn) : fn_(std::move(fn)) {}
  ~PyCallable();
  PyCallable(const PyCallable&) = delete;
  PyCallable& operator=(const PyCallable&) = delete;
  const py::object& fn() const { return fn_; }

 private:
  py::object fn_;
};

//! Forwards kiln's messages to fn(severity: str, message: str); severity is "error", "warning",
//! "info" or "verbose". An exception in fn is reported as unraisable (sys.unraisablehook).
class PyLogger : public ILogger {
 public:
  explicit PyLogger(py::object fn) : fn_(std::make_shared<PyCallable>(std::move(fn))) {}
  void log(Severity severity, const std::string& msg) noexcept override;

 private:
  std::shared_ptr<PyCallable> fn_;
};

//! Reports each layer's time to fn(layer: str, ms: float) (ExecutionContext.profiler).
class PyProfiler : public IProfiler {
 public:
  explicit PyProfiler(py::object fn) : fn_(std::make_shared<PyCallable>(std::move(fn))) {}
  void reportLayerTime(const std::string& layer, float ms) noexcept override;
  const py::object& fn() const { return fn_->fn(); }

 private:
  std::shared_ptr<PyCallable> fn_;
};

//! An output allocator written in Python: obj.reallocate_output(name, current: int, size: int,
//! alignment: int) -> int (an address; 0 or None: none) and obj.notify_shape(name, shape: tuple).
//! A Python exception in either fails the run with a kiln error carrying its message.
class PyOutputAllocator : public IOutputAllocator {
 public:
  explicit PyOutputAllocator(py::object obj) : obj_(std::make_shared<PyCallable>(std::move(obj))) {}
  void* reallocateOutput(const std::string& name, void* currentMemory, uint64_t size, uint64_t alignment) override;
  void notifyShape(const std::string& name, const Dims& dims) override;
  const py::object& object() const { return obj_->fn(); }

 private:
  std::shared_ptr<PyCallable> obj_;
};

//! Build progress to fn(phase: str, step: int, total: int); an exception in fn stops the build
//! and propagates from build_engine.
ProgressCallback progressCallback(std::shared_ptr<PyCallable> fn);

//! An engine for Python that keeps `logger` (which the engine logs to) alive as long as itself.
std::shared_ptr<Engine> shareEngine(std::unique_ptr<Engine> engine, std::shared_ptr<PyLogger> logger);
//! The logger for fn (None: kiln's default logger, which prints to stderr: kiln.set_log_level).
std::shared_ptr<PyLogger> loggerFor(const py::object& fn);

//! "error", "warning", "info", "verbose".
const char* severityName(ILogger::Severity s);

}  // namespace kiln::python
