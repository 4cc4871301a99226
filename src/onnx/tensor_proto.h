// Conversions between ONNX TensorProto and kiln HostTensor.
#pragma once
#include <string>

#include "kiln/types.h"
#include "onnx.pb.h"

namespace kiln {

//! Maps an ONNX TensorProto.DataType to kiln's; throws UnsupportedError for types kiln lacks.
DataType fromOnnxType(int onnxType, const std::string& what);
//! Converts a tensor (raw or typed fields, or external data resolved against `baseDir`; empty
//! `baseDir` refuses external data).
HostTensor fromTensorProto(const onnx::TensorProto& t, const std::string& baseDir);
//! The value of a Constant node (attribute value, value_float(s) or value_int(s)); `name` names
//! the node in errors.
HostTensor constantNodeValue(const onnx::NodeProto& node, const std::string& name, const std::string& baseDir);

}  // namespace kiln
