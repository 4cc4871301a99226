// Plan file format (little-endian):
//   header: "KILNPLAN" | u32 format version | str kiln version | u8 device | str fingerprint |
//           u64 payload bytes | u64 payload XXH3-64 checksum
//   payload: u32 threads | u32 aux streams | u64 arena bytes | tensors | layers | I/O | profiles
// Every count, size and index is checked on load; constants are stored 64-byte aligned.
// Format 2: a constant whose buffer is an earlier tensor's (a folded Identity/Reshape of shared
// weights, as ALBERT's export has) is stored as that tensor's index (tensor flag 8), not again.
// Format 3: several optimization profiles; each layer stores one tactic choice per profile.
// Format 4: XXH3-64 checksum (was a mis-seeded FNV-1a); every field is range-checked on load,
// and the engine re-derives each layer's shapes from the plan before creating kernels.
// Within format 5, element types 13-22 (the narrow types: one byte per element; int4/uint4/int2/
// uint2/float4 bytes range-checked on load; float8e8m0 is 22) were appended: older plans load unchanged, and a plan
// holding them is refused by an older kiln as an invalid data type.
#include <cmath>
#include <cstring>
#include <map>

#include "core/narrow_types.h"
#include "kiln/version.h"
#include "ops/op_registry.h"
#include "plan/plan_io.h"
#include "runtime/engine_graph.h"

namespace kiln {

namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'P', 'L', 'A', 'N'};
// 5: tactic names became <op>_<type>_<variant> (the tactic tables); a version 4 plan names tactics
// this kiln no longer has. 6: tactic choices carry size buckets.
constexpr uint32_t kFormatVersion = 6;
constexpr uint32_t kMaxRank = 16;
constexpr int64_t kMaxDim = int64_t(1) << 40;
constexpr uint64_t kMaxArenaBytes = uint64_t(1) << 50;
constexpr uint32_t kMaxThreads = 4096, kMaxAuxStreams = 64, kMaxConsidered = 1 << 20;


void writeDims(PlanWriter& w, const Dims& d) {
  w.count(d.size(), "dims.rank");
  for (int64_t x : d) w.i64(x, "dims.dim");
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
  w.u8(static_cast<uint8_t>(t.type()), "value.type");
  writeDims(w, t.dims());
  w.u64(t.bytes(), "value.bytes");
  w.align(64);
  w.data(t.data(), t.bytes(), "value.data");
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
  // int4/int2/uint4/uint2/float4 take a byte each: a byte outside their range is corruption.
  const uint8_t* b = t.as<uint8_t>();
  if (packedBits(type) < 8)
    for (int64_t i = 0; i < n; ++i)
      if (!validNarrowCode(type, b[i])) r.fail(std::string("invalid ") + toString(type) + " value in a tensor");
  return t;
}

