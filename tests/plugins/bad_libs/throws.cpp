// A plugin library whose registration fails (registers a creator twice).
#include "kiln/plugin.h"

namespace {
class Creator : public kiln::IPluginCreator {
 public:
  std::string name() const override { return "TwiceRegistered"; }
  std::string version() const override { return "1"; }
  std::string pluginNamespace() const override { return "test.bad"; }
  std::vector<kiln::PluginFieldSpec> fieldSpecs() const override { return {}; }
  std::unique_ptr<kiln::IPlugin> create(const std::string&, const kiln::Attributes&) const override { return nullptr; }
};
void registerTwice(kiln::IPluginRegistry& r) {
  r.registerCreator(std::make_shared<Creator>());
  r.registerCreator(std::make_shared<Creator>());
}
}  // namespace

KILN_PLUGIN_LIBRARY(registerTwice)
