// The tactic naming rule (docs/internals.md, "Tactic tables"), for tests: <op>_<type>_<variant>,
// lower-case words joined by '_', where <op> is the op in snake case, <type> one of the type
// words below and <variant> at least one word (library or instruction set, then options).
#pragma once
#include <cctype>
#include <set>
#include <string>

namespace kiln::test {

//! "LayerNormalization" -> "layer_normalization"; MatMul, NaN and PRelu stay one word.
inline std::string snakeCase(std::string op) {
  for (auto [from, to] : {std::pair<const char*, const char*>{"MatMul", "Matmul"}, {"NaN", "Nan"}, {"PRelu", "Prelu"}})
    for (size_t at; (at = op.find(from)) != std::string::npos;) op.replace(at, std::string(from).size(), to);
  std::string s;
  for (size_t i = 0; i < op.size(); ++i) {
    const char c = op[i];
    const bool upper = std::isupper(static_cast<unsigned char>(c));
    // A new word starts at a capital after a lower-case letter or digit ("TopK"), or at the last
    // capital of a run that a lower-case letter follows ("RMSNormalization").
    if (upper && i > 0 &&
        (!std::isupper(static_cast<unsigned char>(op[i - 1])) ||
         (i + 1 < op.size() && std::islower(static_cast<unsigned char>(op[i + 1])))))
      s += '_';
    s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return s;
}

//! The <type> words: one element type, or a set (half: float16/bfloat16; fp: the float types;
//! int: the integer types; num: floats and integers; any: every element type).
inline const std::set<std::string>& tacticTypeWords() {
  static const std::set<std::string> w = {"f32", "f16", "bf16", "f64", "i8", "u8", "i32", "i64", "bool",
                                          "half", "fp",  "int",  "num", "any"};
  return w;
}

//! Why `name` breaks the rule for a tactic of `op`, or "" when it follows it.
inline std::string namingRuleViolation(const std::string& op, const std::string& name) {
  const std::string prefix = snakeCase(op) + "_";
  if (name.rfind(prefix, 0) != 0) return "does not start with '" + prefix + "'";
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_'))
      return "has a character other than a-z, 0-9 and '_'";
    if (c == '_' && (i + 1 == name.size() || name[i + 1] == '_')) return "has an empty word";
  }
  const std::string rest = name.substr(prefix.size());
  const size_t end = rest.find('_');
  if (end == std::string::npos) return "has no variant after the type";
  if (!tacticTypeWords().count(rest.substr(0, end))) return "'" + rest.substr(0, end) + "' is not a type word";
  return "";
}

}  // namespace kiln::test

namespace kiln::test {
//! The name of the CPU's float32 AVX2 tactic of `op` (elementwise, softmax, norms, reductions).
inline std::string f32Avx2(const std::string& op) { return snakeCase(op) + "_f32_avx2"; }
}  // namespace kiln::test
