#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>

#include "ops/fused_attrs.h"
#include "ops/op_registry.h"
#include "plugin/plugin_layer.h"
#include "runtime/engine_impl.h"

namespace kiln {

EngineImpl::~EngineImpl() {
  for (void* p : ownedDeviceConstants) backend->release(p);
}

std::unique_ptr<EngineImpl> instantiateEngine(EngineGraph graph, ILogger& logger, int threads, int deviceIndex) {
  auto e = std::make_unique<EngineImpl>();
  e->logger = &logger;
  if (threads >= 0) graph.threads = threads;
  const bool gpuIndex = graph.device == DeviceType::kGPU && deviceIndex >= 0;
  e->backend = getBackend(graph.device, graph.threads, gpuIndex ? deviceIndex : -1);
  // Kernels and contexts use the calling thread's current device: make the chosen one current.
  if (gpuIndex) e->backend->makeCurrent();
  if (e->backend->fingerprint() != graph.fingerprint)
    throw Error("plan was built for device '" + graph.fingerprint + "' but this device is '" + e->backend->fingerprint() +
                "'; rebuild the engine on this device");
  e->graph = std::move(graph);
  const EngineGraph& g = e->graph;
  std::vector<std::pair<std::string, const Attributes*>> pluginLayers;
  for (const auto& l : g.layers)
    if (l.op == kPluginOp) pluginLayers.emplace_back(l.name, &l.attrs);
  checkPluginsRegistered(pluginLayers);  // one error naming every missing plugin
  checkPlanShapes(g);                    // before any kernel reads a layer's attributes
  for (int i : g.inputs) e->ioByName[g.tensors[i].name] = i;
  for (int o : g.outputs) e->ioByName[g.tensors[o].name] = o;
  e->kernels.assign(g.profiles.size(), std::vector<const Kernel*>(g.layers.size(), nullptr));
  e->bucketKernels.assign(g.profiles.size(), std::vector<std::vector<std::pair<int64_t, const Kernel*>>>(g.layers.size()));
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const EngineLayer& l = g.layers[i];
    LayerDesc d = buildTimeDesc(g, i);
    std::vector<Tactic> tactics;
    std::map<std::string, const Kernel*> made;  // tactic -> kernel, shared by profiles and size buckets
    auto kernelOf = [&](const std::string& name) {
      auto it = made.find(name);
      if (it == made.end()) {
        if (tactics.empty()) {
          tactics = e->backend->tactics(d);
          for (Tactic& t : e->backend->fallbackTactics(d)) tactics.push_back(std::move(t));
        }
        std::unique_ptr<Kernel> k;
        for (auto& t : tactics)
          if (t.name == name) {
            k = t.create(d);
            break;
          }
        if (!k) throw Error("layer '" + l.name + "' (" + l.op + "): tactic '" + name + "' is not available in this build of kiln");
        it = made.emplace(name, k.get()).first;
        e->ownedKernels.push_back(std::move(k));
      }
      return it->second;
    };
    for (size_t p = 0; p < g.profiles.size(); ++p) {
      const TacticChoice& c = l.choices.at(p);
      e->kernels[p][i] = kernelOf(c.tactic);
      for (const TacticBucket& b : c.buckets) e->bucketKernels[p][i].emplace_back(b.maxSize, kernelOf(b.tactic));
    }
  }
  // Constants: the CPU reads the plan's host buffers. The GPU uploads a constant unless every
  // kernel that reads it keeps its own device copy (repacked weights: Kernel::holdsInput), so
  // weights are not on the device twice.
  e->constantData.assign(g.tensors.size(), nullptr);
  std::vector<bool> read(g.tensors.size(), false);
  for (int o : g.outputs) read[o] = true;
  for (size_t i = 0; i < g.layers.size(); ++i)
    for (size_t k = 0; k < g.layers[i].inputs.size(); ++k) {
      const int t = g.layers[i].inputs[k];
      if (t < 0) continue;
      for (size_t p = 0; p < e->kernels.size(); ++p) {
        read[t] = read[t] || !e->kernels[p][i]->holdsInput(k);
        for (const auto& [maxSize, bk] : e->bucketKernels[p][i]) read[t] = read[t] || !bk->holdsInput(k);
      }
    }
  for (size_t t = 0; t < g.tensors.size(); ++t) {
    const auto& v = g.tensors[t].value;
    if (!v.valid()) continue;
    if (g.device == DeviceType::kCPU) {
      e->constantData[t] = v.data();
    } else if (read[t]) {
      void* p = e->backend->allocate(v.bytes());
      e->ownedDeviceConstants.push_back(p);
      e->backend->copyToDevice(p, v.data(), v.bytes(), nullptr);
      e->constantData[t] = p;
    }
  }
  return e;
}

