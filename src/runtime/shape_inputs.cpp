// isShapeInferenceInput (include/kiln/shape_inputs.h).
#include "kiln/shape_inputs.h"

#include <algorithm>

#include "runtime/engine_impl.h"

namespace kiln {

bool isShapeInferenceInput(const Engine& engine, const std::string& name) {
  const EngineImpl& e = *engine.impl;
  auto it = e.ioByName.find(name);
  if (it == e.ioByName.end() || engine.getTensorIOMode(name) != TensorIOMode::kINPUT)
    throw Error("'" + name + "' is not an input of the engine");
  const std::vector<int> values = hostValueInputs(e.graph);
  return std::find(values.begin(), values.end(), it->second) != values.end();
}

}  // namespace kiln
