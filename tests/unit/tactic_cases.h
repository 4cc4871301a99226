// Test cases per op for the tactic-table harness (test_tactic_table.cpp): small layers of one
// element type, for any backend. casesFor(op, type) is empty where the op has no case of that type
// here; the harness then needs the entry's own suite (coveredElsewhere()).
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "op_test_util.h"

namespace kiln::test {

inline HostTensor i64Values(const Dims& d, std::vector<int64_t> v) {
  HostTensor t(DataType::kINT64, d);
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

inline HostTensor floatValues(DataType type, const Dims& d, std::vector<double> v) {
  HostTensor t(DataType::kDOUBLE, d);
  for (size_t i = 0; i < v.size(); ++i) t.as<double>()[i] = v[i];
  return convertTo(t, type);
}

//! A case whose inputs after the first `data` are build-time constants (shapes, axes, weights).
inline OpCase makeOpCase(const std::string& op, std::vector<HostTensor> in, Attributes a = {}, size_t data = 1,
                         int outputs = 1) {
  OpCase c;
  c.op = op;
  c.attrs = std::move(a);
  c.inputs = std::move(in);
  c.constant.assign(c.inputs.size(), false);
  for (size_t i = data; i < c.inputs.size(); ++i) c.constant[i] = true;
  c.nbOutputs = outputs;
  return c;
}

inline bool isFloatCaseType(DataType t) {
  return t == DataType::kFLOAT || t == DataType::kHALF || t == DataType::kBF16 || t == DataType::kDOUBLE;
}

//! Input range where the op is defined and well conditioned.
inline std::pair<double, double> unaryRange(const std::string& op) {
  static const std::map<std::string, std::pair<double, double>> r = {
      {"Sqrt", {0.1, 4}}, {"Log", {0.1, 4}}, {"Reciprocal", {0.5, 4}}, {"Acosh", {1.1, 4}}, {"Asin", {-0.9, 0.9}},
      {"Acos", {-0.9, 0.9}}, {"Atanh", {-0.9, 0.9}}, {"Exp", {-4, 4}}, {"Sinh", {-3, 3}}, {"Cosh", {-3, 3}},
      {"Tan", {-1.2, 1.2}}};
  auto it = r.find(op);
  return it == r.end() ? std::pair<double, double>{-3, 3} : it->second;
}

inline const std::set<std::string>& unaryOpNames() {
  static const std::set<std::string> s = {
      "Relu", "LeakyRelu", "Elu", "Selu", "Celu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Softplus", "Softsign",
      "Gelu", "Erf", "Sqrt", "Exp", "Log", "Neg", "Abs", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos",
      "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Mish", "ThresholdedRelu", "Shrink",
      "IsNaN", "IsInf", "Not", "BitwiseNot", "Identity", "Dropout"};
  return s;
}

inline const std::set<std::string>& binaryOpNames() {
  static const std::set<std::string> s = {"Add", "Sub", "Mul", "Div", "Mod", "PRelu", "Pow", "Equal", "Less",
                                          "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor",
                                          "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift", "Sum", "Mean",
                                          "Max", "Min"};
  return s;
}

inline std::vector<OpCase> elementwiseCases(const std::string& op, DataType t) {
  std::vector<OpCase> v;
  if (unaryOpNames().count(op)) {
    auto [lo, hi] = unaryRange(op);
    for (const Dims& d : {Dims{3, 37}, Dims{2, 3, 4, 5}}) v.push_back(makeOpCase(op, {uniformOfType(d, t, 11, lo, hi)}));
    if (op == "Gelu") {
      Attributes a;
      a.set("approximate", std::string("tanh"));
      v.push_back(makeOpCase(op, {uniformOfType({67}, t, 12, -3, 3)}, a));
    }
    return v;
  }
  if (op == "Clip") {
    v.push_back(makeOpCase(op, {uniformOfType({5, 19}, t, 13, -3, 3), uniformOfType({}, t, 14, -1, -1),
                                uniformOfType({}, t, 15, 2, 2)}, {}, 3));
    return v;
  }
  if (op == "Where") {
    Dims d{4, 9};
    v.push_back(makeOpCase(op, {uniformOfType(d, DataType::kBOOL, 16, 0, 2), uniformOfType(d, t, 17, -3, 3),
                                uniformOfType({9}, t, 18, -3, 3)}, {}, 3));
    return v;
  }
  if (op == "Cast" || op == "CastLike") {
    if (!isFloatCaseType(t)) return v;
    HostTensor x = uniformOfType({6, 7}, t, 19, -100, 100);
    Attributes a;
    a.set("to", int64_t(7));  // int64
    if (op == "Cast") v.push_back(makeOpCase(op, {x}, a));
    else v.push_back(makeOpCase(op, {x, HostTensor(DataType::kINT64, {1})}, {}, 2));
    return v;
  }
  if (!binaryOpNames().count(op)) return v;
  const bool positive = op == "Div" || op == "Mod" || op == "Pow" || op == "BitShift";
  const double lo = positive ? 1 : -3, hi = op == "Pow" ? 2 : positive ? 4 : 3;
  Attributes a;
  if (op == "BitShift") a.set("direction", std::string("LEFT"));
  for (auto [da, db] : {std::pair<Dims, Dims>{{3, 17}, {3, 17}}, {{2, 3, 8}, {3, 1}}, {{4, 5}, {}}}) {
    if (op == "PRelu" && db.empty()) continue;
    v.push_back(makeOpCase(op, {uniformOfType(da, t, 20, positive ? 1 : -3, 4), uniformOfType(db, t, 21, lo, hi)}, a, 2));
  }
  return v;
}

inline std::vector<OpCase> shapeCases(const std::string& op, DataType t) {
  std::vector<OpCase> v;
  const HostTensor x = uniformOfType({2, 3, 4, 6}, t, 31, -5, 5);
  Attributes a;
  if (op == "Reshape") v.push_back(makeOpCase(op, {x, i64Values({2}, {6, -1})}));
  if (op == "Flatten") v.push_back(makeOpCase(op, {x}));
  if (op == "Squeeze") v.push_back(makeOpCase(op, {uniformOfType({2, 1, 5}, t, 32, -5, 5), i64Values({1}, {1})}));
  if (op == "Unsqueeze") v.push_back(makeOpCase(op, {x, i64Values({1}, {1})}));
  if (op == "Transpose") {
    a.set("perm", std::vector<int64_t>{0, 3, 1, 2});
    v.push_back(makeOpCase(op, {x}, a));
  }
  if (op == "Concat") {
    a.set("axis", int64_t(1));
    v.push_back(makeOpCase(op, {x, uniformOfType({2, 5, 4, 6}, t, 33, -5, 5)}, a, 2));
  }
  if (op == "Split") {
    a.set("axis", int64_t(3));
    v.push_back(makeOpCase(op, {x, i64Values({2}, {2, 4})}, a, 1, 2));
  }
  if (op == "Slice") v.push_back(makeOpCase(op, {x, i64Values({2}, {1, 1}), i64Values({2}, {3, 5}), i64Values({2}, {1, 3})}));
  if (op == "Expand") v.push_back(makeOpCase(op, {uniformOfType({3, 1}, t, 34, -5, 5), i64Values({3}, {2, 3, 4})}));
  if (op == "Tile") v.push_back(makeOpCase(op, {uniformOfType({2, 3}, t, 35, -5, 5), i64Values({2}, {2, 3})}));
  if (op == "DepthToSpace" || op == "SpaceToDepth") {
    a.set("blocksize", int64_t(2));
    v.push_back(makeOpCase(op, {uniformOfType(op == "DepthToSpace" ? Dims{1, 8, 3, 2} : Dims{1, 2, 4, 6}, t, 36, -5, 5)}, a));
  }
  if (op == "Gather") {
    a.set("axis", int64_t(1));
    v.push_back(makeOpCase(op, {x, i64Values({2, 2}, {0, 2, -1, 1})}, a, 2));
  }
  if (op == "GatherElements" || op == "ScatterElements" || op == "Scatter") {
    a.set("axis", int64_t(1));
    HostTensor idx = i64Values({2, 2}, {0, 2, 1, 0});
    HostTensor d = uniformOfType({2, 3}, t, 37, -5, 5);
    if (op == "GatherElements") v.push_back(makeOpCase(op, {d, idx}, a, 2));
    else v.push_back(makeOpCase(op, {d, idx, uniformOfType({2, 2}, t, 38, -5, 5)}, a, 3));
  }
  if (op == "GatherND") v.push_back(makeOpCase(op, {uniformOfType({3, 4}, t, 39, -5, 5), i64Values({2, 2}, {0, 1, 2, 3})}, {}, 2));
  if (op == "ScatterND")
    v.push_back(makeOpCase(op, {uniformOfType({3, 4}, t, 40, -5, 5), i64Values({2, 1}, {2, 0}), uniformOfType({2, 4}, t, 41, -5, 5)},
                           {}, 3));
  if (op == "Pad") v.push_back(makeOpCase(op, {uniformOfType({2, 3}, t, 42, -5, 5), i64Values({4}, {1, 0, 0, 2})}));
  if (op == "Trilu") v.push_back(makeOpCase(op, {uniformOfType({4, 5}, t, 43, -5, 5)}));
  if (op == "Shape" || op == "Size") v.push_back(makeOpCase(op, {x}));
  if (op == "Range" && t != DataType::kBOOL)
    v.push_back(makeOpCase(op, {uniformOfType({}, t, 0, 1, 1), uniformOfType({}, t, 0, 9, 9), uniformOfType({}, t, 0, 2, 2)}, {}, 0));
  if (op == "ConstantOfShape" && t == DataType::kFLOAT) {
    a.set("value", floatValues(t, {1}, {2.5}));
    v.push_back(makeOpCase(op, {i64Values({2}, {3, 4})}, a, 0));
  }
  if (op == "OneHot" && t == DataType::kFLOAT) {
    v.push_back(makeOpCase(op, {i64Values({3}, {0, 2, -1}), i64Values({}, {4}), floatValues(t, {2}, {0, 1})}, {}, 1));
  }
  return v;
}

inline std::vector<OpCase> normReduceCases(const std::string& op, DataType t) {
  std::vector<OpCase> v;
  if (!isFloatCaseType(t) && op.rfind("Reduce", 0) != 0 && op != "ArgMax" && op != "ArgMin" && op != "TopK" &&
      op != "CumSum" && op != "CumProd")
    return v;
  Attributes a;
  const HostTensor x = uniformOfType({2, 3, 5, 8}, t, 51, -2, 2);
  if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax" || op == "LpNormalization" ||
      op == "MeanVarianceNormalization")
    v.push_back(makeOpCase(op, {x}));
  if (op == "LayerNormalization") {
    a.set("axis", int64_t(-1));
    v.push_back(makeOpCase(op, {x, uniformOfType({8}, t, 52, 0.5, 1.5), uniformOfType({8}, t, 53, -1, 1)}, a, 1));
  }
  if (op == "RMSNormalization") {
    a.set("axis", int64_t(-1));
    v.push_back(makeOpCase(op, {x, uniformOfType({8}, t, 54, 0.5, 1.5)}, a, 1));
    // A row of 13 (a masked tail after one 8-wide vector), normalized over the last two dims.
    a.set("axis", int64_t(-2));
    v.push_back(makeOpCase(op, {uniformOfType({3, 1, 13}, t, 64, -2, 2), uniformOfType({1, 13}, t, 65, 0.5, 1.5)}, a, 1));
  }
  if (op == "GroupNormalization" || op == "InstanceNormalization") {
    HostTensor y = uniformOfType({2, 4, 3, 5}, t, 55, -2, 2);
    if (op == "GroupNormalization") a.set("num_groups", int64_t(2));
    v.push_back(makeOpCase(op, {y, uniformOfType({4}, t, 56, 0.5, 1.5), uniformOfType({4}, t, 57, -1, 1)}, a, 1));
  }
  if (op == "BatchNormalization")
    v.push_back(makeOpCase(op, {x, uniformOfType({3}, t, 58, 0.5, 1.5), uniformOfType({3}, t, 59, -1, 1),
                                uniformOfType({3}, t, 60, -1, 1), uniformOfType({3}, t, 61, 0.5, 2)}, {}, 1));
  if (op == "Det") v.push_back(makeOpCase(op, {uniformOfType({2, 3, 3}, t, 62, -2, 2)}));
  if (op.rfind("Reduce", 0) == 0) {
    const bool positive = op == "ReduceLogSum" || op == "ReduceProd";
    HostTensor y = uniformOfType({2, 3, 4, 8}, t, 63, positive ? 0.5 : -2, positive ? 1.5 : 2);
    for (auto axes : {std::vector<int64_t>{3}, std::vector<int64_t>{1, 2}}) {
      v.push_back(makeOpCase(op, {y, i64Values({static_cast<int64_t>(axes.size())}, axes)}));
      a.set("keepdims", int64_t(0));
      v.push_back(makeOpCase(op, {y, i64Values({static_cast<int64_t>(axes.size())}, axes)}, a));
    }
  }
  if (op == "ArgMax" || op == "ArgMin") {
    a.set("axis", int64_t(2));
    v.push_back(makeOpCase(op, {x}, a));
  }
  if (op == "TopK") v.push_back(makeOpCase(op, {x, i64Values({1}, {3})}, {}, 1, 2));
  if (op == "CumSum" || op == "CumProd") v.push_back(makeOpCase(op, {uniformOfType({3, 6}, t, 64, 0.5, 1.5), i64Values({}, {1})}));
  return v;
}

inline Attributes convAttrs(std::vector<int64_t> pads, std::vector<int64_t> strides, int64_t group) {
  Attributes a;
  a.set("pads", pads);
  a.set("strides", strides);
  a.set("group", group);
  return a;
}

inline std::vector<OpCase> computeCases(const std::string& op, DataType t) {
  std::vector<OpCase> v;
  if (!isFloatCaseType(t) || t == DataType::kDOUBLE) return v;
  if (op == "MatMul") {
    v.push_back(makeOpCase(op, {uniformOfType({2, 7, 24}, t, 71, -1, 1), uniformOfType({24, 16}, t, 72, -1, 1)}));  // B constant
    v.push_back(makeOpCase(op, {uniformOfType({2, 7, 24}, t, 73, -1, 1), uniformOfType({2, 24, 16}, t, 74, -1, 1)}, {}, 2));
  }
  if (op == "Gemm") {
    Attributes a;
    a.set("transB", int64_t(1));
    v.push_back(makeOpCase(op, {uniformOfType({9, 24}, t, 75, -1, 1), uniformOfType({16, 24}, t, 76, -1, 1),
                                uniformOfType({16}, t, 77, -1, 1)}, a));
  }
  if (op == "Conv" || op == "ConvTranspose") {
    auto conv = [&](Dims x, Dims w, Attributes a, uint32_t seed) {
      v.push_back(makeOpCase(op, {uniformOfType(x, t, seed, -1, 1), uniformOfType(w, t, seed + 1, -0.5, 0.5),
                                  uniformOfType({op == "Conv" ? w[0] : w[1] * a.getInt("group", 1)}, t, seed + 2, -1, 1)},
                             a));
    };
    if (op == "Conv") {
      conv({2, 8, 9, 11}, {16, 8, 3, 3}, convAttrs({1, 1, 1, 1}, {1, 1}, 1), 80);
      conv({2, 16, 10, 10}, {16, 1, 3, 3}, convAttrs({1, 1, 1, 1}, {2, 2}, 16), 83);  // depthwise
      conv({8, 16, 6, 6}, {24, 16, 1, 1}, convAttrs({0, 0, 0, 0}, {1, 1}, 1), 86);   // 1x1
      // 3x3 with a residual (fuse_residual's form): tactics that declare it run in place over R.
      conv({2, 8, 9, 11}, {16, 8, 3, 3}, convAttrs({1, 1, 1, 1}, {1, 1}, 1), 95);
      v.back().inputs.push_back(uniformOfType({2, 16, 9, 11}, t, 98, -1, 1));
      v.back().constant.push_back(false);
    } else {
      conv({2, 8, 5, 6}, {8, 4, 3, 3}, convAttrs({1, 1, 1, 1}, {2, 2}, 1), 89);
    }
  }
  if (op == "MaxPool" || op == "AveragePool" || op == "LpPool") {
    Attributes a = convAttrs({1, 1, 1, 1}, {2, 2}, 1);
    a.erase("group");
    a.set("kernel_shape", std::vector<int64_t>{3, 3});
    v.push_back(makeOpCase(op, {uniformOfType({2, 16, 11, 9}, t, 91, -2, 2)}, a));
  }
  if (op == "GlobalMaxPool" || op == "GlobalAveragePool" || op == "GlobalLpPool")
    v.push_back(makeOpCase(op, {uniformOfType({2, 16, 7, 5}, t, 92, -2, 2)}));
  if (op == "LRN") {
    Attributes a;
    a.set("size", int64_t(3));
    v.push_back(makeOpCase(op, {uniformOfType({2, 8, 5, 5}, t, 93, -2, 2)}, a));
  }
  if (op == "Resize" || op == "Upsample") {
    for (const char* mode : {"nearest", "linear"}) {
      Attributes a;
      a.set("mode", std::string(mode));
      HostTensor x = uniformOfType({2, 8, 5, 7}, t, 94, -2, 2);
      HostTensor scales = floatValues(DataType::kFLOAT, {4}, {1, 1, 2, 2});
      if (op == "Resize") v.push_back(makeOpCase(op, {x, HostTensor(), scales}, a));
      else v.push_back(makeOpCase(op, {x, scales}, a));
    }
  }
  return v;
}

//! Every case of `op` with element type `t` (empty when this file has none).
inline std::vector<OpCase> casesFor(const std::string& op, DataType t) {
  for (auto gen : {elementwiseCases, shapeCases, normReduceCases, computeCases}) {
    std::vector<OpCase> v = gen(op, t);
    if (!v.empty()) return v;
  }
  return {};
}

}  // namespace kiln::test
