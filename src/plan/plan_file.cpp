// Plan file format (little-endian):
//   header: "KILNPLAN" | u32 format version | str kiln version | u8 device | str fingerprint |
//           u64 payload bytes | u64 payload FNV-1a-64 checksum
//   payload: u32 threads | u32 aux streams | u64 arena bytes | tensors | layers | I/O | profiles
// Every count, size and index is checked on load; constants are stored 64-byte aligned.
// Format 2: a constant whose buffer is an earlier tensor's (a folded Identity/Reshape of shared
// weights, as ALBERT's export has) is stored as that tensor's index (tensor flag 8), not again.
// Format 3: several optimization profiles; each layer stores one tactic choice per profile.
#include <cstring>
#include <map>

#include "kiln/version.h"
#include "ops/op_registry.h"
#include "plan/plan_io.h"
#include "runtime/engine_graph.h"

namespace kiln {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'P', 'L', 'A', 'N'};
constexpr uint32_t kFormatVersion = 3;
constexpr uint32_t kMaxRank = 16;
constexpr int64_t kMaxDim = int64_t(1) << 40;


void writeDims(PlanWriter& w, const Dims& d) {
  w.u32(static_cast<uint32_t>(d.size()));
  for (int64_t x : d) w.i64(x);
}

Dims readDims(PlanReader& r, bool allowDynamic) {
  uint32_t rank = r.u32();
  if (rank > kMaxRank) r.fail("rank " + std::to_string(rank) + " is implausible");
  Dims d(rank);
  for (auto& x : d) {
    x = r.i64();
    if (x > kMaxDim || x < (allowDynamic ? -1 : 0)) r.fail("dimension " + std::to_string(x) + " is out of range");
  }
  return d;
}

DataType readType(PlanReader& r) {
  uint8_t t = r.u8();
  if (t >= kNumDataTypes) r.fail("invalid data type " + std::to_string(t));
  return static_cast<DataType>(t);
}

void writeTensorValue(PlanWriter& w, const HostTensor& t) {
  w.u8(static_cast<uint8_t>(t.type()));
  writeDims(w, t.dims());
  w.u64(t.bytes());
  w.align(64);
  w.raw(t.data(), t.bytes());
}

HostTensor readTensorValue(PlanReader& r) {
  DataType type = readType(r);
  Dims dims = readDims(r, false);
  uint64_t bytes = r.u64();
  int64_t n;
  try {
    n = volume(dims);
  } catch (const Error&) {
    r.fail("tensor size overflows");
  }
  if (bytes != static_cast<uint64_t>(n) * elementSize(type)) r.fail("tensor byte size does not match its dims");
  r.align(64);
  if (bytes > r.remaining()) r.fail("tensor data exceeds the plan");
  HostTensor t(type, dims);
  std::memcpy(t.data(), r.take(bytes), bytes);
  return t;
}

void writeAttrs(PlanWriter& w, const Attributes& a) {
  w.u32(static_cast<uint32_t>(a.all().size()));
  for (const auto& [name, v] : a.all()) {
    w.str(name);
    w.u8(static_cast<uint8_t>(v.index()));
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, int64_t>) w.i64(x);
          else if constexpr (std::is_same_v<T, float>) w.f32(x);
          else if constexpr (std::is_same_v<T, std::string>) w.str(x);
          else if constexpr (std::is_same_v<T, std::vector<int64_t>>) { w.u32(static_cast<uint32_t>(x.size())); for (auto e : x) w.i64(e); }
          else if constexpr (std::is_same_v<T, std::vector<float>>) { w.u32(static_cast<uint32_t>(x.size())); for (auto e : x) w.f32(e); }
          else if constexpr (std::is_same_v<T, std::vector<std::string>>) { w.u32(static_cast<uint32_t>(x.size())); for (auto& e : x) w.str(e); }
          else writeTensorValue(w, x);
        },
        v);
  }
}

