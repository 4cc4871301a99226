// kiln_conformance: runs ONNX backend node tests (as written by tests/conformance/generate.py)
// through kiln's public API, one forked child per test.
//
//   kiln_conformance DIR [--filter S1,S2] [--device cpu|gpu] [--threads N] [--timeout SEC]
//                    [--mem-limit MB] [--opt-level L] [--shard I/N] [--list-failures] [--report FILE]
//                    [--verbose]
//
// --shard I/N runs every N-th selected test starting at the I-th (0-based) in name order, so that
// N runners in parallel cover the suite once with about equal shares (the GPU machine's script
// runs one per core: every GPU test pays a forked child's CUDA start).
//
// Prints `PASS name`, `FAIL name: reason` or `SKIP name: unsupported: reason` per test and, last,
// `N passed, N failed, N skipped`. Exits 1 if any test failed or no test was selected, 2 on a usage
// error. Whether passes became skips is checked against a pinned baseline by
// tests/conformance/check_baseline.py (make conformance).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "child_process.h"
#include "coverage_report.h"
#include "kiln/kiln.h"
#include "test_case.h"

namespace fs = std::filesystem;
using namespace kiln;
using namespace kiln::conformance;

namespace {

struct Options {
  std::string dir;
  std::vector<std::string> filters;  // a test runs if its name contains any of them
  RunOptions run;
  ChildLimits limits;
  bool listFailures = false;
  std::string reportPath;
  std::string commandLine;
  long shardIndex = 0, shardCount = 1;
};

[[noreturn]] void usage(const std::string& problem) {
  if (!problem.empty()) std::cerr << "kiln_conformance: " << problem << "\n";
  std::cerr << "usage: kiln_conformance DIR [--filter S1,S2] [--device cpu|gpu] [--threads N]\n"
               "       [--timeout SEC] [--mem-limit MB] [--opt-level 0-5] [--shard I/N]\n"
               "       [--list-failures] [--report FILE] [--verbose]\n"
               "DIR holds one directory per test (model.onnx, test_data_set_N/, meta.json).\n";
  std::exit(2);
}

std::vector<std::string> splitCommas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

long parseNumber(const std::string& flag, const std::string& v, long lo, long hi) {
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n < lo || n > hi)
    usage(flag + " expects an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got '" + v + "'");
  return n;
}

Options parseArgs(int argc, char** argv) {
  Options o;
  o.run.threads = 1;
  o.limits.memoryLimitMb = 16384;
  for (int i = 0; i < argc; ++i) o.commandLine += (i ? " " : "") + std::string(argv[i]);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    bool hasInlineValue = false;
    if (arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos) {
      value = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
      hasInlineValue = true;
    }
    auto next = [&]() -> std::string {
      if (hasInlineValue) return value;
      if (i + 1 >= argc) usage(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--filter") {
      for (auto& f : splitCommas(next())) o.filters.push_back(f);
    } else if (arg == "--device") {
      std::string d = next();
      if (d == "cpu") o.run.device = DeviceType::kCPU;
      else if (d == "gpu") o.run.device = DeviceType::kGPU;
      else usage("--device must be cpu or gpu");
    } else if (arg == "--threads") {
      o.run.threads = static_cast<int>(parseNumber(arg, next(), 0, 1024));
    } else if (arg == "--timeout") {
      o.limits.timeoutSeconds = static_cast<int>(parseNumber(arg, next(), 1, 86400));
    } else if (arg == "--mem-limit") {
      o.limits.memoryLimitMb = static_cast<size_t>(parseNumber(arg, next(), 0, 1L << 30));
    } else if (arg == "--opt-level") {
      o.run.optLevel = static_cast<int>(parseNumber(arg, next(), 0, 5));
    } else if (arg == "--shard") {
      const std::string v = next();
      const size_t slash = v.find('/');
      if (slash == std::string::npos) usage("--shard expects I/N, got '" + v + "'");
      o.shardCount = parseNumber(arg, v.substr(slash + 1), 1, 1 << 20);
      o.shardIndex = parseNumber(arg, v.substr(0, slash), 0, o.shardCount - 1);
    } else if (arg == "--list-failures") {
      o.listFailures = true;
    } else if (arg == "--report") {
      o.reportPath = next();
    } else if (arg == "--verbose" || arg == "-v") {
      o.run.verbose = o.limits.showOutput = true;
    } else if (arg == "--help" || arg == "-h") {
      usage("");
    } else if (arg.rfind("-", 0) == 0) {
      usage("unknown option " + arg);
    } else if (o.dir.empty()) {
      o.dir = arg;
    } else {
      usage("more than one test directory given");
    }
  }
  if (o.dir.empty()) usage("no test directory given");
  return o;
}

