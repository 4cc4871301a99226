#include "io_memory.h"

#include <dlfcn.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace kiln::conformance {
namespace {

// Writes poison number `which` (0: the usual, 1: the alternative) into element i.
void poisonElement(HostTensor& t, int64_t i, int which) {
  switch (t.type()) {
    case DataType::kFLOAT: t.as<float>()[i] = which ? -7777.f : std::numeric_limits<float>::quiet_NaN(); return;
    case DataType::kDOUBLE: t.as<double>()[i] = which ? -7777.0 : std::numeric_limits<double>::quiet_NaN(); return;
    case DataType::kHALF: t.as<uint16_t>()[i] = which ? floatToHalf(-7777.f) : 0x7E00; return;
    case DataType::kBF16: t.as<uint16_t>()[i] = which ? floatToBf16(-7777.f) : 0x7FC0; return;
    default: {
      const size_t n = elementSize(t.type());
      std::memset(static_cast<char*>(t.data()) + i * n, which ? 0x5A : 0xA5, n);
    }
  }
}

bool sameElement(const HostTensor& a, const HostTensor& b, int64_t i) {
  if (isFloat(a.type())) return std::isnan(a.getDouble(i)) ? std::isnan(b.getDouble(i)) : a.getDouble(i) == b.getDouble(i);
  const size_t n = elementSize(a.type());
  return std::memcmp(static_cast<const char*>(a.data()) + i * n, static_cast<const char*>(b.data()) + i * n, n) == 0;
}

class HostMemory : public IoMemory {
 public:
  void* upload(const HostTensor& t) override {
    void* p = allocate(t.bytes());
    if (t.bytes()) std::memcpy(p, t.data(), t.bytes());
    return p;
  }
  void* allocate(size_t bytes) override {
    // 64-byte aligned like kiln's own buffers; at least one block so the address is never null.
    blocks_.push_back(HostTensor(DataType::kUINT8, {static_cast<int64_t>(std::max<size_t>(bytes, 64))}));
    return blocks_.back().data();
  }
  void download(const void* src, HostTensor& dst) override {
    if (dst.bytes()) std::memcpy(dst.data(), src, dst.bytes());
  }
  void synchronize() override {}

 private:
  std::vector<HostTensor> blocks_;
};

// The few CUDA runtime entry points the runner needs, resolved with dlsym.
class CudaMemory : public IoMemory {
 public:
  CudaMemory() {
    for (const char* lib : {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}) {
      handle_ = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
      if (handle_) break;
    }
    if (!handle_) throw Error("--device gpu: cannot load the CUDA runtime (libcudart.so)");
    malloc_ = reinterpret_cast<MallocFn>(symbol("cudaMalloc"));
    free_ = reinterpret_cast<FreeFn>(symbol("cudaFree"));
    memcpy_ = reinterpret_cast<MemcpyFn>(symbol("cudaMemcpy"));
    sync_ = reinterpret_cast<SyncFn>(symbol("cudaDeviceSynchronize"));
  }
  ~CudaMemory() override {
    for (void* p : blocks_) free_(p);
  }
  void* upload(const HostTensor& t) override {
    void* p = allocate(t.bytes());
    if (t.bytes()) check(memcpy_(p, t.data(), t.bytes(), kHostToDevice), "cudaMemcpy to the device");
    return p;
  }
  void* allocate(size_t bytes) override {
    void* p = nullptr;
    check(malloc_(&p, std::max<size_t>(bytes, 256)), "cudaMalloc");
    blocks_.push_back(p);
    return p;
  }
  void download(const void* src, HostTensor& dst) override {
    if (dst.bytes()) check(memcpy_(dst.data(), src, dst.bytes(), kDeviceToHost), "cudaMemcpy to the host");
  }
  void synchronize() override { check(sync_(), "cudaDeviceSynchronize"); }

 private:
  using MallocFn = int (*)(void**, size_t);
  using FreeFn = int (*)(void*);
  using MemcpyFn = int (*)(void*, const void*, size_t, int);
  using SyncFn = int (*)();
  static constexpr int kHostToDevice = 1, kDeviceToHost = 2;  // cudaMemcpyKind values

  void* symbol(const char* name) {
    void* s = dlsym(handle_, name);
    if (!s) throw Error(std::string("CUDA runtime lacks ") + name);
    return s;
  }
  static void check(int status, const char* what) {
    if (status != 0) throw Error(std::string(what) + " failed with CUDA error " + std::to_string(status));
  }

  void* handle_ = nullptr;
  MallocFn malloc_ = nullptr;
  FreeFn free_ = nullptr;
  MemcpyFn memcpy_ = nullptr;
  SyncFn sync_ = nullptr;
  std::vector<void*> blocks_;
};

}  // namespace

HostTensor poisonedOutput(DataType type, const Dims& dims, const HostTensor* expected) {
  HostTensor t(type, dims);
  const bool avoid = expected && expected->valid() && expected->type() == type && expected->count() == t.count();
  for (int64_t i = 0; i < t.count(); ++i) {
    poisonElement(t, i, 0);
    if (avoid && sameElement(t, *expected, i)) poisonElement(t, i, 1);
  }
  return t;
}

std::unique_ptr<IoMemory> IoMemory::create(DeviceType device) {
  if (device == DeviceType::kGPU) return std::make_unique<CudaMemory>();
  return std::make_unique<HostMemory>();
}

}  // namespace kiln::conformance
