// Small ONNX proto helpers shared by the node expander's files (node_expander*.cpp).
#pragma once
#include <string>
#include <vector>

#include "kiln/types.h"
#include "onnx.pb.h"

namespace kiln {

inline bool isDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }
//! The graph attribute `attr` of a node; throws kiln::Error naming the node when it is missing.
const onnx::GraphProto* graphAttribute(const onnx::NodeProto& node, const std::string& attr, const std::string& name);
//! A scalar (rank 0) INT64, INT32 or BOOL tensor.
onnx::TensorProto scalarProto(int dataType, int64_t v);
const onnx::AttributeProto* findAttribute(const onnx::NodeProto& node, const std::string& attr);
int64_t intAttribute(const onnx::NodeProto& node, const std::string& attr, int64_t fallback);
std::vector<int64_t> intsAttribute(const onnx::NodeProto& node, const std::string& attr);
float floatAttribute(const onnx::NodeProto& node, const std::string& attr, float fallback);
//! Adds an INT, FLOAT or INTS attribute to a node made by an expansion.
void setAttribute(onnx::NodeProto& node, const std::string& attr, int64_t v);
void setAttribute(onnx::NodeProto& node, const std::string& attr, float v);
void setAttribute(onnx::NodeProto& node, const std::string& attr, const std::vector<int64_t>& v);
inline void setAttribute(onnx::NodeProto& node, const std::string& attr, int v) { setAttribute(node, attr, static_cast<int64_t>(v)); }
//! The TensorProto code of float32, float16, bfloat16 and float64; 0 for any other type.
int onnxFloatCode(DataType t);

}  // namespace kiln