Engine::Engine(std::unique_ptr<EngineImpl> i) : impl(std::move(i)) {}
Engine::~Engine() = default;

std::unique_ptr<Engine> Engine::deserialize(const void* data, size_t size, ILogger& logger, int threads) {
  return deserialize(data, size, -1, logger, threads);
}

std::unique_ptr<Engine> Engine::deserialize(const void* data, size_t size, int deviceIndex, ILogger& logger, int threads) {
  EngineGraph g = deserializePlan(data, size);
  return std::make_unique<Engine>(instantiateEngine(std::move(g), logger, threads, deviceIndex));
}

std::vector<uint8_t> Engine::serialize() const { return serializePlan(impl->graph); }

int Engine::getNbIOTensors() const { return static_cast<int>(impl->graph.inputs.size() + impl->graph.outputs.size()); }

std::string Engine::getIOTensorName(int index) const {
  const auto& g = impl->graph;
  if (index < 0 || index >= getNbIOTensors()) throw Error("I/O tensor index " + std::to_string(index) + " out of range");
  size_t i = static_cast<size_t>(index);
  return i < g.inputs.size() ? g.tensors[g.inputs[i]].name : g.tensors[g.outputs[i - g.inputs.size()]].name;
}

namespace {
int ioIndex(const EngineImpl& e, const std::string& name) {
  auto it = e.ioByName.find(name);
  if (it == e.ioByName.end()) throw Error("'" + name + "' is not an input or output of the engine");
  return it->second;
}
//! A JSON number, or null for NaN/inf (which JSON cannot hold).
std::string jsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream o;
  o << v;
  return o.str();
}

std::string jsonEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') { o += '\\'; o += c; }
    else if (static_cast<unsigned char>(c) < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); o += b; }
    else o += c;
  }
  return o;
}
}  // namespace

TensorIOMode Engine::getTensorIOMode(const std::string& name) const {
  auto it = impl->ioByName.find(name);
  if (it == impl->ioByName.end()) return TensorIOMode::kNONE;
  return impl->graph.tensors[it->second].isInput ? TensorIOMode::kINPUT : TensorIOMode::kOUTPUT;
}
DataType Engine::getTensorDataType(const std::string& name) const { return impl->graph.tensors[ioIndex(*impl, name)].type; }
Dims Engine::getTensorShape(const std::string& name) const { return impl->graph.tensors[ioIndex(*impl, name)].dims; }
Dims Engine::getProfileShape(const std::string& input, OptProfileSelector s) const { return getProfileShape(input, 0, s); }
Dims Engine::getProfileShape(const std::string& input, int profile, OptProfileSelector s) const {
  const auto& profiles = impl->graph.profiles;
  if (profile < 0 || static_cast<size_t>(profile) >= profiles.size())
    throw Error("optimization profile " + std::to_string(profile) + " does not exist (the engine has " + std::to_string(profiles.size()) + ")");
  auto it = profiles[profile].find(ioIndex(*impl, input));
  if (it == profiles[profile].end()) return {};
  return s == OptProfileSelector::kMIN ? it->second.min : s == OptProfileSelector::kOPT ? it->second.opt : it->second.max;
}
int Engine::getNbOptimizationProfiles() const { return static_cast<int>(impl->graph.profiles.size()); }
DeviceType Engine::device() const { return impl->graph.device; }
int Engine::getDeviceIndex() const { return impl->backend->deviceIndex(); }
int Engine::getNbLayers() const { return static_cast<int>(impl->graph.layers.size()); }
size_t Engine::getDeviceMemorySize() const { return impl->graph.arenaBytes; }

size_t Engine::getDeviceMemorySizeForProfile(int profile) const {
  const EngineGraph& g = impl->graph;
  if (profile < 0 || static_cast<size_t>(profile) >= g.profiles.size())
    throw Error("optimization profile " + std::to_string(profile) + " does not exist (the engine has " +
                std::to_string(g.profiles.size()) + ")");
  size_t bytes = 0;
  for (auto sel : {&ProfileRange::opt, &ProfileRange::max}) {
    std::map<int, Dims> dims;
    for (const auto& [t, range] : g.profiles[profile]) dims[t] = range.*sel;
    ResolvedShapes r = resolveShapes(g, dims, &g.profiles[profile], nullptr, /*lenient=*/true);
    bytes = std::max(bytes, planMemory(g, r, static_cast<size_t>(profile)).arenaBytes);
  }
  return bytes;
}

