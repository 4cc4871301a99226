// A plugin library built against a plugin API version this kiln does not support.
#include <cstdint>
extern "C" __attribute__((visibility("default"))) int32_t kilnPluginApiVersion() { return 99; }
extern "C" __attribute__((visibility("default"))) void kilnRegisterPlugins(void*) {}
