// Plugin layers: the "Plugin" op definition (shape/type inference through the plugin), the
// kernel that runs a plugin's enqueue (one clone per execution context), and the helpers the
// importer, the network API and the engine loader use.
#include "plugin/plugin_layer.h"

#include <mutex>
#include <sstream>

#include "ops/op_registry.h"
#include "ops/shape_propagation.h"

namespace kiln {

namespace {

constexpr int64_t kMaxPluginDim = int64_t(1) << 40;

bool isReserved(const std::string& name) { return name.rfind("kiln.plugin.", 0) == 0; }

std::string layerKey(const Attributes& a) {
  return pluginKeyString(a.getString(kPluginNameAttr, "?"), a.getString(kPluginVersionAttr, "?"),
                         a.getString(kPluginNamespaceAttr, ""));
}

void checkFields(const std::string& layerName, const IPluginCreator& c, const Attributes& fields) {
  std::vector<PluginFieldSpec> specs = c.fieldSpecs();
  std::string who = "layer '" + layerName + "' (plugin " +
                    (c.pluginNamespace().empty() ? c.name() : c.pluginNamespace() + "::" + c.name()) + ")";
  for (const auto& [name, value] : fields.all()) {
    if (isReserved(name)) throw Error(who + ": field name '" + name + "' is reserved by kiln");
    const PluginFieldSpec* spec = nullptr;
    for (const auto& s : specs)
      if (s.name == name) spec = &s;
    if (!spec) {
      std::string accepted;
      for (const auto& s : specs) accepted += (accepted.empty() ? "" : ", ") + s.name + " (" + toString(s.type) + ")";
      throw Error(who + ": unknown field '" + name + "'; the plugin accepts: " + (accepted.empty() ? "no fields" : accepted));
    }
    auto got = static_cast<PluginFieldType>(value.index());
    if (got != spec->type)
      throw Error(who + ": field '" + name + "' must be " + toString(spec->type) + " but is " + toString(got));
  }
  for (const auto& s : specs)
    if (s.required && !fields.has(s.name))
      throw Error(who + ": required field '" + s.name + "' (" + toString(s.type) + ") is missing");
}

void checkInterfaceVersions(const std::string& layerName, const IPlugin& p) {
  auto bad = [&](const char* part, int32_t got, int32_t known) {
    throw Error("layer '" + layerName + "': plugin '" + p.name() + "' implements " + part + " interface version " +
                std::to_string(got) + "; this kiln knows up to version " + std::to_string(known));
  };
  if (p.coreVersion() < 1 || p.coreVersion() > kPluginCoreVersion) bad("core", p.coreVersion(), kPluginCoreVersion);
  if (p.buildVersion() < 1 || p.buildVersion() > kPluginBuildVersion) bad("build", p.buildVersion(), kPluginBuildVersion);
  if (p.runtimeVersion() < 1 || p.runtimeVersion() > kPluginRuntimeVersion)
    bad("runtime", p.runtimeVersion(), kPluginRuntimeVersion);
}

std::unique_ptr<IPlugin> createChecked(const std::string& layerName, const IPluginCreator& c, const Attributes& fields) {
  checkFields(layerName, c, fields);
  std::unique_ptr<IPlugin> p;
  try {
    p = c.create(layerName, fields);
  } catch (const std::exception& e) {
    throw Error("layer '" + layerName + "': plugin '" + c.name() + "' could not be created: " + e.what());
  }
  if (!p) throw Error("layer '" + layerName + "': plugin creator '" + c.name() + "' returned no plugin");
  checkInterfaceVersions(layerName, *p);
  return p;
}

std::vector<PluginTensorDesc> descsOf(const std::vector<TensorDesc>& ts) {
  std::vector<PluginTensorDesc> v;
  v.reserve(ts.size());
  for (auto& t : ts) v.push_back(PluginTensorDesc{t.type, t.dims});
  return v;
}

std::vector<DataType> typesOf(const std::vector<TensorDesc>& ts) {
  std::vector<DataType> v;
  for (auto& t : ts) v.push_back(t.type);
  return v;
}

void inferPlugin(LayerDesc& l) {
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (!l.present(i)) throw Error("plugin layers take no omitted inputs (input " + std::to_string(i) + ")");
  auto p = createLayerPlugin(l.name, *l.attrs);
  const std::string who = "plugin " + layerKey(*l.attrs);
  if (p->nbOutputs() != static_cast<int32_t>(l.outputs.size()))
    throw Error(who + " reports " + std::to_string(p->nbOutputs()) + " outputs but the layer has " +
                std::to_string(l.outputs.size()));
  std::vector<DataType> outTypes = p->outputTypes(typesOf(l.inputs));
  std::vector<Dims> outDims;
  try {
    outDims = p->outputDims(descsOf(l.inputs));
  } catch (const std::exception& e) {
    throw Error(who + ": output shapes: " + e.what());
  }
  if (outTypes.size() != l.outputs.size() || outDims.size() != l.outputs.size())
    throw Error(who + " returned " + std::to_string(outTypes.size()) + " output types and " +
                std::to_string(outDims.size()) + " output shapes for " + std::to_string(l.outputs.size()) + " outputs");
  bool inputsStatic = true;
  for (auto& in : l.inputs) inputsStatic = inputsStatic && isStatic(in.dims);
  for (size_t k = 0; k < outDims.size(); ++k) {
    if (static_cast<int>(outTypes[k]) >= kNumDataTypes)
      throw Error(who + " returned an invalid type for output " + std::to_string(k));
    Dims probe;
    for (int64_t d : outDims[k]) {
      if (d < -1 || d > kMaxPluginDim)
        throw Error(who + " returned an impossible shape " + toString(outDims[k]) + " for output " + std::to_string(k));
      if (d == -1 && inputsStatic)
        throw Error(who + " returned a dynamic dimension in " + toString(outDims[k]) + " for output " + std::to_string(k) +
                    " although every input shape is known");
      probe.push_back(d < 0 ? 1 : d);
    }
    try {
      volume(probe);
    } catch (const Error&) {
      throw Error(who + " returned shape " + toString(outDims[k]) + " whose element count overflows");
    }
    l.outputs[k].type = outTypes[k];
    l.outputs[k].dims = outDims[k];
  }
}

// Per-context state: the context's clone and the argument vectors enqueue reuses (no allocation
// per call).
struct PluginState : KernelState {
  std::unique_ptr<IPlugin> plugin;
  std::vector<PluginTensor> in, out;
};

class PluginKernel : public Kernel {
 public:
  PluginKernel(const LayerDesc& d, const std::string& tactic, DeviceType device)
      : name_(d.name), key_(layerKey(*d.attrs)), device_(device), proto_(createLayerPlugin(d.name, *d.attrs)) {
    if (!proto_->setTactic(tactic))
      throw Error("layer '" + name_ + "': plugin " + key_ + " does not know its tactic '" + tactic + "'");
  }
  size_t reshape(const LayerDesc& c, std::unique_ptr<KernelState>& state) const override {
    auto* st = dynamic_cast<PluginState*>(state.get());
    if (!st) {
      auto fresh = std::make_unique<PluginState>();
      {
        std::lock_guard<std::mutex> lock(mu_);
        fresh->plugin = proto_->clone();
      }
      if (!fresh->plugin) throw Error("layer '" + name_ + "': plugin " + key_ + " clone() returned null");
      st = fresh.get();
      state = std::move(fresh);
    }
    auto in = descsOf(c.inputs), out = descsOf(c.outputs);
    int32_t rc;
    try {
      rc = st->plugin->onShapeChange(in, out);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error("layer '" + name_ + "': plugin " + key_ + " onShapeChange threw: " + e.what());
    }
    if (rc != 0)
      throw Error("layer '" + name_ + "': plugin " + key_ + " refused shapes (onShapeChange returned " + std::to_string(rc) + ")");
    st->in.assign(c.inputs.size(), PluginTensor{});
    st->out.assign(c.outputs.size(), PluginTensor{});
    for (size_t i = 0; i < in.size(); ++i) st->in[i] = PluginTensor{nullptr, in[i].type, in[i].dims};
    for (size_t i = 0; i < out.size(); ++i) st->out[i] = PluginTensor{nullptr, out[i].type, out[i].dims};
    return st->plugin->workspaceSize(in, out);
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    auto* st = static_cast<PluginState*>(state);
    for (size_t i = 0; i < st->in.size(); ++i) st->in[i].data = io.in[i].data;
    for (size_t i = 0; i < st->out.size(); ++i) st->out[i].data = io.out[i].data;
    int32_t rc;
    try {
      rc = st->plugin->enqueue(device_, st->in, st->out, io.workspace, io.stream);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {  // a plugin's own exception: named, as kiln::Error
      throw Error("layer '" + name_ + "': plugin " + key_ + " enqueue threw: " + e.what());
    }
    if (rc != 0)
      throw Error("layer '" + name_ + "': plugin " + key_ + " enqueue failed with status " + std::to_string(rc));
  }

 private:
  std::string name_, key_;
  DeviceType device_;
  mutable std::mutex mu_;  // clone() of the prototype from contexts created concurrently
  std::unique_ptr<IPlugin> proto_;
};

}  // namespace

void registerPluginOps(OpRegistry& r) {
  OpDef d;
  d.name = kPluginOp;
  d.infer = inferPlugin;
  d.foldable = false;  // a plugin may have side effects and has no host reference kernel
  d.onnx = false;      // imported through the plugin registry, not by op name
  r.add(d);
}

Attributes pluginFields(const Attributes& layerAttrs) {
  Attributes f;
  for (const auto& [k, v] : layerAttrs.all())
    if (!isReserved(k)) f.set(k, v);
  return f;
}

std::string pluginKeyString(const std::string& name, const std::string& version, const std::string& ns) {
  return "'" + (ns.empty() ? name : ns + "::" + name) + "' version '" + version + "'";
}

Attributes makePluginLayerAttrs(const std::string& layerName, const IPluginCreator& creator, const Attributes& fields,
                                int* nbOutputs) {
  auto p = createChecked(layerName, creator, fields);
  if (nbOutputs) *nbOutputs = p->nbOutputs();
  if (p->nbOutputs() < 0 || p->nbOutputs() > 1024)
    throw Error("layer '" + layerName + "': plugin '" + creator.name() + "' reports " + std::to_string(p->nbOutputs()) + " outputs");
  // What the plan stores is what the plugin says recreates it (IPluginCore::fields), checked now
  // against the creator's specs so that a plugin that reports a bad field fails at build time.
  Attributes a = p->fields();
  try {
    checkFields(layerName, creator, a);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (in the fields the plugin reports for serialization)");
  }
  a.set(kPluginNameAttr, creator.name());
  a.set(kPluginVersionAttr, creator.version());
  a.set(kPluginNamespaceAttr, creator.pluginNamespace());
  std::string lib = pluginLibraryOf(creator.name(), creator.version(), creator.pluginNamespace());
  if (!lib.empty()) a.set(kPluginLibraryAttr, lib);
  return a;
}

std::unique_ptr<IPlugin> createLayerPlugin(const std::string& layerName, const Attributes& a) {
  std::string name = a.getString(kPluginNameAttr, ""), version = a.getString(kPluginVersionAttr, ""),
              ns = a.getString(kPluginNamespaceAttr, "");
  auto creator = getPluginRegistry().findCreator(name, version, ns);
  if (!creator) {
    std::string lib = a.getString(kPluginLibraryAttr, "");
    throw Error("layer '" + layerName + "' needs plugin " + layerKey(a) + ", which is not registered" +
                (lib.empty() ? "" : "; it came from library '" + lib + "': load it with --plugins=<path to " + lib + ">"));
  }
  return createChecked(layerName, *creator, pluginFields(a));
}

std::vector<Tactic> pluginTactics(const LayerDesc& layer, DeviceType device) {
  auto p = createLayerPlugin(layer.name, *layer.attrs);
  if (!p->supports(device, typesOf(layer.inputs), typesOf(layer.outputs))) return {};
  std::vector<Tactic> out;
  for (const std::string& t : p->tactics(device)) {
    out.push_back(Tactic{"plugin:" + t, [t, device](const LayerDesc& d) -> std::unique_ptr<Kernel> {
                           return std::make_unique<PluginKernel>(d, t, device);
                         }});
  }
  return out;
}

void checkPluginsRegistered(const std::vector<std::pair<std::string, const Attributes*>>& layers) {
  std::ostringstream missing;
  int n = 0;
  for (auto& [layerName, a] : layers) {
    if (getPluginRegistry().findCreator(a->getString(kPluginNameAttr, ""), a->getString(kPluginVersionAttr, ""),
                                        a->getString(kPluginNamespaceAttr, "")))
      continue;
    ++n;
    std::string lib = a->getString(kPluginLibraryAttr, "");
    missing << "  plugin " << layerKey(*a) << " (layer '" << layerName << "'"
            << (lib.empty() ? "" : ", library '" + lib + "'") << ")\n";
  }
  if (n)
    throw Error("the engine needs " + std::to_string(n) + " plugin(s) that are not registered:\n" + missing.str() +
                "Load their libraries first (kiln --plugins=<library>, or kiln::loadPluginLibrary).");
}

Layer* addPluginLayer(Network& net, const std::vector<Tensor*>& inputs, const std::string& name, const std::string& version,
                      const std::string& ns, const Attributes& fields, const std::string& layerName) {
  auto creator = getPluginRegistry().findCreator(name, version, ns);
  if (!creator)
    throw Error("addPluginLayer: no plugin creator is registered for " + pluginKeyString(name, version, ns));
  for (Tensor* t : inputs)
    if (!t) throw Error("addPluginLayer: plugin layers take no null inputs");
  std::string lname = layerName.empty() ? net.uniqueName(name) : layerName;
  int nbOut = 0;
  Attributes attrs = makePluginLayerAttrs(lname, *creator, fields, &nbOut);
  Layer* l = net.addLayer(kPluginOp, inputs, nbOut, std::move(attrs), lname);
  return l;
}

}  // namespace kiln