size_t Engine::getWeightBytes() const {
  size_t n = 0;
  for (const EngineTensor& t : impl->graph.tensors)
    if (t.value.valid()) n += t.value.bytes();
  return n;
}
int Engine::getNbAuxStreams() const { return impl->graph.auxStreams; }

DevicePeak Engine::getDevicePeak() const { return impl->backend->peak(); }

namespace {

//! ',"quantization":{...}' for the integer and Q/DQ layers: the scales and zero points they use
//! (per-channel scales as count, min and max), else "".
std::string quantizationJson(const EngineGraph& g, const EngineLayer& l) {
  auto value = [&](size_t input) -> const HostTensor* {
    if (input >= l.inputs.size() || l.inputs[input] < 0) return nullptr;
    const HostTensor& v = g.tensors[l.inputs[input]].value;
    return v.valid() && v.count() > 0 ? &v : nullptr;
  };
  auto field = [&](const char* name, size_t input) {
    const HostTensor* v = value(input);
    if (!v) return std::string();
    std::ostringstream o;
    o << ",\"" << name << "\":";
    if (v->count() == 1) {
      o << jsonNumber(v->getDouble(0));
    } else {
      double lo = v->getDouble(0), hi = lo;
      for (int64_t i = 1; i < v->count(); ++i) lo = std::min(lo, v->getDouble(i)), hi = std::max(hi, v->getDouble(i));
      o << "{\"count\":" << v->count() << ",\"min\":" << jsonNumber(lo) << ",\"max\":" << jsonNumber(hi) << "}";
    }
    return o.str();
  };
  std::string f;
  if (l.op == "QLinearConv" || l.op == "QLinearMatMul")
    f = field("x_scale", 1) + field("x_zero_point", 2) + field("w_scale", 4) + field("w_zero_point", 5) + field("y_scale", 6) +
        field("y_zero_point", 7);
  else if (l.op == "QuantizeLinear" || l.op == "DequantizeLinear")
    f = field("scale", 1) + field("zero_point", 2);
  // The FP8 family keeps its per-tensor scales as attributes (ops/fp8_matmul.cpp).
  for (const char* a : {"x_scale", "w_scale", "y_scale", "scale"})
    if ((l.op == "Fp8MatMul" || l.op == "Fp8Quantize") && l.attrs.has(a))
      f += std::string(",\"") + a + "\":" + jsonNumber(l.attrs.getFloat(a, 0.f));
  return f.empty() ? f : ",\"quantization\":{" + f.substr(1) + "}";
}

//! ',"parameters":{...}': the layer's scalar attributes and short lists (as trtexec's detailed
//! layer information has them: is_causal, scale, kernel_shape, ...); tensors and long lists are
//! left out (they are weights or kiln's own tables, not parameters a user reads).
std::string parametersJson(const Attributes& attrs) {
  constexpr size_t kMaxList = 16;
  std::ostringstream o;
  bool any = false;
  for (const auto& [name, v] : attrs.all()) {
    std::ostringstream e;
    if (auto* i = std::get_if<int64_t>(&v)) e << *i;
    else if (auto* f = std::get_if<float>(&v)) e << jsonNumber(*f);
    else if (auto* str = std::get_if<std::string>(&v); str && str->size() <= 256) e << "\"" << jsonEscape(*str) << "\"";
    else if (auto* is = std::get_if<std::vector<int64_t>>(&v); is && is->size() <= kMaxList) {
      e << "[";
      for (size_t k = 0; k < is->size(); ++k) e << (k ? "," : "") << (*is)[k];
      e << "]";
    } else if (auto* fs = std::get_if<std::vector<float>>(&v); fs && fs->size() <= kMaxList) {
      e << "[";
      for (size_t k = 0; k < fs->size(); ++k) e << (k ? "," : "") << jsonNumber((*fs)[k]);
      e << "]";
    } else {
      continue;
    }
    o << (any ? "," : "") << "\"" << jsonEscape(name) << "\":" << e.str();
    any = true;
  }
  return any ? ",\"parameters\":{" + o.str() + "}" : std::string();
}

}  // namespace