Attributes readAttrs(PlanReader& r) {
  Attributes a;
  uint32_t n = r.count(6, "attributes");
  for (uint32_t i = 0; i < n; ++i) {
    std::string name = r.str(4096);
    uint8_t kind = r.u8();
    switch (kind) {
      case 0: a.set(name, r.i64()); break;
      case 1: a.set(name, r.f32()); break;
      case 2: a.set(name, r.str()); break;
      case 3: { uint32_t k = r.count(8, "ints"); std::vector<int64_t> v(k); for (auto& e : v) e = r.i64(); a.set(name, v); break; }
      case 4: { uint32_t k = r.count(4, "floats"); std::vector<float> v(k); for (auto& e : v) e = r.f32(); a.set(name, v); break; }
      case 5: { uint32_t k = r.count(4, "strings"); std::vector<std::string> v(k); for (auto& e : v) e = r.str(); a.set(name, v); break; }
      case 6: a.set(name, readTensorValue(r)); break;
      default: r.fail("invalid attribute kind " + std::to_string(kind));
    }
  }
  return a;
}

int readIndex(PlanReader& r, size_t limit, bool allowNone) {
  int64_t v = r.i64();
  if ((allowNone && v == -1) || (v >= 0 && static_cast<uint64_t>(v) < limit)) return static_cast<int>(v);
  r.fail("tensor index " + std::to_string(v) + " out of range");
}

}  // namespace

std::vector<uint8_t> serializePlan(const EngineGraph& g) {
  PlanWriter p;
  p.u32(static_cast<uint32_t>(g.threads));
  p.u32(static_cast<uint32_t>(g.auxStreams));
  p.u64(g.arenaBytes);
  p.u32(static_cast<uint32_t>(g.tensors.size()));
  std::map<std::pair<const void*, size_t>, size_t> stored;  // (buffer, bytes) -> first tensor storing it
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    const auto& t = g.tensors[i];
    p.str(t.name);
    p.u8(static_cast<uint8_t>(t.type));
    writeDims(p, t.dims);
    const bool constant = t.value.valid();
    auto same = constant && t.value.bytes() > 0 ? stored.find({t.value.data(), t.value.bytes()}) : stored.end();
    const bool shared = same != stored.end() && g.tensors[same->second].type == t.type;
    p.u8(static_cast<uint8_t>((t.isInput ? 1 : 0) | (t.isOutput ? 2 : 0) | (constant && !shared ? 4 : 0) | (shared ? 8 : 0)));
    if (shared) {
      p.i64(static_cast<int64_t>(same->second));
    } else if (constant) {
      writeTensorValue(p, t.value);
      if (t.value.bytes() > 0) stored.emplace(std::make_pair(t.value.data(), t.value.bytes()), i);
    }
  }
  p.u32(static_cast<uint32_t>(g.layers.size()));
  for (const auto& l : g.layers) {
    p.str(l.name);
    p.str(l.op);
    p.str(l.domain);
    writeAttrs(p, l.attrs);
    p.u32(static_cast<uint32_t>(l.inputs.size()));
    for (int i : l.inputs) p.i64(i);
    p.u32(static_cast<uint32_t>(l.outputs.size()));
    for (int o : l.outputs) p.i64(o);
    p.u32(static_cast<uint32_t>(l.fusedOps.size()));
    for (auto& f : l.fusedOps) p.str(f);
    p.u8(static_cast<uint8_t>(l.precision));
    p.u32(static_cast<uint32_t>(l.choices.size()));
    for (const TacticChoice& c : l.choices) {
      p.str(c.tactic);
      p.f32(c.timeMs);
      p.u32(static_cast<uint32_t>(c.considered));
    }
    p.u32(static_cast<uint32_t>(l.stream));
  }
  p.u32(static_cast<uint32_t>(g.inputs.size()));
  for (int i : g.inputs) p.i64(i);
  p.u32(static_cast<uint32_t>(g.outputs.size()));
  for (int o : g.outputs) p.i64(o);
  p.u32(static_cast<uint32_t>(g.profiles.size()));
  for (const ProfileRanges& ranges : g.profiles) {
    p.u32(static_cast<uint32_t>(ranges.size()));
    for (const auto& [t, pr] : ranges) {
      p.i64(t);
      writeDims(p, pr.min);
      writeDims(p, pr.opt);
      writeDims(p, pr.max);
    }
  }

  PlanWriter h;
  h.raw(kMagic, 8);
  h.u32(kFormatVersion);
  h.str(KILN_VERSION_STRING);
  h.u8(static_cast<uint8_t>(g.device));
  h.str(g.fingerprint);
  h.u64(p.size());
  h.u64(fnv1a64(p.bytes().data(), p.size()));
  h.align(64);  // payload starts aligned so that constants are 64-byte aligned in the file
  h.raw(p.bytes().data(), p.size());
  return std::move(h.bytes());
}

