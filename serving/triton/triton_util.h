// Small helpers between C++ and Triton's C API: errors as exceptions inside the backend and as
// TRITONSERVER_Error at its boundary, Triton's log, and the clock Triton's statistics expect.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kiln/logger.h"
#include "triton/core/tritonbackend.h"

namespace kiln::triton {

//! A failure with the Triton error code it should reach the client with.
class TritonError : public std::runtime_error {
 public:
  TritonError(TRITONSERVER_Error_Code code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  TRITONSERVER_Error_Code code() const { return code_; }

 private:
  TRITONSERVER_Error_Code code_;
};

//! Throws a TritonError carrying `err`'s code and message (and deletes `err`); no-op for null.
void check(TRITONSERVER_Error* err, const std::string& what);
//! Logs a failure the caller cannot report anywhere else (`what` failed) and deletes it; no-op for null.
void logAndDelete(TRITONSERVER_Error* err, const std::string& what);
//! The current exception as a new TRITONSERVER_Error (TritonError keeps its code; kiln::Error and
//! others are INTERNAL, kiln::UnsupportedError UNSUPPORTED). Call inside a catch block.
TRITONSERVER_Error* currentExceptionAsError(const std::string& prefix);
//! A TRITONSERVER_Error for `code` and `msg` (the caller or Triton takes ownership).
TRITONSERVER_Error* makeError(TRITONSERVER_Error_Code code, const std::string& msg);

void logInfo(const std::string& msg);
void logWarning(const std::string& msg);
void logError(const std::string& msg);

//! Nanoseconds on the steady clock (what TRITONBACKEND_ModelInstanceReportStatistics expects).
uint64_t nowNs();

//! Forwards kiln's diagnostics (build warnings, unsupported flags) to Triton's log.
class TritonLogger : public kiln::ILogger {
 public:
  void log(Severity severity, const std::string& msg) noexcept override;
};
TritonLogger& tritonLogger();

}  // namespace kiln::triton
