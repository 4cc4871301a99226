#pragma once
#include <atomic>
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
  //! Safe while other threads log.
  void setThreshold(Severity s) { threshold_.store(s, std::memory_order_relaxed); }

 private:
  std::atomic<Severity> threshold_;
};

ILogger& defaultLogger();
//! The least severe messages the default logger prints (default kWARNING).
void setDefaultLoggerThreshold(ILogger::Severity threshold);

}  // namespace kiln