std::string Engine::getLayerInformation() const {
  const auto& g = impl->graph;
  std::ostringstream s;
  auto tensorJson = [&](int t) {
    if (t < 0) return std::string("null");
    const auto& et = g.tensors[t];
    std::ostringstream o;
    o << "{\"name\":\"" << jsonEscape(et.name) << "\",\"dtype\":\"" << toString(et.type) << "\",\"dims\":[";
    for (size_t k = 0; k < et.dims.size(); ++k) o << (k ? "," : "") << et.dims[k];
    o << "]" << (et.value.valid() ? ",\"constant\":true" : "") << "}";
    return o.str();
  };
  s << "{\"device\":\"" << toString(g.device) << "\",\"fingerprint\":\"" << jsonEscape(g.fingerprint)
    << "\",\"threads\":" << g.threads << ",\"auxStreams\":" << g.auxStreams << ",\"arenaBytes\":" << g.arenaBytes
    << ",\"optimizationProfiles\":" << g.profiles.size() << ",\"layers\":[";
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const auto& l = g.layers[i];
    s << (i ? "," : "") << "\n{\"name\":\"" << jsonEscape(l.name) << "\",\"op\":\"" << jsonEscape(l.op) << "\",\"fusedOps\":[";
    for (size_t k = 0; k < l.fusedOps.size(); ++k) s << (k ? "," : "") << "\"" << jsonEscape(l.fusedOps[k]) << "\"";
    s << "],\"inputs\":[";
    for (size_t k = 0; k < l.inputs.size(); ++k) s << (k ? "," : "") << tensorJson(l.inputs[k]);
    s << "],\"outputs\":[";
    for (size_t k = 0; k < l.outputs.size(); ++k) s << (k ? "," : "") << tensorJson(l.outputs[k]);
    s << "]";
    s << parametersJson(l.attrs);
    if (hasLayouts(l.attrs))  // physical layouts (layout passes)
      s << ",\"layouts\":{\"in\":\"" << jsonEscape(inLayoutName(l.attrs)) << "\",\"out\":\""
        << jsonEscape(outLayoutName(l.attrs)) << "\"}";
    if (l.op == kPluginOp)
      s << ",\"plugin\":{\"name\":\"" << jsonEscape(l.attrs.getString(kPluginNameAttr, "")) << "\",\"version\":\""
        << jsonEscape(l.attrs.getString(kPluginVersionAttr, "")) << "\",\"namespace\":\""
        << jsonEscape(l.attrs.getString(kPluginNamespaceAttr, "")) << "\",\"library\":\""
        << jsonEscape(l.attrs.getString(kPluginLibraryAttr, "")) << "\"}";
    // "tactic" etc. are profile 0's (every engine has it); "profiles" lists each profile's choice
    // when there are several.
    // "tacticBuckets": the tactic per size range where the profile's shapes want several.
    auto buckets = [&](const TacticChoice& c) {
      if (c.buckets.empty()) return;
      s << ",\"tacticBuckets\":[";
      for (size_t b = 0; b < c.buckets.size(); ++b) {
        s << (b ? "," : "") << "{\"maxSize\":";
        if (c.buckets[b].maxSize == INT64_MAX) s << "null";
        else s << c.buckets[b].maxSize;
        s << ",\"tactic\":\"" << jsonEscape(c.buckets[b].tactic) << "\",\"tacticTimeMs\":" << jsonNumber(c.buckets[b].timeMs) << "}";
      }
      s << "]";
    };
    s << quantizationJson(g, l);
    const TacticChoice& c0 = l.choices.at(0);
    s << ",\"precision\":\"" << toString(l.precision) << "\",\"tactic\":\"" << jsonEscape(c0.tactic)
      << "\",\"tacticsConsidered\":" << c0.considered << ",\"tacticTimeMs\":" << jsonNumber(c0.timeMs);
    buckets(c0);
    if (l.choices.size() > 1) {
      s << ",\"profiles\":[";
      for (size_t p = 0; p < l.choices.size(); ++p) {
        s << (p ? "," : "") << "{\"tactic\":\"" << jsonEscape(l.choices[p].tactic) << "\",\"tacticsConsidered\":"
          << l.choices[p].considered << ",\"tacticTimeMs\":" << jsonNumber(l.choices[p].timeMs);
        buckets(l.choices[p]);
        s << "}";
      }
      s << "]";
    }
    s << "}";
  }
  s << "\n]}";
  return s.str();
}

const char* toString(DeviceType d) { return d == DeviceType::kCPU ? "cpu" : "gpu"; }

}  // namespace kiln
