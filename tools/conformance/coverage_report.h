// Per-operator tallies of a conformance run, written as a markdown table.
#pragma once
#include <map>
#include <string>

#include "test_case.h"

namespace kiln::conformance {

class CoverageReport {
 public:
  //! Counts one test under its operator (op type from meta.json, else guessed from the name).
  void add(const std::string& testName, const TestMeta& meta, Verdict verdict);
  //! Writes the table; throws kiln::Error when the file cannot be written.
  void write(const std::string& path, const std::string& commandLine) const;

 private:
  struct Counts {
    int passed = 0, failed = 0, skipped = 0;
    void add(Verdict v) { (v == Verdict::kPass ? passed : v == Verdict::kFail ? failed : skipped)++; }
    int total() const { return passed + failed + skipped; }
  };
  struct OpRow {
    Counts node, expanded;
  };
  std::map<std::string, OpRow> rows_;
};

}  // namespace kiln::conformance
