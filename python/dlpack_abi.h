// The DLPack exchange structures (https://dmlc.github.io/dlpack/latest/c_api.html), declared
// from the specification: their layout is a fixed C ABI shared by every producer (PyTorch, CuPy,
// JAX, NumPy), so a consumer needs exactly these fields in exactly this order.
#pragma once
#include <cstdint>

namespace kiln::dlpack {

enum DeviceKind : int32_t { kCPU = 1, kCUDA = 2, kCUDAHost = 3, kCUDAManaged = 13 };
enum TypeCode : uint8_t { kInt = 0, kUInt = 1, kFloat = 2, kBfloat = 4, kBool = 6 };

struct Device {
  int32_t kind;  // DeviceKind
  int32_t id;
};
struct DataType {
  uint8_t code;  // TypeCode
  uint8_t bits;
  uint16_t lanes;
};
struct Tensor {
  void* data;
  Device device;
  int32_t ndim;
  DataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: compact row-major
  uint64_t byte_offset;
};
//! Inside a capsule named "dltensor" (the legacy protocol).
struct ManagedTensor {
  Tensor tensor;
  void* manager_ctx;
  void (*deleter)(ManagedTensor*);
};
//! Inside a capsule named "dltensor_versioned" (DLPack 1.x, `__dlpack__(max_version=(1, 0))`).
struct ManagedTensorVersioned {
  uint32_t major, minor;
  void* manager_ctx;
  void (*deleter)(ManagedTensorVersioned*);
  uint64_t flags;  // kReadOnly, ...
  Tensor tensor;
};
constexpr uint64_t kReadOnly = 1;

}  // namespace kiln::dlpack