void writeAttrs(PlanWriter& w, const Attributes& a) {
  w.count(a.all().size(), "attrs.count");
  for (const auto& [name, v] : a.all()) {
    w.str(name, "attr.name");
    w.u8(static_cast<uint8_t>(v.index()), "attr.kind");
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, int64_t>) w.i64(x, "attr.int");
          else if constexpr (std::is_same_v<T, float>) w.f32(x, "attr.float");
          else if constexpr (std::is_same_v<T, std::string>) w.str(x, "attr.string");
          else if constexpr (std::is_same_v<T, std::vector<int64_t>>) { w.count(x.size(), "attr.ints.count"); for (auto e : x) w.i64(e, "attr.ints"); }
          else if constexpr (std::is_same_v<T, std::vector<float>>) { w.count(x.size(), "attr.floats.count"); for (auto e : x) w.f32(e, "attr.floats"); }
          else if constexpr (std::is_same_v<T, std::vector<std::string>>) { w.count(x.size(), "attr.strings.count"); for (auto& e : x) w.str(e, "attr.strings"); }
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

std::vector<uint8_t> serializePlan(const EngineGraph& g, std::vector<PlanField>* fields) {
  PlanWriter p;
  p.trace(fields);
  p.u32(static_cast<uint32_t>(g.threads), "threads");
  p.u32(static_cast<uint32_t>(g.auxStreams), "auxStreams");
  p.u64(g.arenaBytes, "arenaBytes");
  p.count(g.tensors.size(), "tensors.count");
  std::map<std::pair<const void*, size_t>, size_t> stored;  // (buffer, bytes) -> first tensor storing it
  for (size_t i = 0; i < g.tensors.size(); ++i) {
    const auto& t = g.tensors[i];
    p.str(t.name, "tensor.name");
    p.u8(static_cast<uint8_t>(t.type), "tensor.type");
    writeDims(p, t.dims);
    const bool constant = t.value.valid();
    auto same = constant && t.value.bytes() > 0 ? stored.find({t.value.data(), t.value.bytes()}) : stored.end();
    const bool shared = same != stored.end() && g.tensors[same->second].type == t.type;
    p.u8(static_cast<uint8_t>((t.isInput ? 1 : 0) | (t.isOutput ? 2 : 0) | (constant && !shared ? 4 : 0) | (shared ? 8 : 0)),
         "tensor.flags");
    if (shared) {
      p.i64(static_cast<int64_t>(same->second), "tensor.sharedIndex");
    } else if (constant) {
      writeTensorValue(p, t.value);
      if (t.value.bytes() > 0) stored.emplace(std::make_pair(t.value.data(), t.value.bytes()), i);
    }
  }
  p.count(g.layers.size(), "layers.count");
  for (const auto& l : g.layers) {
    p.str(l.name, "layer.name");
    p.str(l.op, "layer.op");
    p.str(l.domain, "layer.domain");
    writeAttrs(p, l.attrs);
    p.count(l.inputs.size(), "layer.inputs.count");
    for (int i : l.inputs) p.i64(i, "layer.input");
    p.count(l.outputs.size(), "layer.outputs.count");
    for (int o : l.outputs) p.i64(o, "layer.output");
    p.count(l.fusedOps.size(), "layer.fusedOps.count");
    for (auto& f : l.fusedOps) p.str(f, "layer.fusedOp");
    p.u8(static_cast<uint8_t>(l.precision), "layer.precision");
    p.count(l.choices.size(), "layer.choices.count");
    for (const TacticChoice& c : l.choices) {
      p.str(c.tactic, "choice.tactic");
      p.f32(c.timeMs, "choice.timeMs");
      p.u32(static_cast<uint32_t>(c.considered), "choice.considered");
      p.count(c.buckets.size(), "choice.buckets.count");
      for (const TacticBucket& b : c.buckets) {
        p.i64(b.maxSize, "bucket.maxSize");
        p.str(b.tactic, "bucket.tactic");
        p.f32(b.timeMs, "bucket.timeMs");
      }
    }
    p.u32(static_cast<uint32_t>(l.stream), "layer.stream");
  }
  p.count(g.inputs.size(), "inputs.count");
  for (int i : g.inputs) p.i64(i, "input.index");
  p.count(g.outputs.size(), "outputs.count");
  for (int o : g.outputs) p.i64(o, "output.index");
  p.count(g.profiles.size(), "profiles.count");
  for (const ProfileRanges& ranges : g.profiles) {
    p.count(ranges.size(), "profile.entries.count");
    for (const auto& [t, pr] : ranges) {
      p.i64(t, "profile.input");
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
  h.u64(planChecksum(p.bytes().data(), p.size()));
  h.align(64);  // payload starts aligned so that constants are 64-byte aligned in the file
  if (fields)
    for (PlanField& f : *fields) f.offset += h.size();
  h.raw(p.bytes().data(), p.size());
  return std::move(h.bytes());
}

namespace {
// The header up to the payload: where the checksum is and where the payload starts.
struct PlanHeader {
  size_t checksumAt = 0, payloadAt = 0;
  uint64_t payloadBytes = 0, checksum = 0;
};
PlanHeader readHeader(PlanReader& h) {
  PlanHeader ph;
  h.take(8);
  h.u32();
  h.str(64);
  h.u8();
  h.str(256);
  ph.payloadBytes = h.u64();
  ph.checksumAt = h.pos();
  ph.checksum = h.u64();
  h.align(64);
  ph.payloadAt = h.pos();
  return ph;
}
}  // namespace

void rewritePlanChecksum(uint8_t* data, size_t size) {
  if (!data || size < 8 || std::memcmp(data, kMagic, 8) != 0) throw Error("not a kiln plan file (bad magic)");
  PlanReader h(data, size);
  PlanHeader ph = readHeader(h);
  if (ph.payloadBytes != h.remaining()) throw Error("plan payload size does not match the header");
  uint64_t sum = planChecksum(data + ph.payloadAt, ph.payloadBytes);
  std::memcpy(data + ph.checksumAt, &sum, 8);
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
  if (verifyChecksum && planChecksum(payload, payloadBytes) != checksum)
    throw Error("plan file checksum mismatch: the file is corrupted");

  PlanReader r(payload, payloadBytes);
  g.threads = static_cast<int>(r.u32Max(kMaxThreads, "thread count"));
  g.auxStreams = static_cast<int>(r.u32Max(kMaxAuxStreams, "aux stream count"));
  g.arenaBytes = r.u64();
  if (g.arenaBytes > kMaxArenaBytes) r.fail("arena size " + std::to_string(g.arenaBytes) + " is implausible");
  uint32_t nt = r.count(14, "tensors");
  g.tensors.resize(nt);
  for (auto& t : g.tensors) {
    t.name = r.str(4096);
    t.type = readType(r);
    t.dims = readDims(r, true);
    uint8_t flags = r.u8();
    if (flags > 15 || (flags & 12) == 12) r.fail("invalid tensor flags");
    if ((flags & 1) && (flags & 12)) r.fail("tensor '" + t.name + "' is both an input and a constant");
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
      if (c.tactic.empty()) r.fail("layer '" + l.name + "' has an empty tactic name");
      c.timeMs = r.f32();
      if (!std::isfinite(c.timeMs) || c.timeMs < -1.f) r.fail("layer '" + l.name + "' has an invalid tactic time");
      c.considered = static_cast<int>(r.u32Max(kMaxConsidered, "layer '" + l.name + "': tactics considered"));
      // Size buckets: ascending bounds, the last unbounded, each naming a tactic.
      const uint32_t nb = r.u32Max(static_cast<uint32_t>(kMaxTacticBuckets), "layer '" + l.name + "': tactic buckets");
      if (nb == 1) r.fail("layer '" + l.name + "' has a single tactic bucket");
      for (uint32_t b = 0; b < nb; ++b) {
        TacticBucket tb;
        tb.maxSize = r.i64();
        tb.tactic = r.str(256);
        tb.timeMs = r.f32();
        if (tb.tactic.empty()) r.fail("layer '" + l.name + "' has a tactic bucket with an empty tactic name");
        if (!std::isfinite(tb.timeMs) || tb.timeMs < -1.f) r.fail("layer '" + l.name + "' has an invalid tactic bucket time");
        if (tb.maxSize < 0 || (!c.buckets.empty() && tb.maxSize <= c.buckets.back().maxSize))
          r.fail("layer '" + l.name + "' has tactic buckets whose size bounds do not ascend");
        c.buckets.push_back(std::move(tb));
      }
      if (nb > 0 && c.buckets.back().maxSize != INT64_MAX)
        r.fail("layer '" + l.name + "' has tactic buckets that do not cover every size");
      l.choices.push_back(std::move(c));
    }
    // Index 0 is the enqueue stream, k > 0 auxiliary stream k-1: at most auxStreams.
    const uint32_t stream = r.u32();
    if (stream > static_cast<uint32_t>(g.auxStreams))
      r.fail("layer '" + l.name + "' runs on stream " + std::to_string(stream) + " but the engine has " +
             std::to_string(g.auxStreams) + " auxiliary streams");
    l.stream = static_cast<int>(stream);
  }
  // Bindings: every tensor flagged input/output is bound exactly once, and I/O names are unique
  // (the context looks them up by name).
  std::vector<int> bound(nt, 0);
  std::map<std::string, int> ioNames;
  auto bind = [&](int t) {
    if (bound[t]++) r.fail("tensor '" + g.tensors[t].name + "' is bound twice");
    if (!ioNames.emplace(g.tensors[t].name, t).second) r.fail("two I/O tensors are named '" + g.tensors[t].name + "'");
  };
  uint32_t nin = r.count(8, "inputs");
  for (uint32_t k = 0; k < nin; ++k) {
    int t = readIndex(r, nt, false);
    if (!g.tensors[t].isInput) r.fail("binding is not an input");
    bind(t);
    g.inputs.push_back(t);
  }
  uint32_t nout = r.count(8, "outputs");
  for (uint32_t k = 0; k < nout; ++k) {
    int t = readIndex(r, nt, false);
    if (!g.tensors[t].isOutput || !produced[t]) r.fail("binding is not a produced output");
    if (!g.tensors[t].isInput) bind(t);  // an input passed through as an output is one binding
    g.outputs.push_back(t);
  }
  for (uint32_t t = 0; t < nt; ++t)
    if ((g.tensors[t].isInput || g.tensors[t].isOutput) && !bound[t])
      r.fail("tensor '" + g.tensors[t].name + "' is flagged as I/O but not bound");
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
