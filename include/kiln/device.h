// Device memory, streams, events and copies for applications that run engines with their own
// buffers (the CLI, the Python module): ExecutionContext::setTensorAddress takes device pointers
// and enqueue takes a stream; this is where they come from. On the CPU the memory is host memory,
// copies are synchronous, and streams and events are null.
#pragma once
#include <cstddef>
#include <memory>

#include "kiln/builder.h"

namespace kiln {

class Device {
 public:
  //! Opens the device of `type` (kGPU: CUDA device `index`) and makes it the calling thread's
  //! current device. Throws kiln::Error when it is not available in this build or machine.
  explicit Device(DeviceType type, int index = 0);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  DeviceType type() const;
  //! Makes this device current on the calling thread: call it on every thread that enqueues work
  //! for it (CUDA's current device is per thread; engines load on the current device).
  void makeCurrent();

  //! Device memory (host memory on the CPU), 64-byte aligned at least. Owned by the caller: release.
  void* allocate(size_t bytes);
  void release(void* p);
  //! Page-locked host memory, so that copies are truly asynchronous. Owned by the caller: releaseHost.
  void* allocateHost(size_t bytes);
  void releaseHost(void* p);
  //! Copies, asynchronous on `stream` (null: synchronous).
  void copyToDevice(void* dst, const void* src, size_t bytes, void* stream);
  void copyToHost(void* dst, const void* src, size_t bytes, void* stream);
  //! Blocks the host until the work enqueued on `stream` is done.
  void synchronize(void* stream);

  //! A new stream (null on the CPU). Owned by the caller: destroyStream.
  void* createStream();
  void destroyStream(void* stream);
  //! A new event that can time (elapsedMs). Owned by the caller: destroyEvent.
  void* createEvent();
  void destroyEvent(void* event);
  //! Records `event` on `stream` (asynchronous).
  void recordEvent(void* event, void* stream);
  //! Work enqueued on `stream` after this call waits for `event` (recorded on another stream, e.g.
  //! the one that produced an input); the host does not wait. No-op on the CPU.
  void streamWaitEvent(void* stream, void* event);
  //! Milliseconds between two completed events (0 on the CPU).
  float elapsedMs(void* start, void* end);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln
