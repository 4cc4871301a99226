// setLayerPrecisions (include/kiln/layer_precisions.h).
#include "kiln/layer_precisions.h"

namespace kiln {

void setLayerPrecisions(Network& network, const std::map<std::string, DataType>& precisions) {
  if (auto all = precisions.find("*"); all != precisions.end())
    for (auto& l : network.layers()) l->precision = all->second;
  for (const auto& [name, type] : precisions) {
    if (name == "*") continue;
    Layer* found = nullptr;
    for (auto& l : network.layers())
      if (l->name == name) found = l.get();
    if (!found) {
      std::string some;
      for (int i = 0; i < network.nbLayers() && i < 5; ++i)
        some += (i ? ", " : "") + std::string("'") + network.layer(i)->name + "'";
      throw Error("the model has no layer named '" + name + "' (layers are named after the ONNX nodes, e.g. " + some + ")");
    }
    found->precision = type;
  }
}

}  // namespace kiln
