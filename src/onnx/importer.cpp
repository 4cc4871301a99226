// ONNX importer: ModelProto -> Network. One generic path for every op: the node becomes a layer
// with the same op name and attributes; the op's `normalize` brings older opsets to the newest
// form. Ops without an OpDef are collected and reported together. Calls of model-local functions
// (ModelProto.functions) are inlined first, If branches inlined, Loops and Scans unrolled and
// sequence ops lowered to ops on the sequences' elements (node_expander.h); a node with no
// importer may be a registered plugin. Where an expansion needs a shape (a Scan's length), the
// nodes expanded so far are imported into a scratch network and their shapes inferred.
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <sys/stat.h>

#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "ir/network_bytes.h"
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

//! For the scratch networks of import-time shape inference: their problems are not the model's.
class SilentLogger : public ILogger {
 public:
  void log(Severity, const std::string&) noexcept override {}
};

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

//! A run-time Loop body's declared dims (an unknown or negative dim is -1): only a hint, since the
//! loop sets its inputs' dims from the values it runs with.
Dims declaredDims(const onnx::TypeProto_Tensor& tt) {
  Dims dims;
  for (const auto& d : tt.shape().dim()) dims.push_back(d.has_dim_value() && d.dim_value() >= 0 ? d.dim_value() : -1);
  return dims;
}

struct Importer {
  Network& net;
  std::string baseDir;
  ILogger& logger;
  OnnxParserOptions options;
  int opset = 0;
  std::map<std::string, int> domainOpsets;
  //! The model (its local functions serve the bodies of run-time Loops too).
  const onnx::ModelProto* model = nullptr;
  //! Importing a run-time Loop's body: its inputs' values and dims are known only when the loop
  //! runs, so import-time inference (inferAtImport) sees constants alone.
  bool loopBody = false;
  int bodyDepth = 0;  //!< nesting of run-time Loop bodies (bounded like the runtime's, ops/loop.cpp)

  Tensor* lookup(const std::string& name, const std::string& node) {
    Tensor* t = net.findTensor(name);
    if (!t)
      throw Error("node '" + node + "' reads tensor '" + name +
                  "', which is not produced by any node, initializer or graph input");
    return t;
  }

  // A sequence input becomes one network input per element (OnnxParserOptions::sequenceInputs).
  void importSequenceInput(const onnx::ValueInfoProto& vi, NodeExpander& expander) {
    const std::string what = "graph input '" + vi.name() + "'";
    auto given = options.sequenceInputs.find(vi.name());
    if (given == options.sequenceInputs.end())
      throw UnsupportedError(what + " is a sequence: kiln needs its elements' dims at import (OnnxParserOptions::sequenceInputs)");
    const auto& elem = vi.type().sequence_type().elem_type();
    if (!elem.has_tensor_type()) throw UnsupportedError(what + " is a sequence of non-tensors");
    const DataType type = fromOnnxType(elem.tensor_type().elem_type(), what);
    std::vector<std::string> names;
    for (size_t i = 0; i < given->second.size(); ++i) {
      const Dims& dims = given->second[i];
      if (elem.tensor_type().has_shape()) {
        const auto& shape = elem.tensor_type().shape();
        bool fits = shape.dim_size() == static_cast<int>(dims.size());
        for (int k = 0; fits && k < shape.dim_size(); ++k)
          fits = !shape.dim(k).has_dim_value() || shape.dim(k).dim_value() == dims[static_cast<size_t>(k)];
        if (!fits) throw Error(what + ": element " + std::to_string(i) + " dims " + toString(dims) + " do not fit the model's element shape");
      }
      for (int64_t d : dims)
        if (d < -1 || d > (int64_t(1) << 40)) throw Error(what + ": element " + std::to_string(i) + " has an invalid dimension");
      names.push_back(sequenceElementName(vi.name(), i));
      if (net.findTensor(names.back())) throw Error("duplicate tensor name '" + names.back() + "'");
      net.addInput(names.back(), type, dims);
    }
    expander.sequences[vi.name()] = names;
  }

