// The QLinearConv / QLinearMatMul cases of the CPU (test_qlinear.cpp) and CUDA
// (test_cuda_qlinear.cpp) suites: the forms the Q/DQ lowering produces, with constant weights and
// scalars.
#pragma once
#include <string>

#include "op_test_util.h"
#include "ops/fused_attrs.h"
#include "ops/qlinear.h"

namespace kiln::test {

inline HostTensor scalarF(float v) {
  HostTensor t(DataType::kFLOAT, {});
  *t.as<float>() = v;
  return t;
}
inline HostTensor scalarOf(DataType type, int v) {
  HostTensor t(type, {});
  if (type == DataType::kINT8) *t.as<int8_t>() = static_cast<int8_t>(v);
  else *t.as<uint8_t>() = static_cast<uint8_t>(v);
  return t;
}

struct Form {
  DataType x, y;  // y kFLOAT: float output (y_scale omitted)
  int xZero, yZero;
  bool perChannel, bias, relu;
};

//! x, x_scale, x_zp, w, w_scale, w_zp, [y_scale, y_zp], [bias], with constant weights and scalars.
inline OpCase qlinearCase(const std::string& op, const Dims& xDims, const Dims& wDims, int64_t channels, const Form& f, Attributes a) {
  OpCase c;
  c.op = op;
  const bool u8 = f.x == DataType::kUINT8;
  c.inputs.push_back(uniformOfType(xDims, f.x, 1, u8 ? 0 : -128, u8 ? 256 : 128));
  c.inputs.push_back(scalarF(0.02f));
  c.inputs.push_back(scalarOf(f.x, f.xZero));
  c.inputs.push_back(uniformOfType(wDims, DataType::kINT8, 2, -127, 128));
  c.inputs.push_back(f.perChannel ? uniformOfType({channels}, DataType::kFLOAT, 3, 0.001, 0.01) : scalarF(0.004f));
  c.inputs.push_back(f.perChannel ? HostTensor(DataType::kINT8, {channels}) : scalarOf(DataType::kINT8, 0));
  const bool quantOut = f.y != DataType::kFLOAT;
  c.inputs.push_back(quantOut ? scalarF(0.05f) : HostTensor());
  c.inputs.push_back(quantOut ? scalarOf(f.y, f.yZero) : HostTensor());
  c.inputs.push_back(f.bias ? uniformOfType({channels}, DataType::kINT32, 4, -3000, 3000) : HostTensor());
  while (!c.inputs.back().valid()) c.inputs.pop_back();
  c.constant.assign(c.inputs.size(), true);
  c.constant[0] = false;
  if (f.relu) setFusedActivation(a, Activation{ActKind::kRelu, 0.f, 0.f});
  c.attrs = std::move(a);
  return c;
}

//! QLinearConv case `c` with kiln's int8 residual R (inputs 9..11: random values of Y's dims `y`,
//! scale rs, zero point rz) appended.
inline OpCase withResidual(OpCase c, const Dims& y, float rs, int rz) {
  while (c.inputs.size() < 9) c.inputs.push_back(HostTensor());
  c.inputs.push_back(uniformOfType(y, DataType::kINT8, 9, -128, 128));
  c.inputs.push_back(scalarF(rs));
  c.inputs.push_back(scalarOf(DataType::kINT8, rz));
  c.constant.assign(c.inputs.size(), true);
  c.constant[0] = false;
  c.constant[9] = false;
  return c;
}

inline const Form kForms[] = {
    {DataType::kUINT8, DataType::kUINT8, 130, 0, true, true, false},    // quantize_static's default
    {DataType::kUINT8, DataType::kUINT8, 7, 120, false, true, true},    // per tensor, Relu, output zp
    {DataType::kINT8, DataType::kINT8, 0, 0, false, true, false},       // symmetric int8 activations
    {DataType::kINT8, DataType::kINT8, 5, -3, true, false, true},
    {DataType::kUINT8, DataType::kFLOAT, 128, 0, true, true, false},    // float output (no Q after)
};

inline std::string formName(const Form& f) {
  return std::string(toString(f.x)) + "->" + toString(f.y) + " xzp " + std::to_string(f.xZero) + " yzp " + std::to_string(f.yZero) +
         (f.perChannel ? " per-channel" : " per-tensor") + (f.bias ? " bias" : "") + (f.relu ? " relu" : "");
}

}  // namespace kiln::test
