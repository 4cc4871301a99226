// Any Python array as a pointer, a kiln type and a shape, without copying: NumPy arrays, DLPack
// producers (`__dlpack__`: torch, JAX, CuPy, NumPy) and `__cuda_array_interface__` objects
// (CuPy, Numba, torch). Called with the GIL held.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/types.h"

namespace kiln::python {

namespace py = pybind11;

//! Where a tensor's memory is.
enum class Memory { kHost, kCuda };

//! A borrowed view of a Python array's memory; `owner` keeps that memory alive.
struct TensorArg {
  void* data = nullptr;
  DataType type = DataType::kFLOAT;
  Dims shape;
  std::vector<int64_t> strides;  //!< in elements; empty: C-contiguous
  Memory memory = Memory::kHost;
  int deviceId = -1;   //!< the CUDA device of kCuda memory (-1: not known, e.g. __cuda_array_interface__)
  bool readOnly = false;
  //! __cuda_array_interface__'s stream: the producer's pending work on it must finish before the
  //! data is used (0: none given; DLPack producers synchronize through `__dlpack__(stream=)` instead).
  uintptr_t producerStream = 0;
  py::object owner;  //!< the array, or the DLPack capsule (its destructor frees the producer's view)

  size_t bytes() const { return static_cast<size_t>(volume(shape)) * elementSize(type); }
  bool contiguous() const;
  //! "float32 [2, 3] on cuda:0", for error messages.
  std::string describe() const;
};

//! The CUDA stream that will use an imported tensor, as DLPack's `__dlpack__(stream=)` takes it
//! (1: the legacy default stream); kNoCudaConsumer when the consumer is the host.
constexpr int64_t kNoCudaConsumer = -1;

//! Views `obj` (`what` names it in errors, e.g. "input 'x'"); throws kiln::Error for an object
//! that is no array or has a type kiln does not have.
TensorArg importTensor(py::handle obj, const std::string& what, int64_t consumerStream);

//! A C-contiguous host copy of a strided host tensor (owned by a new NumPy array).
TensorArg contiguousHostCopy(const TensorArg& t);

//! The NumPy dtype of a kiln type (bfloat16: ml_dtypes' type); throws for types NumPy lacks.
py::dtype numpyDtype(DataType t);

}  // namespace kiln::python
