// The same three calls bound with pybind11 (kiln's tensor import, python/py_tensor.cpp) or with
// nanobind (its ndarray, which speaks DLPack itself): what the binding library costs per call of
// kiln's infer, apart from kiln. Built and timed by run.py.
#include <cstdint>
#include <string>

#ifdef USE_NANOBIND
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
namespace nb = nanobind;

NB_MODULE(overhead_nb, m) {
  m.def("noop", [] {});
  m.def("pointer", [](nb::ndarray<> a) { return reinterpret_cast<uintptr_t>(a.data()); });
  // {name: tensor} in and out, every tensor viewed as infer does
  m.def("bind", [](nb::dict inputs, nb::dict outputs) {
    uintptr_t sum = 0;
    nb::dict result;
    for (auto [k, v] : inputs) sum += reinterpret_cast<uintptr_t>(nb::cast<nb::ndarray<>>(v).data());
    for (auto [k, v] : outputs) {
      sum += reinterpret_cast<uintptr_t>(nb::cast<nb::ndarray<>>(v).data());
      result[k] = v;
    }
    return nb::make_tuple(result, sum);
  });
}
#else
#include <pybind11/pybind11.h>

#include "py_tensor.h"
namespace py = pybind11;
using kiln::python::importTensor;
using kiln::python::kNoCudaConsumer;

PYBIND11_MODULE(overhead_pb, m) {
  m.def("noop", [] {});
  m.def("pointer", [](py::handle a) { return reinterpret_cast<uintptr_t>(importTensor(a, "a", kNoCudaConsumer).data); });
  m.def("bind", [](py::dict inputs, py::dict outputs) {
    uintptr_t sum = 0;
    py::dict result;
    for (auto item : inputs) sum += reinterpret_cast<uintptr_t>(importTensor(item.second, "input", kNoCudaConsumer).data);
    for (auto item : outputs) {
      sum += reinterpret_cast<uintptr_t>(importTensor(item.second, "output", kNoCudaConsumer).data);
      result[item.first] = item.second;
    }
    return py::make_tuple(result, sum);
  });
}
#endif
