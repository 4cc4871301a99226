#include "backends/cuda/device_copy.h"

#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

#include "backends/cuda/cuda_util.h"

namespace kiln::cuda {

namespace {

//! What makes two device copies equal: host buffer, size, element type, a hash of the contents
//! (a user may rewrite a constant's buffer between two builds), the packing and the device.
using CopyKey = std::tuple<uintptr_t, size_t, int, uint64_t, std::string, int>;

struct CopyRegistry {
  std::mutex mutex;
  std::map<CopyKey, std::weak_ptr<const DeviceCopy>> live;
  size_t inserts = 0;
};
//! Never destroyed: kernels may outlive other statics at exit.
CopyRegistry& registry() {
  static CopyRegistry* r = new CopyRegistry;
  return *r;
}

//! 64-bit FNV-1a over 8-byte words (then the tail bytes): cheap next to the upload it guards.
uint64_t contentHash(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 1469598103934665603ull;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace

DeviceCopy::~DeviceCopy() {
  if (ptr) cudaFree(ptr);
}

std::shared_ptr<const DeviceCopy> sharedDeviceCopy(const HostTensor& source, const std::string& packing, const Packer& pack) {
  if (!source.valid() || source.bytes() == 0) return nullptr;
  int device = 0;
  KILN_CUDA_CHECK(cudaGetDevice(&device));
  // The dims are part of the packing: a folded Reshape shares its source's buffer, and a repacking
  // (channels last, taps major) of [16,8,3,3] differs from one of the same bytes as [8,16,3,3].
  const CopyKey key{reinterpret_cast<uintptr_t>(source.data()), source.bytes(), static_cast<int>(source.type()),
                    contentHash(source.data(), source.bytes()), packing + "|" + toString(source.dims()), device};
  CopyRegistry& reg = registry();
  {
    std::lock_guard<std::mutex> lock(reg.mutex);
    auto it = reg.live.find(key);
    if (it != reg.live.end())
      if (auto copy = it->second.lock()) return copy;
  }
  // Repack and upload outside the lock: other layers' uploads proceed meanwhile.
  const HostTensor packed = pack ? pack(source) : source;
  auto copy = std::make_shared<DeviceCopy>();
  if (cudaError_t e = cudaMalloc(&copy->ptr, std::max<size_t>(packed.bytes(), 256)); e != cudaSuccess) {
    cudaGetLastError();  // out of memory must not stay the "last error" a later launch check reports
    KILN_CUDA_CHECK(e);
  }
  KILN_CUDA_CHECK(cudaMemcpy(copy->ptr, packed.data(), packed.bytes(), cudaMemcpyHostToDevice));  // ~DeviceCopy frees on failure
  copy->source = source;
  std::lock_guard<std::mutex> lock(reg.mutex);
  std::weak_ptr<const DeviceCopy>& slot = reg.live[key];
  if (auto other = slot.lock()) return other;  // another thread uploaded the same constant meanwhile: use theirs
  slot = copy;
  if (++reg.inserts % 256 == 0)  // now and then, drop the entries of freed copies
    for (auto e = reg.live.begin(); e != reg.live.end();) e = e->second.expired() ? reg.live.erase(e) : std::next(e);
  return copy;
}

}  // namespace kiln::cuda
