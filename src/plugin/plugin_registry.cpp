// The process-wide plugin registry and plugin-library loading (dlopen).
#include <dlfcn.h>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "kiln/plugin.h"
#include "plugin/plugin_layer.h"

namespace kiln {

const char* toString(PluginFieldType t) {
  switch (t) {
    case PluginFieldType::kINT: return "INT";
    case PluginFieldType::kFLOAT: return "FLOAT";
    case PluginFieldType::kSTRING: return "STRING";
    case PluginFieldType::kINTS: return "INTS";
    case PluginFieldType::kFLOATS: return "FLOATS";
    case PluginFieldType::kSTRINGS: return "STRINGS";
    case PluginFieldType::kTENSOR: return "TENSOR";
  }
  return "?";
}

namespace {

// The library whose entry point is running on this thread: creators it registers are tagged
// with its file name (recorded in plans so that a missing plugin names its library).
thread_local std::string tCurrentLibrary;

class PluginRegistry : public IPluginRegistry {
 public:
  void registerCreator(std::shared_ptr<IPluginCreator> creator, bool allowOverride) override {
    if (!creator) throw Error("registerCreator: null creator");
    if (creator->apiVersion() != kPluginApiVersion)
      throw Error("plugin creator " + pluginKeyString(creator->name(), creator->version(), creator->pluginNamespace()) +
                  " implements plugin API version " + std::to_string(creator->apiVersion()) + "; this kiln supports version " +
                  std::to_string(kPluginApiVersion));
    if (creator->name().empty()) throw Error("registerCreator: a plugin creator has an empty name");
    auto key = std::make_tuple(creator->pluginNamespace(), creator->name(), creator->version());
    std::lock_guard<std::mutex> lock(mu_);
    auto it = creators_.find(key);
    if (it != creators_.end() && !allowOverride)
      throw Error("plugin creator " + pluginKeyString(creator->name(), creator->version(), creator->pluginNamespace()) +
                  " is already registered" + (it->second.library.empty() ? "" : " (by library '" + it->second.library + "')") +
                  "; deregister it first or register with override");
    creators_[key] = Entry{std::move(creator), tCurrentLibrary};
  }
  bool deregisterCreator(const std::string& name, const std::string& version, const std::string& ns) override {
    std::lock_guard<std::mutex> lock(mu_);
    return creators_.erase(std::make_tuple(ns, name, version)) != 0;
  }
  std::shared_ptr<IPluginCreator> findCreator(const std::string& name, const std::string& version,
                                              const std::string& ns) const override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = creators_.find(std::make_tuple(ns, name, version));
    return it == creators_.end() ? nullptr : it->second.creator;
  }
  std::vector<PluginInfo> list() const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<PluginInfo> out;
    for (auto& [k, e] : creators_) out.push_back(PluginInfo{std::get<1>(k), std::get<2>(k), std::get<0>(k), e.library});
    return out;
  }
  std::string libraryOf(const std::string& name, const std::string& version, const std::string& ns) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = creators_.find(std::make_tuple(ns, name, version));
    return it == creators_.end() ? "" : it->second.library;
  }
  //! Removes every creator a library registered (its registration failed part-way).
  void dropLibrary(const std::string& library) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = creators_.begin(); it != creators_.end();)
      it = it->second.library == library ? creators_.erase(it) : std::next(it);
  }

 private:
  struct Entry {
    std::shared_ptr<IPluginCreator> creator;
    std::string library;
  };
  mutable std::mutex mu_;
  std::map<std::tuple<std::string, std::string, std::string>, Entry> creators_;
};

PluginRegistry& registry() {
  static PluginRegistry r;
  return r;
}

std::string baseName(const std::string& p) {
  size_t s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

}  // namespace

IPluginRegistry& getPluginRegistry() { return registry(); }

std::string pluginLibraryOf(const std::string& name, const std::string& version, const std::string& ns) {
  return registry().libraryOf(name, version, ns);
}

void loadPluginLibrary(const std::string& path) {
  static std::mutex mu;
  static std::set<std::string> loaded;
  std::lock_guard<std::mutex> lock(mu);
  std::string resolved = path;
  if (path.find('/') != std::string::npos) {  // a bare name is searched on the loader's path
    struct stat st;
    if (stat(path.c_str(), &st) != 0) throw Error("plugin library '" + path + "' does not exist");
    if (!S_ISREG(st.st_mode)) throw Error("plugin library '" + path + "' is not a regular file");
    char buf[PATH_MAX];
    if (realpath(path.c_str(), buf)) resolved = buf;
  }
  if (loaded.count(resolved)) return;
  dlerror();
  void* h = dlopen(resolved.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    throw Error("cannot load plugin library '" + path + "': " + (why ? why : "unknown error"));
  }
  using VersionFn = int32_t (*)();
  using RegisterFn = void (*)(void*);
  auto version = reinterpret_cast<VersionFn>(dlsym(h, "kilnPluginApiVersion"));
  auto reg = reinterpret_cast<RegisterFn>(dlsym(h, "kilnRegisterPlugins"));
  if (!version || !reg) {
    dlclose(h);
    throw Error("'" + path + "' is not a kiln plugin library: it does not export " +
                std::string(!version ? "kilnPluginApiVersion" : "kilnRegisterPlugins") +
                " (define the entry points with KILN_PLUGIN_LIBRARY from kiln/plugin.h)");
  }
  int32_t v = version();
  if (v != kPluginApiVersion) {
    dlclose(h);
    throw Error("plugin library '" + path + "' was built against kiln plugin API version " + std::to_string(v) +
                "; this kiln supports version " + std::to_string(kPluginApiVersion) + ": rebuild it against this kiln");
  }
  std::string lib = baseName(resolved);
  tCurrentLibrary = lib;
  try {
    reg(&registry());
  } catch (const std::exception& e) {
    tCurrentLibrary.clear();
    registry().dropLibrary(lib);
    // The library stays mapped: a creator it registered may still be referenced elsewhere.
    throw Error("plugin library '" + path + "' failed to register its plugins: " + e.what());
  }
  tCurrentLibrary.clear();
  loaded.insert(resolved);
}

}  // namespace kiln
