// One ONNX node test directory (model.onnx, test_data_set_N/, meta.json) run in-process:
// import, build, run every data set and compare the outputs.
#pragma once
#include <string>
#include <vector>

#include "kiln/builder.h"
#include "tensor_compare.h"

namespace kiln::conformance {

//! A graph input or output as generate.py describes it ("tensor", "sequence", "optional", ...).
struct ValueSpec {
  std::string name;
  std::string kind = "tensor";
};

//! meta.json of a test (defaults when the file is missing: onnx's tolerances, no names).
struct TestMeta {
  Tolerance tol;
  std::string opType;  //!< the operator the test exercises ("" when unknown)
  std::string domain;
  bool expanded = false;  //!< a function-expanded variant of an op's test
  std::vector<ValueSpec> inputs, outputs;
};

TestMeta loadTestMeta(const std::string& testDir);

enum class Verdict : char { kPass = 'P', kFail = 'F', kSkip = 'S' };

struct Outcome {
  Verdict verdict = Verdict::kFail;
  std::string reason;  //!< empty for kPass
};

struct RunOptions {
  DeviceType device = DeviceType::kCPU;
  int threads = 1;
  int optLevel = 3;
  bool verbose = false;
};

//! Runs the test in this process. Never throws: every error becomes a FAIL or SKIP outcome.
Outcome runTestCase(const std::string& testDir, const TestMeta& meta, const RunOptions& options);

}  // namespace kiln::conformance
