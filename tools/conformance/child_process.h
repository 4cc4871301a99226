// Runs a function in a forked child with a time limit, so that a crash or a hang in one test is
// reported and the run goes on.
#pragma once
#include <functional>
#include <string>

namespace kiln::conformance {

struct ChildLimits {
  int timeoutSeconds = 60;
  size_t memoryLimitMb = 0;  //!< address-space limit of the child; 0 = none
  bool showOutput = false;   //!< pass the child's stdout/stderr through instead of capturing them
};

struct ChildResult {
  bool completed = false;  //!< the function returned and its result arrived
  std::string result;      //!< what the function returned
  std::string failure;     //!< when !completed: timeout, signal or exit status
  std::string stderrTail;  //!< the last lines the child wrote to stderr (when captured)
};

//! Forks; the child runs `work` (which must not throw) and sends its string back through a pipe.
//! The parent must not hold threads of its own (fork copies only the calling thread).
ChildResult runInChild(const std::function<std::string()>& work, const ChildLimits& limits);

}  // namespace kiln::conformance
