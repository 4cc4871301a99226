// kiln plugin API: user-implemented layers for ops kiln does not support (or overrides).
//
// A plugin is one object implementing three interfaces, one per phase, each versioned:
//   IPluginCore    - identity (name, version, namespace) and the fields that recreate it;
//   IPluginBuild   - what the builder asks: outputs, their shapes and types, supported types per
//                    device, workspace size, and optional tactics that the builder times;
//   IPluginRuntime - what the engine calls: tactic choice, shape-change hook, enqueue, clone.
// Plugins are made by creators (IPluginCreator) registered in the process-wide registry
// (getPluginRegistry()), keyed by (name, version, namespace).
//
// Fields are kiln::Attributes: the ONNX attributes of the node the plugin replaces (ints, floats,
// strings, tensors and lists of them), minus `plugin_version`. Creators declare the fields they
// take (PluginFieldSpec); kiln checks names and types before calling create().
//
// Thread-safety contract:
//   - the registry is thread-safe;
//   - IPluginCreator::create may be called from several threads at once (make it reentrant);
//   - a plugin object is used by one thread at a time: the builder uses one instance, and every
//     execution context calls clone() once and then uses only its clone (onShapeChange and
//     enqueue). Clones must not share mutable state unless they synchronize it themselves.
//
// Plugin libraries: a shared library exports the two C functions of KILN_PLUGIN_LIBRARY
// (see the end of this file); `kiln --plugins=libfoo.so` or loadPluginLibrary() loads it. The
// library must be built with the same C++ compiler ABI as kiln (the interface passes std::
// types), and links to libkiln.so.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/builder.h"
#include "kiln/network.h"
#include "kiln/types.h"

