// ExecutionContext for Python: zero-copy binding of NumPy / DLPack / __cuda_array_interface__
// tensors, raw device pointers, runs on the caller's CUDA stream, optional CUDA-graph replay.
// One thread at a time per context (as in TensorRT); the GIL is released while the engine runs
// and no Python object is touched then.
#pragma once
#include <pybind11/pybind11.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kiln/device.h"
#include "kiln/runtime.h"
#include "py_callbacks.h"

namespace kiln::python {

namespace py = pybind11;

//! A CUDA stream given from Python: None (the context's own stream), an int handle, or an object
//! with `__cuda_stream__` (returns (version, handle)) or `cuda_stream` (torch.cuda.Stream).
struct StreamArg {
  void* handle = nullptr;
  bool given = false;
};
StreamArg parseStream(py::handle stream);

class ContextHandle {
 public:
  ContextHandle(std::shared_ptr<Engine> engine, bool cudaGraph);
  ~ContextHandle();

  //! Binds `inputs` (a dict by name, or a sequence in input order) and `outputs` (the same, or
  //! None; missing outputs become new NumPy arrays), runs, and returns {name: output}.
  py::dict infer(py::handle inputs, py::handle outputs, py::handle stream);
  void setInputShape(const std::string& name, const Dims& dims);
  Dims tensorShape(const std::string& name);
  void setTensorAddress(const std::string& name, uintptr_t address);
  //! Runs with the addresses and shapes set; on the GPU asynchronous on `stream`.
  void executeAsync(py::handle stream, bool wait);
  //! An output's allocator (PyOutputAllocator; None: the address set with set_tensor_address).
  void setOutputAllocator(const std::string& name, py::object allocator);
  py::object outputAllocator(const std::string& name) const;

  int profile() const { return ctx_->getOptimizationProfile(); }
  void setProfile(int p);
  bool cudaGraph() const { return useGraph_; }
  void setCudaGraph(bool on);
  py::object profiler() const { return profiler_ ? profiler_->fn() : py::none(); }
  void setProfiler(py::object fn);
  MemoryUsage memoryUsage();
  uintptr_t stream() const { return reinterpret_cast<uintptr_t>(stream_); }
  const Engine& engine() const { return *engine_; }

 private:
  //! A buffer of this context on the engine's device, grown as shapes grow, reused across calls.
  struct Staging {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  void* staging(const std::string& name, size_t bytes);
  void bind(const std::string& name, void* address);
  void shape(const std::string& name, const Dims& dims);
  //! Runs one enqueue (or replays the CUDA graph) on `stream`; called without the GIL.
  void launch(void* stream);
  std::unique_lock<std::mutex> claim();

  std::shared_ptr<Engine> engine_;  // keeps the engine alive as long as its context
  std::unique_ptr<ExecutionContext> ctx_;
  std::unique_ptr<Device> device_;  // GPU only
  void* stream_ = nullptr;          // the context's own stream (GPU)
  void* event_ = nullptr;           // orders a producer's stream before ours (GPU)
  std::map<std::string, Staging> staging_;
  std::map<std::string, Staging> hostStaging_;  // CPU: data-dependent outputs of infer()
  std::map<std::string, std::unique_ptr<PyOutputAllocator>> allocators_;  // set_output_allocator
  class InferAllocator;
  std::vector<std::string> inputs_, outputs_;
  std::vector<bool> shapeInputs_;  // per input: its values decide shapes
  std::map<std::string, void*> bound_;
  std::map<std::string, Dims> shapes_;
  std::optional<void*> lastStream_;  // where this context's last run went (GPU)
  bool useGraph_ = false, graphStale_ = true, graphCaptured_ = false;
  std::unique_ptr<PyProfiler> profiler_;
  std::mutex busy_;  // a second thread gets an error, not a corrupted context
};

}  // namespace kiln::python