  void importValueInfoInput(const onnx::ValueInfoProto& vi) {
    if (!vi.type().has_tensor_type())
      throw UnsupportedError("graph input '" + vi.name() + "' is not a tensor (maps and optionals are not supported)");
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

  // Layers first (outputs named as in the model), then wire inputs by name, so that a node may
  // read a tensor produced later in the list (the graph is topologically sorted after).
  void importNodes(const std::vector<const onnx::NodeProto*>& nodes) {
    std::vector<std::string> unsupported;
    std::vector<std::pair<Layer*, const onnx::NodeProto*>> created;
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
      const bool runtimeLoop = !plugin && isDefaultDomain(dom) && node.op_type() == "Loop";
      for (const auto& a : node.attribute()) {
        if (plugin && a.name() == "plugin_version") continue;
        if (runtimeLoop && a.name() == "body") continue;  // below, once kiln_outer is known
        attrs.set(a.name(), convertAttribute(a, name, baseDir));
      }
      if (runtimeLoop) importLoopBody(node, name, attrs);
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
  }

  // Import-time shape inference for the node expander: the nodes expanded so far, imported into
  // a scratch network over the same inputs and initializers, their shapes inferred and small
  // values folded. Any problem means "not known at import".
  bool inferAtImport(const std::string& name, const std::vector<const onnx::NodeProto*>& sofar, Dims& dims, HostTensor& value,
                     DataType* type = nullptr) {
    Network scratch;
    SilentLogger quiet;
    Importer sub{scratch, baseDir, quiet, options, opset, domainOpsets, model, loopBody, bodyDepth};
    try {
      for (const auto& t : net.tensors()) {
        if (t->isInput && !loopBody) scratch.addInput(t->name, t->type, t->dims);
        else if (t->isConstant() && !t->producer) scratch.addConstant(t->name, t->value);
      }
      sub.importNodes(sofar);
      scratch.topoSort();
    } catch (const std::exception&) {
      return false;
    }
    for (const auto& l : scratch.layers()) {
      try {
        inferLayerInPlace(*l, /*fold=*/true);
      } catch (const std::exception&) {
        // its outputs stay unknown, and so do those that depend on them
      }
    }
    Tensor* t = scratch.findTensor(name);
    if (!t || !t->dimsKnown) return false;
    dims = t->dims;
    value = t->value;
    if (type) *type = t->type;
    return true;
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
    this->model = &model;
    importGraph(model.graph(), {});
  }

  // A body input: its type when declared (float otherwise) and dims when given; the loop sets
  // both from the values it runs with.
  void importBodyInput(const onnx::ValueInfoProto& vi, const std::string& loop) {
    if (vi.type().has_sequence_type() || vi.type().has_optional_type() || vi.type().has_map_type())
      throw UnsupportedError("Loop node '" + loop + "': body input '" + vi.name() + "' is not a tensor (sequences and optionals are "
                             "supported only in loops unrolled at import)");
    DataType type = DataType::kFLOAT;
    Dims dims;
    if (vi.type().has_tensor_type()) {
      const auto& tt = vi.type().tensor_type();
      if (tt.elem_type()) type = fromOnnxType(tt.elem_type(), "body input '" + vi.name() + "'");
      if (tt.has_shape()) dims = declaredDims(tt);
    }
    if (net.findTensor(vi.name())) throw Error("Loop node '" + loop + "': duplicate body input '" + vi.name() + "'");
    net.addInput(vi.name(), type, dims);
  }

  // A run-time Loop's body (ops/loop.cpp): imported as a network of its own, with inputs [iter_num,
  // cond, carried..., the enclosing scopes' tensors it reads (kiln_outer)...], stored as bytes in
  // the attribute `body`; `num_outer` counts the last kind.
  void importLoopBody(const onnx::NodeProto& node, const std::string& name, Attributes& attrs) {
    const onnx::GraphProto* g = nullptr;
    for (const auto& a : node.attribute())
      if (a.name() == "body" && a.has_g()) g = &a.g();
    if (!g) throw Error("Loop node '" + name + "' has no body graph");
    const std::vector<std::string> outer = attrs.has("kiln_outer") ? attrs.getStrings("kiln_outer") : std::vector<std::string>{};
    if (node.input_size() < 2 + static_cast<int>(outer.size()))
      throw Error("Loop node '" + name + "': fewer inputs than the tensors its body reads from enclosing scopes");
    if (bodyDepth >= 32) throw Error("Loop node '" + name + "': Loop bodies nest more than 32 deep");
    Network body;
    Importer sub{body, baseDir, logger, options, opset, domainOpsets, model, true, bodyDepth + 1};
    sub.importGraph(*g, outer, name);
    std::vector<uint8_t> bytes = serializeNetwork(body);
    HostTensor t(DataType::kUINT8, {static_cast<int64_t>(bytes.size())});
    if (!bytes.empty()) std::memcpy(t.data(), bytes.data(), bytes.size());
    attrs.set("body", t);
    attrs.set("num_outer", static_cast<int64_t>(outer.size()));
  }

  // The graph's initializers, inputs, nodes (expanded) and outputs. For a Loop body (`loop`
  // names the node), `outer` are the enclosing scopes' tensors it reads, inputs after its own.
  void importGraph(const onnx::GraphProto& g, const std::vector<std::string>& outer, const std::string& loop = "") {
    std::set<std::string> initNames;
    for (const auto& init : g.initializer()) {
      if (init.name().empty()) throw Error("an initializer has no name");
      if (!initNames.insert(init.name()).second) throw Error("duplicate initializer '" + init.name() + "'");
      net.addConstant(init.name(), fromTensorProto(init, baseDir));
      if (net.findTensor(init.name())->name != init.name()) throw Error("duplicate tensor name '" + init.name() + "'");
    }
    if (g.sparse_initializer_size()) throw UnsupportedError("sparse initializers are not supported");
    NodeExpander expander;
    for (const auto& in : g.input()) {
      if (initNames.count(in.name())) continue;  // IR < 4 lists initializers as inputs
      if (loopBody) importBodyInput(in, loop);
      else if (in.type().has_sequence_type()) importSequenceInput(in, expander);
      else importValueInfoInput(in);
    }
    for (const auto& o : outer) {
      if (net.findTensor(o)) throw Error("Loop node '" + loop + "': its body defines '" + o + "' and reads it from an enclosing scope");
      net.addInput(o, DataType::kFLOAT, {});
    }

    expander.baseDir = baseDir;
    expander.opset = opset;
    expander.pluginReplaces = [this](const onnx::NodeProto& n) { return options.pluginOverride && findPlugin(n) != nullptr; };
    expander.initializerValue = [this](const std::string& n) {
      Tensor* t = net.findTensor(n);
      return t && t->isConstant() ? t->value : HostTensor();
    };
    expander.inferTensor = [this](const std::string& n, const std::vector<const onnx::NodeProto*>& sofar, Dims& dims, HostTensor& value) {
      return inferAtImport(n, sofar, dims, value);
    };
    expander.inferType = [this](const std::string& n, const std::vector<const onnx::NodeProto*>& sofar, DataType& type) {
      Dims dims;
      HostTensor value;
      return inferAtImport(n, sofar, dims, value, &type);
    };
    for (const auto& f : model->functions()) {
      auto key = std::make_tuple(f.domain(), f.name(), f.overload());
      if (!expander.functions.emplace(key, &f).second)
        throw Error("model-local function '" + f.domain() + "::" + f.name() + "' is defined twice");
    }
    // The graph's nodes with function calls, If, Loop, Scan and sequence nodes expanded
    // (node_expander.h); the graph's own nodes are not copied.
    std::vector<const onnx::NodeProto*> nodes;
    for (const auto& node : g.node()) expander.expand(node, nullptr, nodes, 0);
    // Sequence outputs: one network output per element.
    std::map<std::string, std::vector<std::string>> sequenceOutputs;
    for (const auto& out : g.output())
      if (expander.stackedSequences.count(out.name()))
        throw UnsupportedError("graph output '" + out.name() + "' is a sequence whose length is known only at run time (a run-time "
                               "Loop's appended list): concatenate it in the model (ConcatFromSequence)");
    for (const auto& out : g.output())
      if (expander.sequences.count(out.name())) sequenceOutputs[out.name()] = expander.expandSequenceOutput(out.name(), nodes);
    importNodes(nodes);
    for (const auto& out : g.output()) {
      auto seq = sequenceOutputs.find(out.name());
      if (seq != sequenceOutputs.end()) {
        for (const std::string& e : seq->second) net.markOutput(net.findTensor(e));
        continue;
      }
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
      // A body output's declared type and dims: what the Loop layer reports when the body's shape
      // inference cannot tell (ops/loop.cpp).
      if (loopBody && out.type().has_tensor_type() && !t->dimsKnown) {
        const auto& tt = out.type().tensor_type();
        if (tt.elem_type()) t->type = fromOnnxType(tt.elem_type(), "body output '" + out.name() + "'");
        if (tt.has_shape()) {
          t->dims = declaredDims(tt);
          t->dimsKnown = true;
        }
      }
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

std::vector<HostTensor> readSequenceProtoFile(const std::string& path, std::string* name) {
  // SequenceProto (onnx-data.proto: name = 1, elem_type = 2, tensor_values = 3, other element
  // kinds 4-7) is read field by field: kiln's vendored onnx.proto holds only the model messages.
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("cannot open sequence file '" + path + "'");
  std::string buf((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(buf.data()), static_cast<int>(buf.size()));
  std::vector<HostTensor> out;
  const std::string bad = "'" + path + "' is not a valid ONNX SequenceProto";
  while (uint32_t tag = in.ReadTag()) {
    const uint32_t field = tag >> 3, wire = tag & 7;
    if (wire == 0) {
      uint64_t v;
      if (!in.ReadVarint64(&v)) throw Error(bad);
      if (field == 2 && v != 1) throw UnsupportedError("'" + path + "': sequences of non-tensors are not supported");
      continue;
    }
    if (wire != 2) throw Error(bad);
    uint32_t len;
    std::string bytes;
    if (!in.ReadVarint32(&len) || !in.ReadString(&bytes, static_cast<int>(len))) throw Error(bad);
    if (field == 1 && name) *name = bytes;
    if (field == 3) {
      onnx::TensorProto t;
      if (!t.ParseFromString(bytes)) throw Error(bad);
      out.push_back(fromTensorProto(t, dirOf(path)));
    } else if (field >= 4) {
      throw UnsupportedError("'" + path + "': sequences of non-tensors are not supported");
    }
  }
  if (!in.ConsumedEntireMessage()) throw Error(bad);
  return out;
}

}  // namespace kiln
