// The Triton backend API entry points of libtriton_kiln.so. Each one turns every exception into
// a TRITONSERVER_Error: nothing is thrown across the C boundary.
#include <string>

#include "instance_state.h"
#include "kiln/version.h"
#include "model_state.h"
#include "triton_util.h"

using namespace kiln::triton;

// The library is built with hidden visibility; only the entry points Triton looks up are exported.
#define KILN_TRITON_EXPORT __attribute__((visibility("default")))

extern "C" {

KILN_TRITON_EXPORT TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  (void)backend;
  uint32_t major = 0, minor = 0;
  if (TRITONSERVER_Error* err = TRITONBACKEND_ApiVersion(&major, &minor)) return err;
  if (major != TRITONBACKEND_API_VERSION_MAJOR || minor < TRITONBACKEND_API_VERSION_MINOR)
    return makeError(TRITONSERVER_ERROR_UNSUPPORTED,
                     "the kiln backend needs Triton backend API " + std::to_string(TRITONBACKEND_API_VERSION_MAJOR) + "." +
                         std::to_string(TRITONBACKEND_API_VERSION_MINOR) + " or a later minor version; this server has " +
                         std::to_string(major) + "." + std::to_string(minor));
  logInfo(std::string("kiln ") + KILN_VERSION_STRING + " (Triton backend API " + std::to_string(major) + "." + std::to_string(minor) +
          ", built against " + std::to_string(TRITONBACKEND_API_VERSION_MAJOR) + "." +
          std::to_string(TRITONBACKEND_API_VERSION_MINOR) + "); GPU " + (kiln::gpuAvailable() ? "available" : "not available"));
  return nullptr;
}

// Without an instance_group, Triton makes GPU instances where kiln can run them, else CPU ones.
KILN_TRITON_EXPORT TRITONSERVER_Error* TRITONBACKEND_GetBackendAttribute(TRITONBACKEND_Backend* backend,
                                                                          TRITONBACKEND_BackendAttribute* attributes) {
  (void)backend;
  if (kiln::gpuAvailable())
    if (TRITONSERVER_Error* err = TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup(
            attributes, TRITONSERVER_INSTANCEGROUPKIND_GPU, 0, nullptr, 0))
      return err;
  return TRITONBACKEND_BackendAttributeAddPreferredInstanceGroup(attributes, TRITONSERVER_INSTANCEGROUPKIND_CPU, 0, nullptr, 0);
}

KILN_TRITON_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  try {
    auto* state = new ModelState(model);
    if (TRITONSERVER_Error* err = TRITONBACKEND_ModelSetState(model, state)) {
      delete state;
      return err;
    }
    return nullptr;
  } catch (...) {
    const char* name = nullptr;
    logAndDelete(TRITONBACKEND_ModelName(model, &name), "reading the model name");
    return currentExceptionAsError(std::string("kiln backend: model '") + (name ? name : "?") + "': ");
  }
}

KILN_TRITON_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  if (TRITONSERVER_Error* err = TRITONBACKEND_ModelState(model, &state)) return err;
  delete static_cast<ModelState*>(state);
  return nullptr;
}

KILN_TRITON_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  try {
    TRITONBACKEND_Model* model = nullptr;
    check(TRITONBACKEND_ModelInstanceModel(instance, &model), "finding the instance's model");
    void* modelState = nullptr;
    check(TRITONBACKEND_ModelState(model, &modelState), "finding the model state");
    auto* state = new InstanceState(*static_cast<ModelState*>(modelState), instance);
    if (TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceSetState(instance, state)) {
      delete state;
      return err;
    }
    return nullptr;
  } catch (...) {
    return currentExceptionAsError("kiln backend: ");
  }
}

KILN_TRITON_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  void* state = nullptr;
  if (TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceState(instance, &state)) return err;
  try {
    delete static_cast<InstanceState*>(state);
  } catch (...) {
    return currentExceptionAsError("kiln backend: finalizing an instance: ");
  }
  return nullptr;
}

// Success hands the requests to the backend: InstanceState::execute answers and releases each.
KILN_TRITON_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                                           TRITONBACKEND_Request** requests,
                                                                           const uint32_t request_count) {
  void* state = nullptr;
  if (TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceState(instance, &state)) return err;
  static_cast<InstanceState*>(state)->execute(requests, request_count);
  return nullptr;
}

}  // extern "C"
