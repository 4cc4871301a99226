// ONNX importer: ModelProto -> Network. One generic path for every op: the node becomes a layer
// with the same op name and attributes; the op's `normalize` brings older opsets to the newest
// form. Ops without an OpDef are collected and reported together. Calls of model-local functions
// (ModelProto.functions) are inlined first, If branches inlined and constant-count Loops unrolled
// (node_expander.h); a node with no importer may be a registered plugin.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <sys/stat.h>

#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "kiln/onnx_parser.h"
#include "onnx/node_expander.h"
#include "onnx/tensor_proto.h"
#include "ops/op_registry.h"
#include "ops/shape_propagation.h"
#include "plugin/plugin_layer.h"

namespace kiln {

namespace {

constexpr int kNewestOpset = 28;
constexpr size_t kMaxModelBytes = size_t(1) << 31;  // protobuf's hard limit

bool isDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

AttrValue convertAttribute(const onnx::AttributeProto& a, const std::string& node, const std::string& baseDir) {
  using AP = onnx::AttributeProto;
  switch (a.type()) {
    case AP::INT: return a.i();
    case AP::FLOAT: return a.f();
    case AP::STRING: return a.s();
    case AP::INTS: return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case AP::FLOATS: return std::vector<float>(a.floats().begin(), a.floats().end());
    case AP::STRINGS: return std::vector<std::string>(a.strings().begin(), a.strings().end());
    case AP::TENSOR: return fromTensorProto(a.t(), baseDir);
    case AP::UNDEFINED:
      // Old exporters omit the type; infer it from which field is set.
      if (a.has_i()) return a.i();
      if (a.has_f()) return a.f();
      if (a.has_s()) return a.s();
      if (a.ints_size()) return std::vector<int64_t>(a.ints().begin(), a.ints().end());
      if (a.floats_size()) return std::vector<float>(a.floats().begin(), a.floats().end());
      if (a.has_t()) return fromTensorProto(a.t(), baseDir);
      break;
    default: break;
  }
  throw UnsupportedError("node '" + node + "': attribute '" + a.name() + "' of type " +
                         AP::AttributeType_Name(a.type()) + " is not supported (subgraphs, sparse tensors, type protos)");
}

struct Importer {
  Network& net;
  std::string baseDir;
  ILogger& logger;
  OnnxParserOptions options;
  int opset = 0;
  std::map<std::string, int> domainOpsets;

  Tensor* lookup(const std::string& name, const std::string& node) {
    Tensor* t = net.findTensor(name);
    if (!t)
      throw Error("node '" + node + "' reads tensor '" + name +
                  "', which is not produced by any node, initializer or graph input");
    return t;
  }

  void importValueInfoInput(const onnx::ValueInfoProto& vi) {
    if (!vi.type().has_tensor_type())
      throw UnsupportedError("graph input '" + vi.name() + "' is not a tensor (sequences/maps are not supported)");
    const auto& tt = vi.type().tensor_type();
    DataType type = fromOnnxType(tt.elem_type(), "graph input '" + vi.name() + "'");
    Dims dims;
    if (!tt.has_shape()) throw UnsupportedError("graph input '" + vi.name() + "' has no shape (unknown rank)");
    for (const auto& d : tt.shape().dim()) {
      if (d.has_dim_value()) {
        if (d.dim_value() < 0) throw Error("graph input '" + vi.name() + "' has a negative dimension");
        if (d.dim_value() > (int64_t(1) << 40))
          throw Error("graph input '" + vi.name() + "' has an absurd dimension " + std::to_string(d.dim_value()));
        dims.push_back(d.dim_value());
      } else {
        dims.push_back(-1);
      }
    }
    volume([&] { Dims s; for (int64_t x : dims) s.push_back(x < 0 ? 1 : x); return s; }());  // overflow check
    if (net.findTensor(vi.name())) throw Error("duplicate tensor name '" + vi.name() + "'");
    net.addInput(vi.name(), type, dims);
  }

