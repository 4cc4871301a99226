#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "kiln/types.h"

namespace kiln::conformance {
namespace {

constexpr size_t kStderrTailBytes = 4096;

void writeAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

[[noreturn]] void childMain(const std::function<std::string()>& work, const ChildLimits& limits, int resultFd,
                            int stderrFd) {
  if (!limits.showOutput) {
    int devNull = open("/dev/null", O_WRONLY);
    if (devNull >= 0) dup2(devNull, STDOUT_FILENO);
    dup2(stderrFd, STDERR_FILENO);
  }
  if (limits.memoryLimitMb) {
    rlimit lim{};
    lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(limits.memoryLimitMb) << 20;
    setrlimit(RLIMIT_AS, &lim);
  }
  std::string result = work();
  writeAll(resultFd, result);
  close(resultFd);
  _exit(0);  // skip static destructors and atexit handlers of the parent's copy
}

// Keeps only the end of what the child wrote on stderr.
void appendTail(std::string& tail, const char* data, size_t n) {
  tail.append(data, n);
  if (tail.size() > kStderrTailBytes) tail.erase(0, tail.size() - kStderrTailBytes);
}

std::string describeExit(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return std::string("crashed with signal ") + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status)) + " without a result";
  return "ended abnormally";
}

}  // namespace

ChildResult runInChild(const std::function<std::string()>& work, const ChildLimits& limits) {
  int resultPipe[2], stderrPipe[2];
  if (pipe2(resultPipe, O_CLOEXEC) != 0 || pipe2(stderrPipe, O_CLOEXEC) != 0)
    throw Error(std::string("pipe: ") + std::strerror(errno));

  pid_t pid = fork();
  if (pid < 0) throw Error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    close(resultPipe[0]);
    close(stderrPipe[0]);
    childMain(work, limits, resultPipe[1], stderrPipe[1]);
  }
  close(resultPipe[1]);
  close(stderrPipe[1]);

  ChildResult out;
  bool resultOpen = true, stderrOpen = true, timedOut = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limits.timeoutSeconds);
  char buf[4096];
  while (resultOpen || stderrOpen) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) { timedOut = true; break; }
    const short wantResult = resultOpen ? POLLIN : 0, wantStderr = stderrOpen ? POLLIN : 0;
    pollfd fds[2] = {{resultPipe[0], wantResult, 0}, {stderrPipe[0], wantStderr, 0}};
    int ready = poll(fds, 2, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        if (i == 0) out.result.append(buf, static_cast<size_t>(n));
        else appendTail(out.stderrTail, buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        (i == 0 ? resultOpen : stderrOpen) = false;
      }
    }
  }
  close(resultPipe[0]);
  close(stderrPipe[0]);

  if (timedOut) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  bool exitedCleanly = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (timedOut) {
    out.failure = "timeout after " + std::to_string(limits.timeoutSeconds) + " s";
  } else if (!exitedCleanly || out.result.empty()) {
    out.failure = describeExit(status);
  } else {
    out.completed = true;
  }
  return out;
}

}  // namespace kiln::conformance
