// Small ONNX proto helpers shared by the node expander's files (node_expander*.cpp).
#pragma once
#include <string>
#include <vector>

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

}  // namespace kiln