  void run(const onnx::ModelProto& model) {
    for (const auto& os : model.opset_import()) domainOpsets[os.domain()] = static_cast<int>(os.version());
    if (domainOpsets.count("ai.onnx")) domainOpsets[""] = domainOpsets["ai.onnx"];
    if (!domainOpsets.count("")) {
      // IR v1/v2 models carry no opset at all: the oldest. A model importing only other domains
      // has no default-domain nodes; give it the newest so that its real problem is reported.
      domainOpsets[""] = model.opset_import_size() == 0 ? 1 : kNewestOpset;
    }
    opset = domainOpsets[""];
    if (opset > kNewestOpset)
      logger.log(ILogger::Severity::kWARNING, "model opset " + std::to_string(opset) + " is newer than kiln knows (" +
                                                  std::to_string(kNewestOpset) + "); importing with the newest semantics");
    if (opset < 7)
      logger.log(ILogger::Severity::kWARNING, "model opset " + std::to_string(opset) + " is older than 7; old forms are normalized where kiln knows them");

    const auto& g = model.graph();
    std::set<std::string> initNames;
    for (const auto& init : g.initializer()) {
      if (init.name().empty()) throw Error("an initializer has no name");
      if (!initNames.insert(init.name()).second) throw Error("duplicate initializer '" + init.name() + "'");
      net.addConstant(init.name(), fromTensorProto(init, baseDir));
      if (net.findTensor(init.name())->name != init.name()) throw Error("duplicate tensor name '" + init.name() + "'");
    }
    if (g.sparse_initializer_size()) throw UnsupportedError("sparse initializers are not supported");
    for (const auto& in : g.input()) {
      if (initNames.count(in.name())) continue;  // IR < 4 lists initializers as inputs
      importValueInfoInput(in);
    }

    // Layers first (outputs named as in the model), then wire inputs by name, so that a node
    // may read a tensor produced later in the list (the graph is topologically sorted after).
    std::vector<std::string> unsupported;
    std::vector<std::pair<Layer*, const onnx::NodeProto*>> created;
    NodeExpander expander;
    expander.baseDir = baseDir;
    expander.opset = opset;
    expander.pluginReplaces = [this](const onnx::NodeProto& n) { return options.pluginOverride && findPlugin(n) != nullptr; };
    expander.initializerValue = [this](const std::string& n) {
      Tensor* t = net.findTensor(n);
      return t && t->isConstant() ? t->value : HostTensor();
    };
    for (const auto& f : model.functions()) {
      auto key = std::make_tuple(f.domain(), f.name(), f.overload());
      if (!expander.functions.emplace(key, &f).second)
        throw Error("model-local function '" + f.domain() + "::" + f.name() + "' is defined twice");
    }
    // The graph's nodes with function calls, If and Loop nodes expanded (node_expander.h); the
    // graph's own nodes are not copied.
    std::vector<const onnx::NodeProto*> nodes;
    for (const auto& node : g.node()) expander.expand(node, nullptr, nodes, 0);
    int index = 0;
    for (const onnx::NodeProto* np : nodes) {
      const onnx::NodeProto& node = *np;
      std::string name = node.name().empty() ? node.op_type() + "_" + std::to_string(index) : node.name();
      ++index;
      const std::string& dom = node.domain();
      int nodeOpset = domainOpsets.count(dom) ? domainOpsets[dom] : (isDefaultDomain(dom) ? opset : 1);
      const OpDef* def = isDefaultDomain(dom) ? OpRegistry::instance().find(node.op_type()) : nullptr;
      bool constantNode = isDefaultDomain(dom) && node.op_type() == "Constant";
      bool builtIn = constantNode || (def && def->onnx && nodeOpset >= def->minOpset);
      std::shared_ptr<IPluginCreator> plugin;
      if (!builtIn || options.pluginOverride) plugin = findPlugin(node);
      if (!builtIn && !plugin) {
        unsupported.push_back("  node '" + name + "': op '" + node.op_type() + "', domain '" +
                              (dom.empty() ? "ai.onnx" : dom) + "', opset " + std::to_string(nodeOpset) +
                              ", plugin_version '" + pluginVersion(node) + "'");
        continue;
      }
      if (!unsupported.empty()) continue;  // keep scanning for the complete list
      for (const auto& out : node.output())
        if (!out.empty() && net.findTensor(out)) throw Error("tensor '" + out + "' is produced twice (node '" + name + "')");
      if (constantNode) {
        importConstant(node, name);
        continue;
      }
      Attributes attrs;
      for (const auto& a : node.attribute())
        if (!plugin || a.name() != "plugin_version") attrs.set(a.name(), convertAttribute(a, name, baseDir));
      Layer* l;
      if (plugin) {
        int nbOut = 0;
        l = net.addLayer(kPluginOp, {}, 0, makePluginLayerAttrs(name, *plugin, attrs, &nbOut), name);
        if (nbOut != node.output_size())
          throw Error("node '" + name + "': plugin '" + plugin->name() + "' has " + std::to_string(nbOut) +
                      " outputs but the node has " + std::to_string(node.output_size()));
        for (const auto& in : node.input())
          if (in.empty()) throw Error("node '" + name + "': plugin nodes cannot omit inputs");
      } else {
        l = net.addLayer(node.op_type(), {}, 0, std::move(attrs), name);
      }
      for (const auto& out : node.output()) {
        Tensor* t = net.newTensor(out.empty() ? name + ":unused" : out);
        t->producer = l;
        l->outputs.push_back(t);
      }
      created.emplace_back(l, &node);
    }
    if (!unsupported.empty()) {
      std::ostringstream m;
      m << unsupported.size() << " node(s) have no kiln importer and no registered plugin:\n";
      for (auto& u : unsupported) m << u << "\n";
      m << "Register a plugin for each of these ops (kiln/plugin.h: name = op type, namespace = domain, version = "
           "the node's plugin_version attribute; load plugin libraries with --plugins) or remove them from the model.";
      throw UnsupportedError(m.str());
    }
    for (auto& [l, node] : created) {
      for (const auto& in : node->input()) l->inputs.push_back(in.empty() ? nullptr : lookup(in, l->name));
      const OpDef* def = OpRegistry::instance().find(l->op);
      if (def && def->normalize) {
        try {
          def->normalize(net, *l, opset);
        } catch (const UnsupportedError&) {
          throw;
        } catch (const Error& e) {
          throw Error("node '" + l->name + "' (" + l->op + "): " + e.what());
        }
      }
      // Pre-opset-7 forms (legacy broadcast with `axis`) need the ranks of earlier layers'
      // outputs while importing: infer each layer as it is normalized (best effort; the builder
      // infers everything again).
      if (opset < 7) {
        try {
          inferLayerInPlace(*l, /*fold=*/false);
        } catch (const Error&) {
          // inputs not known yet (a producer later in the node list): the builder infers again
        }
      }
    }
    for (const auto& out : g.output()) {
      Tensor* t = net.findTensor(out.name());
      if (!t) throw Error("graph output '" + out.name() + "' is not produced by any node");
      if (t->isInput || t->isConstant() || t->isOutput) {
        // Outputs must be produced by a layer: route through an Identity. A constant source is
        // renamed so that the output keeps the model's name.
        Layer* id = net.addLayer("Identity", {t}, 1, {}, "output_identity_" + out.name());
        if (!t->isInput && !t->isOutput) {
          net.renameTensor(t, net.uniqueName(out.name() + "_value"));
          net.renameTensor(id->outputs[0], out.name());
        }
        t = id->outputs[0];
      }
      net.markOutput(t);
    }
    net.topoSort();
  }

