// The parts of kiln's Python module (python/kiln_module.cpp defines the module).
#pragma once
#include <pybind11/pybind11.h>

namespace kiln::python {

void bindBuilder(pybind11::module_& m);  // OptimizationProfile, BuilderConfig, build_engine
void bindEngine(pybind11::module_& m);   // Engine, ExecutionContext

}  // namespace kiln::python
