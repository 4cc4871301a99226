// Plugin layers inside kiln: a layer of op "Plugin" whose attributes hold the plugin's key
// (reserved "kiln.plugin.*" names) and its fields. The plugin object is recreated from the
// registry wherever kiln needs it (shape inference, tactics, plan loading).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "kiln/plugin.h"

namespace kiln {

constexpr const char* kPluginOp = "Plugin";
constexpr const char* kPluginNameAttr = "kiln.plugin.name";
constexpr const char* kPluginVersionAttr = "kiln.plugin.version";
constexpr const char* kPluginNamespaceAttr = "kiln.plugin.namespace";
constexpr const char* kPluginLibraryAttr = "kiln.plugin.library";

//! The attributes of a plugin layer: the fields (checked against the creator's specs and tried
//! by creating the plugin once) plus the reserved key attributes. `nbOutputs` receives the
//! plugin's output count. Throws kiln::Error naming `layerName`.
Attributes makePluginLayerAttrs(const std::string& layerName, const IPluginCreator& creator, const Attributes& fields,
                                int* nbOutputs);
//! The plugin's fields: a plugin layer's attributes without the reserved ones.
Attributes pluginFields(const Attributes& layerAttrs);
//! "'namespace::name' version 'v'" for messages.
std::string pluginKeyString(const std::string& name, const std::string& version, const std::string& ns);
//! Creates the plugin of a plugin layer from the registry; throws kiln::Error naming the layer,
//! the plugin and its library when the creator is not registered.
std::unique_ptr<IPlugin> createLayerPlugin(const std::string& layerName, const Attributes& layerAttrs);
//! The tactics a backend offers for a plugin layer on `device` (empty: the plugin does not run
//! there with these types).
std::vector<Tactic> pluginTactics(const LayerDesc& layer, DeviceType device);
//! Throws one kiln::Error listing every plugin that the layers need and the registry lacks.
void checkPluginsRegistered(const std::vector<std::pair<std::string, const Attributes*>>& pluginLayers);
//! The library that registered a creator ("" when built in or unknown).
std::string pluginLibraryOf(const std::string& name, const std::string& version, const std::string& ns);

}  // namespace kiln
