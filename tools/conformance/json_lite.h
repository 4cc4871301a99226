// A minimal JSON reader for the conformance runner's meta.json (objects, arrays, strings,
// numbers, booleans, null). Only what the runner needs: no writer, no streaming.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::conformance {

class JsonValue {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };

  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0.0;
  std::string string;
  std::vector<JsonValue> array;
  std::map<std::string, JsonValue> object;

  //! Member `key` of an object, or nullptr when absent (or when this is not an object).
  const JsonValue* find(const std::string& key) const;
  double numberOr(const std::string& key, double dflt) const;
  std::string stringOr(const std::string& key, const std::string& dflt) const;
  bool boolOr(const std::string& key, bool dflt) const;
};

//! Parses `text`; throws kiln::Error with the byte offset on malformed input.
JsonValue parseJson(const std::string& text);

}  // namespace kiln::conformance
