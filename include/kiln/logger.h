#pragma once
#include <string>

namespace kiln {

//! Receives kiln's diagnostics. The default logger prints warnings and errors to stderr.
class ILogger {
 public:
  enum class Severity { kERROR = 1, kWARNING = 2, kINFO = 3, kVERBOSE = 4 };
  virtual ~ILogger() = default;
  virtual void log(Severity severity, const std::string& msg) noexcept = 0;
};

//! A logger that writes messages at or above `threshold` to stderr.
class StderrLogger : public ILogger {
 public:
  explicit StderrLogger(Severity threshold = Severity::kWARNING) : threshold_(threshold) {}
  void log(Severity s, const std::string& msg) noexcept override;
  void setThreshold(Severity s) { threshold_ = s; }

 private:
  Severity threshold_;
};

ILogger& defaultLogger();

}  // namespace kiln
