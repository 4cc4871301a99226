// The IR's view of one layer and of the buffers it runs on: what shape inference, reference
// kernels and backends' tactics all read. Below the ops and the backends (the floor plan in
// docs/internals.md), so that op semantics need not include the backend contract.
#pragma once
#include <string>
#include <vector>

#include "kiln/network.h"
#include "kiln/types.h"

namespace kiln {

class ThreadPool;

//! A tensor as a layer sees it: type, dims (-1 allowed at build time) and, when known on the
//! host, its value (weights, constants, shape values).
struct TensorDesc {
  DataType type = DataType::kFLOAT;
  Dims dims;
  HostTensor value;  //!< valid() when the value is known on the host
};

//! A layer as shape inference, reference kernels and tactics see it.
struct LayerDesc {
  std::string name;
  std::string op;
  std::string domain;
  const Attributes* attrs = nullptr;  //!< never null in a valid desc
  std::vector<TensorDesc> inputs;     //!< an omitted optional input has type kFLOAT and no dims
  std::vector<bool> inputPresent;     //!< false for omitted optional inputs
  std::vector<TensorDesc> outputs;
  bool present(size_t i) const { return i < inputPresent.size() && inputPresent[i]; }
};

//! A concrete buffer handed to a kernel.
struct TensorView {
  void* data = nullptr;
  DataType type = DataType::kFLOAT;
  Dims dims;
  int64_t count = 0;
  template <typename T> T* as() const { return static_cast<T*>(data); }
};

//! The buffers one kernel call runs on.
struct KernelIO {
  std::vector<TensorView> in;   //!< data == nullptr for omitted optional inputs
  std::vector<TensorView> out;
  void* workspace = nullptr;
  size_t workspaceSize = 0;
  ThreadPool* pool = nullptr;  //!< CPU: worker threads (never null on the CPU backend)
  void* stream = nullptr;      //!< GPU: cudaStream_t
};

}  // namespace kiln