bool selected(const std::string& name, const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  return std::any_of(filters.begin(), filters.end(), [&](const std::string& f) { return name.find(f) != std::string::npos; });
}

// Test directories (those holding model.onnx) in name order; DIR itself may be a single test.
std::vector<fs::path> findTests(const Options& o) {
  fs::path root(o.dir);
  if (!fs::is_directory(root)) usage("not a directory: " + o.dir);
  if (fs::exists(root / "model.onnx")) return {root};
  std::vector<fs::path> tests;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx") && selected(e.path().filename().string(), o.filters))
      tests.push_back(e.path());
  std::sort(tests.begin(), tests.end());
  std::vector<fs::path> shard;
  for (size_t i = static_cast<size_t>(o.shardIndex); i < tests.size(); i += static_cast<size_t>(o.shardCount))
    shard.push_back(tests[i]);
  return shard;
}

// Collapses newlines and runs of blanks so that every verdict stays on one line.
std::string oneLine(const std::string& s) {
  std::string out;
  for (char c : s) {
    bool blank = c == '\n' || c == '\r' || c == '\t' || c == ' ';
    if (!blank) out += c;
    else if (!out.empty() && out.back() != ' ') out += ' ';
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// The last non-empty line the child wrote on stderr: usually the cause of a crash.
std::string lastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\n\r ");
  if (end == std::string::npos) return "";
  size_t begin = text.rfind('\n', end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return text.substr(begin, end + 1 - begin);
}

Outcome runIsolated(const fs::path& testDir, const TestMeta& meta, const Options& o) {
  auto work = [&]() -> std::string {
    Outcome r;
    try {
      r = runTestCase(testDir.string(), meta, o.run);
    } catch (const std::exception& e) {  // runTestCase does not throw; belt and braces for the pipe protocol
      r = {Verdict::kFail, e.what()};
    }
    return std::string(1, static_cast<char>(r.verdict)) + oneLine(r.reason);
  };
  ChildResult child = runInChild(work, o.limits);
  if (!child.completed) {
    std::string detail = lastLine(child.stderrTail);
    return {Verdict::kFail, child.failure + (detail.empty() ? "" : ": " + detail)};
  }
  return {static_cast<Verdict>(child.result[0]), child.result.substr(1)};
}

// Checked in a child: initializing CUDA in the parent would leave forked children unable to use it.
bool gpuUsable(const Options& o) {
  ChildResult r = runInChild([] { return std::string(gpuAvailable() ? "1" : "0"); }, o.limits);
  return r.completed && r.result == "1";
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parseArgs(argc, argv);
  if (o.run.device == DeviceType::kGPU && !gpuUsable(o)) {
    std::cerr << "kiln_conformance: --device gpu, but no usable CUDA device (or kiln was built without CUDA)\n";
    return 2;
  }
  std::vector<fs::path> tests = findTests(o);
  // Nothing selected is a failure: a broken generator or filter must not look like a clean run.
  if (tests.empty()) {
    std::cerr << "kiln_conformance: no test matches in " << o.dir << "\n";
    std::cout << "0 passed, 0 failed, 0 skipped" << std::endl;
    return 1;
  }

  int passed = 0, failed = 0, skipped = 0;
  std::vector<std::string> failures;
  CoverageReport report;
  for (const fs::path& dir : tests) {
    std::string name = dir.filename().string();
    TestMeta meta;
    Outcome outcome;
    try {
      meta = loadTestMeta(dir.string());
      outcome = runIsolated(dir, meta, o);
    } catch (const std::exception& e) {
      outcome = {Verdict::kFail, std::string("meta.json: ") + e.what()};
    }
    switch (outcome.verdict) {
      case Verdict::kPass: ++passed; std::cout << "PASS " << name << "\n"; break;
      case Verdict::kSkip: ++skipped; std::cout << "SKIP " << name << ": " << outcome.reason << "\n"; break;
      default:
        ++failed;
        std::cout << "FAIL " << name << ": " << outcome.reason << "\n";
        failures.push_back(name + ": " + outcome.reason);
        break;
    }
    std::cout.flush();
    report.add(name, meta, outcome.verdict);
  }

  if (!o.reportPath.empty()) {
    try {
      report.write(o.reportPath, o.commandLine);
    } catch (const std::exception& e) {
      std::cerr << "kiln_conformance: " << e.what() << "\n";
      return 2;
    }
  }
  if (o.listFailures && !failures.empty()) {
    std::cout << "\nFailures (" << failures.size() << "):\n";
    for (const std::string& f : failures) std::cout << "  " << f << "\n";
    std::cout << "\n";
  }
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped" << std::endl;
  return failed ? 1 : 0;
}
