// ONNX importer: ModelProto -> Network.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "kiln/logger.h"
#include "kiln/network.h"

namespace kiln {

struct OnnxParserOptions {
  //! A node whose op kiln imports natively is still imported as a plugin when a plugin is
  //! registered for it (name = op type, namespace = domain, version = `plugin_version`).
  bool pluginOverride = false;
  //! Graph inputs of sequence type: the dims of each element, in order (the sequence's length is
  //! the number of entries). kiln lowers a sequence at import to its elements, so each element
  //! becomes a network input named sequenceElementName(name, i); a sequence input not listed here
  //! is refused. Sequence outputs likewise become outputs sequenceElementName(name, i).
  std::map<std::string, std::vector<Dims>> sequenceInputs;
};

//! The name of element i of a sequence graph input or output once lowered: "name[i]".
std::string sequenceElementName(const std::string& sequence, size_t i);

//! Parses an ONNX model file into `network`. Throws kiln::Error; when ops have neither an
//! importer nor a registered plugin, the error lists every such node.
//! Plugin fallback: a node with no built-in importer is looked up in the plugin registry by its
//! op type (name), its domain (namespace; "" for the default domain) and its `plugin_version`
//! attribute (string or int, default "1"); its other attributes become the plugin's fields.
void parseOnnxFile(const std::string& path, Network& network, ILogger& logger = defaultLogger(),
                   const OnnxParserOptions& options = {});
//! Parses a serialized ModelProto held in memory; external data is resolved against `baseDir`
//! (empty: external data is refused).
void parseOnnxBuffer(const void* data, size_t size, Network& network, const std::string& baseDir = "",
                     ILogger& logger = defaultLogger(), const OnnxParserOptions& options = {});
//! Reads a serialized ONNX TensorProto (.pb) into a host tensor.
HostTensor readTensorProtoFile(const std::string& path, std::string* name = nullptr);
//! Reads a serialized ONNX SequenceProto (.pb) of tensors into host tensors.
std::vector<HostTensor> readSequenceProtoFile(const std::string& path, std::string* name = nullptr);

}  // namespace kiln
