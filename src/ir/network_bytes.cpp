// serializeNetwork / deserializeNetwork (ir/network_bytes.h): little-endian fields, tensors by
// index (network inputs first, in order), layers in network order.
#include "ir/network_bytes.h"

#include <cstring>
#include <map>
#include <string>

namespace kiln {

namespace {

constexpr uint32_t kMagic = 0x424e4c4b;  // "KLNB"
constexpr uint32_t kVersion = 1;
constexpr int64_t kMaxDim = int64_t(1) << 40;
constexpr size_t kMaxRank = 64;

enum AttrKind : uint8_t { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor };

struct Writer {
  std::vector<uint8_t> out;
  template <typename T> void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    out.insert(out.end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
  }
  void dims(const Dims& d) {
    put<uint32_t>(static_cast<uint32_t>(d.size()));
    for (int64_t x : d) put<int64_t>(x);
  }
  void tensor(const HostTensor& t) {
    put<uint8_t>(static_cast<uint8_t>(t.type()));
    dims(t.dims());
    put<uint64_t>(t.bytes());
    const auto* p = static_cast<const uint8_t*>(t.data());
    if (t.bytes()) out.insert(out.end(), p, p + t.bytes());
  }
};

struct Reader {
  const uint8_t* p;
  size_t n, pos = 0;
  [[noreturn]] void bad(const std::string& what) const {
    throw Error("corrupt subgraph bytes: " + what + " at byte " + std::to_string(pos));
  }
  void need(size_t k) const {
    if (k > n - pos) bad("truncated");
  }
  template <typename T> T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, p + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  //! A count of items that take at least `minBytes` each: bounded by what is left.
  uint32_t count(size_t minBytes) {
    const uint32_t c = get<uint32_t>();
    if (static_cast<uint64_t>(c) * minBytes > n - pos) bad("count " + std::to_string(c) + " exceeds the data");
    return c;
  }
  std::string str() {
    const uint32_t len = count(1);
    std::string s(reinterpret_cast<const char*>(p + pos), len);
    pos += len;
    return s;
  }
  Dims dims(bool allowDynamic) {
    const uint32_t r = count(sizeof(int64_t));
    if (r > kMaxRank) bad("rank " + std::to_string(r));
    Dims d(r);
    for (auto& x : d) {
      x = get<int64_t>();
      if (x < (allowDynamic ? -1 : 0) || x > kMaxDim) bad("dimension " + std::to_string(x));
    }
    return d;
  }
  DataType type() {
    const uint8_t t = get<uint8_t>();
    if (t >= kNumDataTypes) bad("data type " + std::to_string(t));
    return static_cast<DataType>(t);
  }
  HostTensor tensor() {
    const DataType t = type();
    const Dims d = dims(false);
    const uint64_t bytes = get<uint64_t>();
    need(bytes);
    // Every type takes at least a quarter byte per element: bound the count before allocating.
    int64_t c = 1;
    for (int64_t x : d) {
      if (x && c > static_cast<int64_t>(4 * (n - pos) + 4) / x) bad("tensor larger than the data");
      c *= x;
    }
    if (c > static_cast<int64_t>(4 * bytes + 4)) bad("tensor larger than its bytes");
    HostTensor h(t, d);
    if (h.bytes() != bytes) bad("tensor of " + std::to_string(bytes) + " bytes for dims " + toString(d));
    if (bytes) std::memcpy(h.data(), p + pos, bytes);
    pos += bytes;
    return h;
  }
};

void writeAttr(Writer& w, const AttrValue& v) {
  if (auto* x = std::get_if<int64_t>(&v)) { w.put<uint8_t>(kInt); w.put<int64_t>(*x); }
  else if (auto* x = std::get_if<float>(&v)) { w.put<uint8_t>(kFloat); w.put<float>(*x); }
  else if (auto* x = std::get_if<std::string>(&v)) { w.put<uint8_t>(kString); w.str(*x); }
  else if (auto* x = std::get_if<std::vector<int64_t>>(&v)) {
    w.put<uint8_t>(kInts);
    w.put<uint32_t>(static_cast<uint32_t>(x->size()));
    for (int64_t e : *x) w.put<int64_t>(e);
  } else if (auto* x = std::get_if<std::vector<float>>(&v)) {
    w.put<uint8_t>(kFloats);
    w.put<uint32_t>(static_cast<uint32_t>(x->size()));
    for (float e : *x) w.put<float>(e);
  } else if (auto* x = std::get_if<std::vector<std::string>>(&v)) {
    w.put<uint8_t>(kStrings);
    w.put<uint32_t>(static_cast<uint32_t>(x->size()));
    for (const auto& e : *x) w.str(e);
  } else {
    w.put<uint8_t>(kTensor);
    w.tensor(std::get<HostTensor>(v));
  }
}

AttrValue readAttr(Reader& r) {
  switch (r.get<uint8_t>()) {
    case kInt: return r.get<int64_t>();
    case kFloat: return r.get<float>();
    case kString: return r.str();
    case kInts: {
      std::vector<int64_t> v(r.count(sizeof(int64_t)));
      for (auto& e : v) e = r.get<int64_t>();
      return v;
    }
    case kFloats: {
      std::vector<float> v(r.count(sizeof(float)));
      for (auto& e : v) e = r.get<float>();
      return v;
    }
    case kStrings: {
      std::vector<std::string> v(r.count(sizeof(uint32_t)));
      for (auto& e : v) e = r.str();
      return v;
    }
    case kTensor: return r.tensor();
    default: r.bad("attribute kind");
  }
}

}  // namespace

std::vector<uint8_t> serializeNetwork(const Network& net) {
  Writer w;
  w.put<uint32_t>(kMagic);
  w.put<uint32_t>(kVersion);
  // Network inputs first (in order), then every other tensor.
  std::vector<const Tensor*> order(net.inputs().begin(), net.inputs().end());
  for (const auto& t : net.tensors())
    if (!t->isInput) order.push_back(t.get());
  std::map<const Tensor*, uint32_t> index;
  for (const Tensor* t : order) index.emplace(t, static_cast<uint32_t>(index.size()));
  w.put<uint32_t>(static_cast<uint32_t>(order.size()));
  w.put<uint32_t>(static_cast<uint32_t>(net.inputs().size()));
  for (const Tensor* t : order) {
    w.str(t->name);
    w.put<uint8_t>(static_cast<uint8_t>(t->type));
    w.dims(t->dims);
    w.put<uint8_t>(static_cast<uint8_t>((t->dimsKnown ? 1 : 0) | (t->isConstant() ? 2 : 0)));
    if (t->isConstant()) w.tensor(t->value);
  }
  w.put<uint32_t>(static_cast<uint32_t>(net.layers().size()));
  for (const auto& l : net.layers()) {
    w.str(l->name);
    w.str(l->op);
    w.str(l->domain);
    w.put<uint32_t>(static_cast<uint32_t>(l->attrs.all().size()));
    for (const auto& [name, v] : l->attrs.all()) {
      w.str(name);
      writeAttr(w, v);
    }
    w.put<uint32_t>(static_cast<uint32_t>(l->inputs.size()));
    for (const Tensor* t : l->inputs) w.put<int32_t>(t ? static_cast<int32_t>(index.at(t)) : -1);
    w.put<uint32_t>(static_cast<uint32_t>(l->outputs.size()));
    for (const Tensor* t : l->outputs) w.put<int32_t>(static_cast<int32_t>(index.at(t)));
  }
  w.put<uint32_t>(static_cast<uint32_t>(net.outputs().size()));
  for (const Tensor* t : net.outputs()) w.put<int32_t>(static_cast<int32_t>(index.at(t)));
  return w.out;
}

void deserializeNetwork(const uint8_t* data, size_t size, Network& net) {
  if (!net.tensors().empty()) throw Error("deserializeNetwork: the network is not empty");
  Reader r{data, size};
  if (r.get<uint32_t>() != kMagic) r.bad("no subgraph magic");
  if (r.get<uint32_t>() != kVersion) r.bad("unknown subgraph version");
  const uint32_t nTensors = r.count(8);
  const uint32_t nInputs = r.get<uint32_t>();
  if (nInputs > nTensors) r.bad("more inputs than tensors");
  std::vector<Tensor*> tensors;
  for (uint32_t i = 0; i < nTensors; ++i) {
    const std::string name = r.str();
    const DataType type = r.type();
    const Dims dims = r.dims(true);
    const uint8_t flags = r.get<uint8_t>();
    Tensor* t = nullptr;
    if (flags & 2) {
      if (i < nInputs) r.bad("a network input with a value");
      t = net.addConstant(name, r.tensor());
    } else {
      t = i < nInputs ? net.addInput(name, type, dims) : net.newTensor(name);
      t->type = type;
      t->dims = dims;
      t->dimsKnown = flags & 1;
    }
    if (t->name != name) r.bad("duplicate tensor name '" + name + "'");
    tensors.push_back(t);
  }
  auto tensorAt = [&](int32_t k, bool optional) -> Tensor* {
    if (k == -1 && optional) return nullptr;
    if (k < 0 || static_cast<uint32_t>(k) >= nTensors) r.bad("tensor index " + std::to_string(k));
    return tensors[static_cast<size_t>(k)];
  };
  const uint32_t nLayers = r.count(12);
  for (uint32_t i = 0; i < nLayers; ++i) {
    const std::string name = r.str(), op = r.str(), domain = r.str();
    Attributes attrs;
    const uint32_t nAttrs = r.count(5);
    for (uint32_t a = 0; a < nAttrs; ++a) {
      const std::string an = r.str();
      attrs.set(an, readAttr(r));
    }
    std::vector<Tensor*> ins(r.count(4));
    for (auto& t : ins) t = tensorAt(r.get<int32_t>(), true);
    Layer* l = net.addLayer(op, ins, 0, std::move(attrs), name);
    l->domain = domain;
    const uint32_t nOut = r.count(4);
    for (uint32_t k = 0; k < nOut; ++k) {
      Tensor* t = tensorAt(r.get<int32_t>(), false);
      if (t->producer || t->isInput || t->isConstant()) r.bad("tensor '" + t->name + "' produced twice");
      t->producer = l;
      l->outputs.push_back(t);
    }
  }
  const uint32_t nOutputs = r.count(4);
  for (uint32_t k = 0; k < nOutputs; ++k) net.markOutput(tensorAt(r.get<int32_t>(), false));
  if (r.pos != size) r.bad("trailing bytes");
}

}  // namespace kiln
