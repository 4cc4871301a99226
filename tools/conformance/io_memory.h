// Buffers for engine inputs/outputs on the engine's device: plain host memory for the CPU, CUDA
// device memory for the GPU (libcudart is loaded at run time so the runner has no CUDA build
// dependency).
#pragma once
#include <memory>

#include "kiln/builder.h"
#include "kiln/types.h"

namespace kiln::conformance {

//! A host tensor of `type` and `dims` filled with a value no correct kernel writes there: quiet NaN
//! for floats, 0xA5 bytes for integers and bool. Where `expected` (same count) holds that very value
//! at an element (a NaN, an int32 of 0xA5A5A5A5), the element gets another poison (-7777.0 or 0x5A
//! bytes) so that an output the engine never writes cannot match its expected value.
HostTensor poisonedOutput(DataType type, const Dims& dims, const HostTensor* expected);

class IoMemory {
 public:
  virtual ~IoMemory() = default;
  //! Creates the allocator for `device`; throws kiln::Error when the device is unusable.
  static std::unique_ptr<IoMemory> create(DeviceType device);
  //! A device copy of `t` (never null, even for zero elements); valid until this object dies.
  virtual void* upload(const HostTensor& t) = 0;
  //! `bytes` of device memory (never null), contents undefined: outputs are uploaded poisoned
  //! tensors (poisonedOutput) instead.
  virtual void* allocate(size_t bytes) = 0;
  //! Copies dst.bytes() from `src` (from allocate) into dst after the engine's work is done.
  virtual void download(const void* src, HostTensor& dst) = 0;
  //! Waits for work queued by ExecutionContext::enqueue(nullptr).
  virtual void synchronize() = 0;
};

}  // namespace kiln::conformance
