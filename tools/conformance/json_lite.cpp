#include "json_lite.h"

#include <cstdlib>

#include "kiln/types.h"

namespace kiln::conformance {

const JsonValue* JsonValue::find(const std::string& key) const {
  if (kind != Kind::kObject) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &it->second;
}

double JsonValue::numberOr(const std::string& key, double dflt) const {
  const JsonValue* v = find(key);
  return v && v->kind == Kind::kNumber ? v->number : dflt;
}

std::string JsonValue::stringOr(const std::string& key, const std::string& dflt) const {
  const JsonValue* v = find(key);
  return v && v->kind == Kind::kString ? v->string : dflt;
}

bool JsonValue::boolOr(const std::string& key, bool dflt) const {
  const JsonValue* v = find(key);
  return v && v->kind == Kind::kBool ? v->boolean : dflt;
}

namespace {

// Nesting bound so that a hostile file cannot exhaust the stack.
constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  JsonValue parseDocument() {
    JsonValue v = parseValue(0);
    skipSpace();
    if (pos_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("JSON: " + what + " at offset " + std::to_string(pos_));
  }

  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t'))
      ++pos_;
  }

  bool consume(const char* word) {
    size_t n = std::char_traits<char>::length(word);
    if (s_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }

  JsonValue parseValue(int depth) {
    if (depth > kMaxDepth) fail("nesting too deep");
    skipSpace();
    if (pos_ >= s_.size()) fail("unexpected end");
    JsonValue v;
    char c = s_[pos_];
    if (c == '{') {
      parseObject(v, depth);
    } else if (c == '[') {
      parseArray(v, depth);
    } else if (c == '"') {
      v.kind = JsonValue::Kind::kString;
      v.string = parseString();
    } else if (consume("true")) {
      v.kind = JsonValue::Kind::kBool;
      v.boolean = true;
    } else if (consume("false")) {
      v.kind = JsonValue::Kind::kBool;
    } else if (consume("null")) {
      v.kind = JsonValue::Kind::kNull;
    } else {
      v.kind = JsonValue::Kind::kNumber;
      v.number = parseNumber();
    }
    return v;
  }

  void parseObject(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::kObject;
    ++pos_;  // '{'
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') { ++pos_; return; }
    while (true) {
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a member name");
      std::string key = parseString();
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') fail("expected ':'");
      ++pos_;
      v.object[key] = parseValue(depth + 1);
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') { ++pos_; continue; }
      if (pos_ < s_.size() && s_[pos_] == '}') { ++pos_; return; }
      fail("expected ',' or '}'");
    }
  }

  void parseArray(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::kArray;
    ++pos_;  // '['
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') { ++pos_; return; }
    while (true) {
      v.array.push_back(parseValue(depth + 1));
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') { ++pos_; continue; }
      if (pos_ < s_.size() && s_[pos_] == ']') { ++pos_; return; }
      fail("expected ',' or ']'");
    }
  }

  std::string parseString() {
    ++pos_;  // opening quote
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c != '\\') { out += c; continue; }
      if (pos_ >= s_.size()) break;
      char e = s_[pos_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': out += parseUnicodeEscape(); break;
        default: out += e; break;  // \" \\ \/
      }
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    ++pos_;  // closing quote
    return out;
  }

  // \uXXXX as UTF-8 (surrogate pairs are not needed for test names: encode each unit alone).
  std::string parseUnicodeEscape() {
    if (pos_ + 4 > s_.size()) fail("truncated \\u escape");
    unsigned code = static_cast<unsigned>(std::strtoul(s_.substr(pos_, 4).c_str(), nullptr, 16));
    pos_ += 4;
    std::string out;
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
    return out;
  }

  double parseNumber() {
    const char* begin = s_.c_str() + pos_;
    char* end = nullptr;
    double d = std::strtod(begin, &end);
    if (end == begin) fail("unexpected character");
    pos_ += static_cast<size_t>(end - begin);
    return d;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

JsonValue parseJson(const std::string& text) { return Parser(text).parseDocument(); }

}  // namespace kiln::conformance