namespace kiln {

//! Version of the plugin library ABI (the C entry points and these interfaces as a whole).
//! A library built against another major version is refused when loaded.
constexpr int32_t kPluginApiVersion = 1;
//! Versions of each phase's interface. A plugin reports the version it implements; kiln refuses
//! versions it does not know (newer ones).
constexpr int32_t kPluginCoreVersion = 1;
constexpr int32_t kPluginBuildVersion = 1;
constexpr int32_t kPluginRuntimeVersion = 1;

//! The type of a plugin field (the alternatives of kiln::AttrValue, in order).
enum class PluginFieldType : int { kINT = 0, kFLOAT = 1, kSTRING = 2, kINTS = 3, kFLOATS = 4, kSTRINGS = 5, kTENSOR = 6 };
const char* toString(PluginFieldType t);

//! A field a creator accepts.
struct PluginFieldSpec {
  std::string name;
  PluginFieldType type = PluginFieldType::kFLOAT;
  bool required = false;
};

//! A tensor as the builder describes it to a plugin: dims may hold -1 (dynamic) at build time.
struct PluginTensorDesc {
  DataType type = DataType::kFLOAT;
  Dims dims;
};

//! A concrete tensor at run time: `data` is device memory on the GPU, host memory on the CPU.
//! Layout is always linear (row-major).
struct PluginTensor {
  void* data = nullptr;
  DataType type = DataType::kFLOAT;
  Dims dims;
};

class IPlugin;

class IPluginCore {
 public:
  virtual ~IPluginCore() = default;
  virtual int32_t coreVersion() const { return kPluginCoreVersion; }
  virtual std::string name() const = 0;
  virtual std::string version() const = 0;       //!< e.g. "1"
  virtual std::string pluginNamespace() const = 0;  //!< e.g. "com.example"; "" for none
  //! The fields that recreate this plugin through its creator (serialized into the plan).
  virtual Attributes fields() const = 0;
};

class IPluginBuild {
 public:
  virtual ~IPluginBuild() = default;
  virtual int32_t buildVersion() const { return kPluginBuildVersion; }
  virtual int32_t nbOutputs() const = 0;
  //! Output types from input types. Default: every output has input 0's type.
  virtual std::vector<DataType> outputTypes(const std::vector<DataType>& inputTypes) const {
    return std::vector<DataType>(static_cast<size_t>(nbOutputs()), inputTypes.empty() ? DataType::kFLOAT : inputTypes[0]);
  }
  //! Output dims as a function of the input dims. At build time an input dim may be -1
  //! (dynamic): return -1 for output dims that depend on it. At run time every input dim is
  //! concrete and so must every returned dim be. Throw kiln::Error for inputs it cannot take.
  virtual std::vector<Dims> outputDims(const std::vector<PluginTensorDesc>& inputs) const = 0;
  //! Whether the plugin runs on `device` with these input and output types.
  //! Default: float32 only, CPU only.
  virtual bool supports(DeviceType device, const std::vector<DataType>& inputTypes,
                        const std::vector<DataType>& outputTypes) const {
    if (device != DeviceType::kCPU) return false;
    for (DataType t : inputTypes) if (t != DataType::kFLOAT) return false;
    for (DataType t : outputTypes) if (t != DataType::kFLOAT) return false;
    return true;
  }
  //! Scratch bytes enqueue needs for these concrete shapes (device memory on the GPU).
  virtual size_t workspaceSize(const std::vector<PluginTensorDesc>& inputs,
                               const std::vector<PluginTensorDesc>& outputs) const {
    (void)inputs; (void)outputs; return 0;
  }
  //! Implementation choices on `device`. With more than one, the builder times each (at every
  //! optimization profile's opt shapes) and keeps the fastest per profile; the choices are stored
  //! in the plan.
  virtual std::vector<std::string> tactics(DeviceType device) const { (void)device; return {"default"}; }
};

class IPluginRuntime {
 public:
  virtual ~IPluginRuntime() = default;
  virtual int32_t runtimeVersion() const { return kPluginRuntimeVersion; }
  //! Selects one of tactics(device) before any enqueue (called on the builder's instance and on
  //! the instance recreated from a plan). Return false when the name is unknown.
  virtual bool setTactic(const std::string& tactic) { return tactic == "default"; }
  //! Called (outside enqueue) when the concrete shapes of the layer change. Non-zero: error.
  virtual int32_t onShapeChange(const std::vector<PluginTensorDesc>& inputs,
                                const std::vector<PluginTensorDesc>& outputs) {
    (void)inputs; (void)outputs; return 0;
  }
  //! Runs the layer. On the GPU, `stream` is the cudaStream_t to launch on (do not synchronize;
  //! do not allocate); on the CPU it is null and the call is synchronous. `workspace` holds
  //! workspaceSize() bytes. Non-zero: error (the engine reports it and the call fails).
  virtual int32_t enqueue(DeviceType device, const std::vector<PluginTensor>& inputs,
                          const std::vector<PluginTensor>& outputs, void* workspace, void* stream) = 0;
  //! A copy for one execution context (same fields and tactic).
  virtual std::unique_ptr<IPlugin> clone() const = 0;
};

//! A plugin: all three phases in one object.
class IPlugin : public IPluginCore, public IPluginBuild, public IPluginRuntime {};

//! Makes plugins of one (name, version, namespace).
class IPluginCreator {
 public:
  virtual ~IPluginCreator() = default;
  virtual int32_t apiVersion() const { return kPluginApiVersion; }
  virtual std::string name() const = 0;
  virtual std::string version() const = 0;
  virtual std::string pluginNamespace() const = 0;
  //! The fields create() accepts. kiln refuses unknown fields, missing required fields and
  //! fields of the wrong type before calling create().
  virtual std::vector<PluginFieldSpec> fieldSpecs() const = 0;
  //! Creates a plugin for the layer `layerName`. Throw kiln::Error for bad field values.
  virtual std::unique_ptr<IPlugin> create(const std::string& layerName, const Attributes& fields) const = 0;
};

//! One registered creator as listed by the registry.
struct PluginInfo {
  std::string name, version, pluginNamespace;
  std::string library;  //!< file name of the library that registered it ("" when built in)
};

//! The process-wide registry of creators (thread-safe).
class IPluginRegistry {
 public:
  virtual ~IPluginRegistry() = default;
  //! Registers a creator under its (name, version, namespace). Throws kiln::Error when that key
  //! is taken, unless `allowOverride` (then the new creator replaces the old one).
  virtual void registerCreator(std::shared_ptr<IPluginCreator> creator, bool allowOverride = false) = 0;
  //! Removes a creator; false when none had that key.
  virtual bool deregisterCreator(const std::string& name, const std::string& version, const std::string& ns) = 0;
  //! The creator for a key, or null.
  virtual std::shared_ptr<IPluginCreator> findCreator(const std::string& name, const std::string& version,
                                                      const std::string& ns) const = 0;
  //! Every registered creator, sorted by namespace, name, version.
  virtual std::vector<PluginInfo> list() const = 0;
};

IPluginRegistry& getPluginRegistry();

//! Loads a plugin library and registers its creators. Throws kiln::Error when the file is
//! missing or not a shared library, lacks the entry points, was built for another plugin API
//! version, or its registration fails. Loading the same file twice is a no-op.
void loadPluginLibrary(const std::string& path);

//! Adds a plugin layer to a hand-built network: the creator registered for (name, version, ns)
//! makes the plugin from `fields` (checked against its specs).
Layer* addPluginLayer(Network& net, const std::vector<Tensor*>& inputs, const std::string& name,
                      const std::string& version, const std::string& ns, const Attributes& fields,
                      const std::string& layerName = "");

}  // namespace kiln

//! The C entry points of a plugin library. Use once per library:
//!   KILN_PLUGIN_LIBRARY(registerMyPlugins)
//! where `void registerMyPlugins(kiln::IPluginRegistry&)` registers the library's creators.
#define KILN_PLUGIN_LIBRARY(registerFn)                                                         \
  extern "C" __attribute__((visibility("default"))) int32_t kilnPluginApiVersion() {           \
    return kiln::kPluginApiVersion;                                                             \
  }                                                                                             \
  extern "C" __attribute__((visibility("default"))) void kilnRegisterPlugins(void* registry) { \
    registerFn(*static_cast<kiln::IPluginRegistry*>(registry));                                 \
  }
