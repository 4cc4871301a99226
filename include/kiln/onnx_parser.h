// ONNX importer: ModelProto -> Network.
#pragma once
#include <string>

#include "kiln/logger.h"
#include "kiln/network.h"

namespace kiln {

//! Parses an ONNX model file into `network`. Throws kiln::Error; when ops have neither an
//! importer nor a registered plugin, the error lists every such node.
void parseOnnxFile(const std::string& path, Network& network, ILogger& logger = defaultLogger());
//! Parses a serialized ModelProto held in memory; external data is resolved against `baseDir`
//! (empty: external data is refused).
void parseOnnxBuffer(const void* data, size_t size, Network& network, const std::string& baseDir = "",
                     ILogger& logger = defaultLogger());
//! Reads a serialized ONNX TensorProto (.pb) into a host tensor.
HostTensor readTensorProtoFile(const std::string& path, std::string* name = nullptr);

}  // namespace kiln