  static std::string pluginVersion(const onnx::NodeProto& node) {
    for (const auto& a : node.attribute())
      if (a.name() == "plugin_version") {
        if (a.type() == onnx::AttributeProto::INT || (a.type() == onnx::AttributeProto::UNDEFINED && a.has_i()))
          return std::to_string(a.i());
        return a.s();
      }
    return "1";
  }

  std::shared_ptr<IPluginCreator> findPlugin(const onnx::NodeProto& node) const {
    std::string ns = isDefaultDomain(node.domain()) ? "" : node.domain();
    return getPluginRegistry().findCreator(node.op_type(), pluginVersion(node), ns);
  }

  void importConstant(const onnx::NodeProto& node, const std::string& name) {
    if (node.output_size() != 1) throw Error("Constant node '" + name + "' must have one output");
    HostTensor v = constantNodeValue(node, name, baseDir);
    Tensor* t = net.addConstant(node.output(0), v);
    if (t->name != node.output(0)) throw Error("tensor '" + node.output(0) + "' is produced twice");
  }
};

std::string dirOf(const std::string& path) {
  size_t p = path.find_last_of('/');
  return p == std::string::npos ? "." : (p == 0 ? "/" : path.substr(0, p));
}

void parseModel(const void* data, size_t size, Network& network, const std::string& baseDir, ILogger& logger,
                const OnnxParserOptions& options) {
  if (size > kMaxModelBytes) throw Error("model is larger than 2 GiB: store weights as external data");
  onnx::ModelProto model;
  google::protobuf::io::ArrayInputStream raw(data, static_cast<int>(size));
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(static_cast<int>(std::min<size_t>(kMaxModelBytes - 1, INT32_MAX)));
  if (!model.ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage())
    throw Error("malformed ONNX model: the file is not a valid ModelProto (truncated or corrupt protobuf)");
  if (!model.has_graph()) throw Error("malformed ONNX model: no graph");
  Importer imp{network, baseDir, logger, options, 0, {}};
  imp.run(model);
}

}  // namespace

void parseOnnxBuffer(const void* data, size_t size, Network& network, const std::string& baseDir, ILogger& logger,
                     const OnnxParserOptions& options) {
  parseModel(data, size, network, baseDir, logger, options);
}

void parseOnnxFile(const std::string& path, Network& network, ILogger& logger, const OnnxParserOptions& options) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) throw Error("cannot open ONNX model '" + path + "'");
  if (!S_ISREG(st.st_mode)) throw Error("'" + path + "' is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > kMaxModelBytes) throw Error("model '" + path + "' is larger than 2 GiB");
  std::ifstream f(path, std::ios::binary);
  std::string buf(static_cast<size_t>(st.st_size), '\0');
  f.read(buf.data(), st.st_size);
  if (!f) throw Error("cannot read ONNX model '" + path + "'");
  parseModel(buf.data(), buf.size(), network, dirOf(path), logger, options);
}

HostTensor readTensorProtoFile(const std::string& path, std::string* name) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open tensor file '" + path + "'");
  std::string buf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  onnx::TensorProto t;
  if (!t.ParseFromString(buf)) throw Error("'" + path + "' is not a valid ONNX TensorProto");
  if (name) *name = t.name();
  return fromTensorProto(t, dirOf(path));
}

}  // namespace kiln
