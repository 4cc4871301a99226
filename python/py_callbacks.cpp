// Python callbacks (py_callbacks.h).
#include "py_callbacks.h"

namespace kiln::python {

PyCallable::~PyCallable() {
  if (!Py_IsInitialized()) {  // at interpreter exit: nothing may touch Python objects any more
    fn_.release();
    return;
  }
  py::gil_scoped_acquire gil;
  fn_ = py::object();
}

const char* severityName(ILogger::Severity s) {
  switch (s) {
    case ILogger::Severity::kERROR: return "error";
    case ILogger::Severity::kWARNING: return "warning";
    case ILogger::Severity::kINFO: return "info";
    default: return "verbose";
  }
}

void PyLogger::log(Severity severity, const std::string& msg) noexcept {
  if (!Py_IsInitialized()) return;
  py::gil_scoped_acquire gil;
  try {
    fn_->fn()(severityName(severity), msg);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("kiln logger callback");
  } catch (...) {  // e.g. a message that is not valid UTF-8
  }
}

void PyProfiler::reportLayerTime(const std::string& layer, float ms) noexcept {
  if (!Py_IsInitialized()) return;
  py::gil_scoped_acquire gil;
  try {
    fn_->fn()(layer, ms);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("kiln profiler callback");
  } catch (...) {
  }
}

void* PyOutputAllocator::reallocateOutput(const std::string& name, void* currentMemory, uint64_t size, uint64_t alignment) {
  py::gil_scoped_acquire gil;
  try {
    py::object r = obj_->fn().attr("reallocate_output")(name, reinterpret_cast<uintptr_t>(currentMemory), size, alignment);
    return r.is_none() ? nullptr : reinterpret_cast<void*>(r.cast<uintptr_t>());
  } catch (py::error_already_set& e) {
    throw Error("output '" + name + "': the output allocator's reallocate_output raised " + e.what());
  } catch (const py::cast_error&) {
    throw Error("output '" + name + "': the output allocator's reallocate_output must return an int address or None");
  }
}

void PyOutputAllocator::notifyShape(const std::string& name, const Dims& dims) {
  py::gil_scoped_acquire gil;
  try {
    py::tuple shape(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) shape[i] = dims[i];
    obj_->fn().attr("notify_shape")(name, shape);
  } catch (py::error_already_set& e) {
    throw Error("output '" + name + "': the output allocator's notify_shape raised " + e.what());
  }
}

ProgressCallback progressCallback(std::shared_ptr<PyCallable> fn) {
  return [fn](const std::string& phase, int step, int total) {
    py::gil_scoped_acquire gil;
    fn->fn()(phase, step, total);  // py::error_already_set propagates out of Builder::build
  };
}

std::shared_ptr<Engine> shareEngine(std::unique_ptr<Engine> engine, std::shared_ptr<PyLogger> logger) {
  if (!engine) throw Error("no engine was produced");
  if (!logger) return std::shared_ptr<Engine>(std::move(engine));
  return std::shared_ptr<Engine>(engine.release(), [logger](Engine* e) { delete e; });
}

std::shared_ptr<PyLogger> loggerFor(const py::object& fn) {
  if (fn.is_none()) return nullptr;
  if (!PyCallable_Check(fn.ptr())) throw Error("logger must be a callable (severity, message) or None");
  return std::make_shared<PyLogger>(fn);
}

}  // namespace kiln::python