EngineGraph deserializePlan(const void* data, size_t size, bool verifyChecksum) {
  if (!data || size < 8 || std::memcmp(data, kMagic, 8) != 0)
    throw Error("not a kiln plan file (bad magic); was it built by kiln?");
  PlanReader h(static_cast<const uint8_t*>(data), size);
  h.take(8);
  uint32_t version = h.u32();
  if (version != kFormatVersion)
    throw Error("plan format version " + std::to_string(version) + " is not supported by this kiln (" +
                KILN_VERSION_STRING + " reads version " + std::to_string(kFormatVersion) + "); rebuild the engine");
  std::string kilnVersion = h.str(64);
  if (kilnVersion != KILN_VERSION_STRING)
    throw Error("plan was built by kiln " + kilnVersion + ", this is kiln " + KILN_VERSION_STRING + "; rebuild the engine");
  EngineGraph g;
  uint8_t dev = h.u8();
  if (dev > 1) h.fail("invalid device");
  g.device = static_cast<DeviceType>(dev);
  g.fingerprint = h.str(256);
  uint64_t payloadBytes = h.u64();
  uint64_t checksum = h.u64();
  h.align(64);
  if (payloadBytes != h.remaining())
    throw Error("plan file is truncated or has trailing bytes (payload " + std::to_string(h.remaining()) +
                " bytes, header says " + std::to_string(payloadBytes) + ")");
  const uint8_t* payload = h.take(payloadBytes);
  if (verifyChecksum && fnv1a64(payload, payloadBytes) != checksum)
    throw Error("plan file checksum mismatch: the file is corrupted");

  PlanReader r(payload, payloadBytes);
  g.threads = static_cast<int>(r.u32());
  if (g.threads > 4096) r.fail("thread count out of range");
  g.auxStreams = static_cast<int>(r.u32());
  if (g.auxStreams > 64) r.fail("aux stream count out of range");
  g.arenaBytes = r.u64();
  uint32_t nt = r.count(14, "tensors");
  g.tensors.resize(nt);
  for (auto& t : g.tensors) {
    t.name = r.str(4096);
    t.type = readType(r);
    t.dims = readDims(r, true);
    uint8_t flags = r.u8();
    if (flags > 15 || (flags & 12) == 12) r.fail("invalid tensor flags");
    t.isInput = flags & 1;
    t.isOutput = flags & 2;
    if (flags & 4) {
      t.value = readTensorValue(r);
      if (t.value.type() != t.type || t.value.dims() != t.dims) r.fail("constant '" + t.name + "' does not match its tensor");
    } else if (flags & 8) {  // the buffer of an earlier constant
      const size_t self = static_cast<size_t>(&t - g.tensors.data());
      const int src = readIndex(r, self, false);
      const HostTensor& v = g.tensors[static_cast<size_t>(src)].value;
      int64_t n = -1;
      try {
        n = volume(t.dims);
      } catch (const Error&) {
        r.fail("tensor size overflows");
      }
      if (!v.valid() || v.type() != t.type || v.count() != n) r.fail("constant '" + t.name + "' does not match the buffer it shares");
      t.value = v.reshaped(t.dims);
    }
  }
  uint32_t nl = r.count(30, "layers");
  g.layers.resize(nl);
  std::vector<bool> produced(nt, false);
  for (size_t i = 0; i < nt; ++i) produced[i] = g.tensors[i].isInput || g.tensors[i].value.valid();
  for (auto& l : g.layers) {
    l.name = r.str(4096);
    l.op = r.str(256);
    l.domain = r.str(256);
    if (!l.domain.empty() || !OpRegistry::instance().find(l.op))
      r.fail("layer '" + l.name + "' has unknown op '" + l.op + "'");
    l.attrs = readAttrs(r);
    uint32_t ni = r.count(8, "layer inputs");
    for (uint32_t k = 0; k < ni; ++k) {
      int t = readIndex(r, nt, true);
      if (t >= 0 && !produced[t]) r.fail("layer '" + l.name + "' reads a tensor before it is produced");
      l.inputs.push_back(t);
    }
    uint32_t no = r.count(8, "layer outputs");
    for (uint32_t k = 0; k < no; ++k) {
      int t = readIndex(r, nt, false);
      if (produced[t]) r.fail("tensor '" + g.tensors[t].name + "' is produced twice");
      produced[t] = true;
      l.outputs.push_back(t);
    }
    uint32_t nf = r.count(4, "fused ops");
    for (uint32_t k = 0; k < nf; ++k) l.fusedOps.push_back(r.str(4096));
    l.precision = readType(r);
    uint32_t nc = r.count(12, "tactic choices");
    for (uint32_t k = 0; k < nc; ++k) {
      TacticChoice c;
      c.tactic = r.str(256);
      c.timeMs = r.f32();
      c.considered = static_cast<int>(r.u32());
      l.choices.push_back(std::move(c));
    }
    l.stream = static_cast<int>(r.u32());
    if (l.stream > g.auxStreams) r.fail("layer '" + l.name + "' runs on a stream the engine does not have");
  }
  uint32_t nin = r.count(8, "inputs");
  for (uint32_t k = 0; k < nin; ++k) {
    int t = readIndex(r, nt, false);
    if (!g.tensors[t].isInput) r.fail("binding is not an input");
    g.inputs.push_back(t);
  }
  uint32_t nout = r.count(8, "outputs");
  for (uint32_t k = 0; k < nout; ++k) {
    int t = readIndex(r, nt, false);
    if (!g.tensors[t].isOutput || !produced[t]) r.fail("binding is not a produced output");
    g.outputs.push_back(t);
  }
  uint32_t nprof = r.count(4, "optimization profiles");
  if (nprof == 0 || nprof > kMaxOptimizationProfiles) r.fail("optimization profile count " + std::to_string(nprof) + " is out of range");
  g.profiles.assign(nprof, {});
  for (ProfileRanges& ranges : g.profiles) {
    uint32_t np = r.count(20, "profile entries");
    for (uint32_t k = 0; k < np; ++k) {
      int t = readIndex(r, nt, false);
      if (!g.tensors[t].isInput) r.fail("profile for a non-input tensor");
      ProfileRange pr{readDims(r, false), readDims(r, false), readDims(r, false)};
      size_t rank = g.tensors[t].dims.size();
      if (pr.min.size() != rank || pr.opt.size() != rank || pr.max.size() != rank) r.fail("profile rank mismatch");
      for (size_t d = 0; d < rank; ++d)
        if (pr.min[d] > pr.opt[d] || pr.opt[d] > pr.max[d]) r.fail("profile min/opt/max out of order");
      if (!ranges.emplace(t, pr).second) r.fail("profile gives input '" + g.tensors[t].name + "' twice");
    }
  }
  // Every profile covers every dynamic input, within its static dims (as the builder requires).
  for (int in : g.inputs) {
    const EngineTensor& t = g.tensors[in];
    for (size_t p = 0; p < g.profiles.size(); ++p) {
      auto it = g.profiles[p].find(in);
      if (it == g.profiles[p].end()) {
        if (!isStatic(t.dims)) r.fail("optimization profile " + std::to_string(p) + " has no range for dynamic input '" + t.name + "'");
        continue;
      }
      for (size_t d = 0; d < t.dims.size(); ++d)
        if (t.dims[d] >= 0 && (it->second.min[d] != t.dims[d] || it->second.max[d] != t.dims[d]))
          r.fail("optimization profile " + std::to_string(p) + " changes static dimension " + std::to_string(d) + " of '" + t.name + "'");
    }
  }
  for (const EngineLayer& l : g.layers)
    if (l.choices.size() != g.profiles.size())
      r.fail("layer '" + l.name + "' has " + std::to_string(l.choices.size()) + " tactic choices for " + std::to_string(nprof) +
             " optimization profiles");
  if (r.remaining() != 0) r.fail("trailing bytes in the payload");
  return g;
}

}  // namespace kiln
