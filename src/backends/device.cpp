// kiln::Device (include/kiln/device.h): the public face of a backend's memory, streams and events.
#include "kiln/device.h"

#include "backends/backend.h"

namespace kiln {

struct Device::Impl {
  std::shared_ptr<Backend> backend;
};

Device::Device(DeviceType type, int index) : impl_(std::make_unique<Impl>()) {
  impl_->backend = getBackend(type, 0, index);
  impl_->backend->makeCurrent();
}
Device::~Device() = default;
DeviceType Device::type() const { return impl_->backend->device(); }
void Device::makeCurrent() { impl_->backend->makeCurrent(); }

void* Device::allocate(size_t bytes) { return impl_->backend->allocate(bytes); }
void Device::release(void* p) { impl_->backend->release(p); }
void* Device::allocateHost(size_t bytes) { return impl_->backend->allocateHost(bytes); }
void Device::releaseHost(void* p) { impl_->backend->releaseHost(p); }
void Device::copyToDevice(void* dst, const void* src, size_t bytes, void* stream) {
  impl_->backend->copyToDevice(dst, src, bytes, stream);
}
void Device::copyToHost(void* dst, const void* src, size_t bytes, void* stream) {
  impl_->backend->copyToHost(dst, src, bytes, stream);
}
void Device::synchronize(void* stream) { impl_->backend->synchronize(stream); }

void* Device::createStream() { return impl_->backend->createStream(); }
void Device::destroyStream(void* stream) { impl_->backend->destroyStream(stream); }
void* Device::createEvent() { return impl_->backend->createEvent(true); }
void Device::destroyEvent(void* event) { impl_->backend->destroyEvent(event); }
void Device::recordEvent(void* event, void* stream) { impl_->backend->recordEvent(event, stream); }
void Device::streamWaitEvent(void* stream, void* event) { impl_->backend->streamWaitEvent(stream, event); }
float Device::elapsedMs(void* start, void* end) { return impl_->backend->timeBetween(start, end); }

}  // namespace kiln
