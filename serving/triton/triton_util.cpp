#include "triton_util.h"

#include <chrono>

#include "kiln/types.h"

namespace kiln::triton {

void check(TRITONSERVER_Error* err, const std::string& what) {
  if (!err) return;
  const TRITONSERVER_Error_Code code = TRITONSERVER_ErrorCode(err);
  std::string msg = what + ": " + TRITONSERVER_ErrorMessage(err);
  TRITONSERVER_ErrorDelete(err);
  throw TritonError(code, msg);
}

TRITONSERVER_Error* makeError(TRITONSERVER_Error_Code code, const std::string& msg) {
  return TRITONSERVER_ErrorNew(code, msg.c_str());
}

TRITONSERVER_Error* currentExceptionAsError(const std::string& prefix) {
  try {
    throw;
  } catch (const TritonError& e) {
    return makeError(e.code(), prefix + e.what());
  } catch (const kiln::UnsupportedError& e) {
    return makeError(TRITONSERVER_ERROR_UNSUPPORTED, prefix + e.what());
  } catch (const std::exception& e) {
    return makeError(TRITONSERVER_ERROR_INTERNAL, prefix + e.what());
  } catch (...) {
    return makeError(TRITONSERVER_ERROR_INTERNAL, prefix + "unknown exception");
  }
}

static void logAt(TRITONSERVER_LogLevel level, const std::string& msg);

void logAndDelete(TRITONSERVER_Error* err, const std::string& what) {
  if (!err) return;
  logAt(TRITONSERVER_LOG_ERROR, "kiln backend: " + what + " failed: " + TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
}

static void logAt(TRITONSERVER_LogLevel level, const std::string& msg) {
  if (TRITONSERVER_Error* err = TRITONSERVER_LogMessage(level, __FILE__, __LINE__, msg.c_str()))
    TRITONSERVER_ErrorDelete(err);  // nowhere else to report it
}
void logInfo(const std::string& msg) { logAt(TRITONSERVER_LOG_INFO, "kiln backend: " + msg); }
void logWarning(const std::string& msg) { logAt(TRITONSERVER_LOG_WARN, "kiln backend: " + msg); }
void logError(const std::string& msg) { logAt(TRITONSERVER_LOG_ERROR, "kiln backend: " + msg); }

uint64_t nowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

void TritonLogger::log(Severity severity, const std::string& msg) noexcept {
  try {
    switch (severity) {
      case Severity::kERROR: logAt(TRITONSERVER_LOG_ERROR, "kiln: " + msg); break;
      case Severity::kWARNING: logAt(TRITONSERVER_LOG_WARN, "kiln: " + msg); break;
      case Severity::kINFO: logAt(TRITONSERVER_LOG_INFO, "kiln: " + msg); break;
      case Severity::kVERBOSE: logAt(TRITONSERVER_LOG_VERBOSE, "kiln: " + msg); break;
    }
  } catch (...) {
  }
}

TritonLogger& tritonLogger() {
  static TritonLogger logger;
  return logger;
}

}  // namespace kiln::triton
