// Buffers for engine inputs/outputs on the engine's device: plain host memory for the CPU, CUDA
// device memory for the GPU (libcudart is loaded at run time so the runner has no CUDA build
// dependency).
#pragma once
#include <memory>

#include "kiln/builder.h"
#include "kiln/types.h"

namespace kiln::conformance {

class IoMemory {
 public:
  virtual ~IoMemory() = default;
  //! Creates the allocator for `device`; throws kiln::Error when the device is unusable.
  static std::unique_ptr<IoMemory> create(DeviceType device);
  //! A device copy of `t` (never null, even for zero elements); valid until this object dies.
  virtual void* upload(const HostTensor& t) = 0;
  //! `bytes` of device memory (never null).
  virtual void* allocate(size_t bytes) = 0;
  //! Copies dst.bytes() from `src` (from allocate) into dst after the engine's work is done.
  virtual void download(const void* src, HostTensor& dst) = 0;
  //! Waits for work queued by ExecutionContext::enqueue(nullptr).
  virtual void synchronize() = 0;
};

}  // namespace kiln::conformance
