// Test helper for kernels on any backend: runs one op with a given tactic and compares it with
// the op's naive reference kernel. GPU tests skip (and say so) where no GPU exists.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "kiln/kiln.h"
#include "ops/conv_layout.h"
#include "ops/op_registry.h"
#include "poison.h"

#define KILN_REQUIRE_GPU()                                                            \
  do {                                                                                \
    if (!::kiln::gpuAvailable()) GTEST_SKIP() << "no GPU on this machine: CUDA test skipped"; \
  } while (0)

namespace kiln::test {

//! One layer to run: inputs (an invalid HostTensor = omitted optional input), which inputs are
//! build-time constants (weights: their values are known when the kernel is created).
struct OpCase {
  std::string op;
  Attributes attrs;
  std::vector<HostTensor> inputs;
  std::vector<bool> constant;  //!< per input; missing entries = false
  int nbOutputs = 1;
};

inline HostTensor convertTo(const HostTensor& t, DataType type) {
  HostTensor o(type, t.dims());
  for (int64_t i = 0; i < t.count(); ++i) {
    double v = t.getDouble(i);
    switch (type) {
      case DataType::kFLOAT: o.as<float>()[i] = static_cast<float>(v); break;
      case DataType::kHALF: o.as<uint16_t>()[i] = floatToHalf(static_cast<float>(v)); break;
      case DataType::kBF16: o.as<uint16_t>()[i] = floatToBf16(static_cast<float>(v)); break;
      case DataType::kDOUBLE: o.as<double>()[i] = v; break;
      case DataType::kINT64: o.as<int64_t>()[i] = static_cast<int64_t>(v); break;
      case DataType::kINT32: o.as<int32_t>()[i] = static_cast<int32_t>(v); break;
      case DataType::kINT16: o.as<int16_t>()[i] = static_cast<int16_t>(v); break;
      case DataType::kUINT16: o.as<uint16_t>()[i] = static_cast<uint16_t>(v); break;
      case DataType::kINT8: o.as<int8_t>()[i] = static_cast<int8_t>(v); break;
      case DataType::kUINT8: o.as<uint8_t>()[i] = static_cast<uint8_t>(v); break;
      case DataType::kBOOL: o.as<uint8_t>()[i] = v != 0; break;
      default: throw Error("convertTo: unsupported type in tests");
    }
  }
  return o;
}

inline LayerDesc describe(const OpCase& c, bool concrete) {
  LayerDesc d;
  d.name = c.op + "_test";
  d.op = c.op;
  d.attrs = &c.attrs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    bool present = c.inputs[i].valid();
    d.inputPresent.push_back(present);
    TensorDesc t;
    if (present) {
      t.type = c.inputs[i].type();
      t.dims = c.inputs[i].dims();
      bool isConst = i < c.constant.size() && c.constant[i];
      if (isConst || concrete) t.value = c.inputs[i];
    }
    d.inputs.push_back(t);
  }
  d.outputs.resize(static_cast<size_t>(c.nbOutputs));
  inferLayer(d);
  for (auto& o : d.outputs) o.value = HostTensor();
  if (concrete) {
    // The concrete desc carries only the values the runtime would know: constants and
    // value inputs (shape-determining inputs).
    const OpDef* def = OpRegistry::instance().find(c.op);
    for (size_t i = 0; i < d.inputs.size(); ++i) {
      bool isConst = i < c.constant.size() && c.constant[i];
      bool isValue = std::find(def->valueInputs.begin(), def->valueInputs.end(), static_cast<int>(i)) != def->valueInputs.end();
      if (!isConst && !isValue) d.inputs[i].value = HostTensor();
    }
  }
  return d;
}

//! Outputs of the op's naive reference kernel.
inline std::vector<HostTensor> runReference(const OpCase& c) {
  LayerDesc d = describe(c, true);
  for (size_t i = 0; i < d.inputs.size(); ++i)
    if (d.present(i)) d.inputs[i].value = c.inputs[i];
  evaluateOnHost(d);
  std::vector<HostTensor> out;
  for (auto& o : d.outputs) out.push_back(o.value);
  return out;
}

//! Seeded uniform values in [lo, hi) stored as `type` (integers floored).
inline HostTensor uniformOfType(const Dims& d, DataType type, uint32_t seed, double lo, double hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  HostTensor f(DataType::kDOUBLE, d);
  for (int64_t i = 0; i < f.count(); ++i) f.as<double>()[i] = isInteger(type) || type == DataType::kBOOL ? std::floor(dist(rng)) : dist(rng);
  return convertTo(f, type);
}

//! A one-input case.
inline OpCase unaryCase(const std::string& op, HostTensor x, Attributes a = {}) {
  OpCase c;
  c.op = op;
  c.attrs = std::move(a);
  c.inputs = {std::move(x)};
  return c;
}

//! The reference of an op that kiln computes in float32 for float16/bfloat16 tensors (the CPU
//! builder casts around it): float16/bfloat16 inputs are widened, the reference runs in float32
//! and its float outputs are rounded back to the case's type.
inline std::vector<HostTensor> runReferenceInFloat32(const OpCase& c) {
  OpCase wide = c;
  DataType narrow = DataType::kFLOAT;
  for (auto& in : wide.inputs)
    if (in.valid() && (in.type() == DataType::kHALF || in.type() == DataType::kBF16)) {
      narrow = in.type();
      in = convertTo(in, DataType::kFLOAT);
    }
  std::vector<HostTensor> out = runReference(wide);
  if (narrow != DataType::kFLOAT)
    for (auto& o : out)
      if (o.type() == DataType::kFLOAT) o = convertTo(o, narrow);
  return out;
}

//! Names of the tactics `backend` offers for the case.
inline std::vector<std::string> tacticNames(Backend& backend, const OpCase& c) {
  std::vector<std::string> v;
  for (auto& t : backend.tactics(describe(c, false))) v.push_back(t.name);
  return v;
}

//! Runs the case with tactic `name` on `backend` (inputs uploaded, outputs downloaded). The output
//! buffers are poisoned before the run (poison.h), avoiding the values of `expected` when given.
//! `overInput` >= 0: output 0 is written over that input's buffer (in-place execution, which the
//! memory planner arranges where backends/in_place.h allows it). "ref" is the op's reference
//! kernel even where the backend offers table entries instead.
inline std::vector<HostTensor> runTactic(Backend& backend, const std::string& name, const OpCase& c,
                                         const std::vector<HostTensor>* expected = nullptr, int overInput = -1) {
  LayerDesc build = describe(c, false);
  LayerDesc concrete = describe(c, true);
  std::unique_ptr<Kernel> k;
  for (auto& t : backend.tactics(build))
    if (t.name == name) k = t.create(build);
  for (auto& t : backend.fallbackTactics(build))
    if (!k && t.name == name) k = t.create(build);
  if (!k && name == "ref") k = referenceTactic(c.op).create(build);
  if (!k) throw Error("tactic '" + name + "' not offered for " + c.op);
  if (overInput >= 0 && (static_cast<size_t>(overInput) >= c.inputs.size() || !c.inputs[overInput].valid() ||
                         c.inputs[overInput].bytes() != volume(concrete.outputs[0].dims) * elementSize(concrete.outputs[0].type)))
    throw Error("runTactic: input " + std::to_string(overInput) + " cannot hold output 0");
  std::unique_ptr<KernelState> state;
  size_t ws = k->reshape(concrete, state);
  std::vector<void*> owned;
  auto alloc = [&](size_t bytes) {
    void* p = backend.allocate(std::max<size_t>(bytes, 256));
    owned.push_back(p);
    return p;
  };
  KernelIO io;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    TensorView v;
    if (c.inputs[i].valid()) {
      v.type = c.inputs[i].type();
      v.dims = c.inputs[i].dims();
      v.count = c.inputs[i].count();
      v.data = alloc(c.inputs[i].bytes());
      backend.copyToDevice(v.data, c.inputs[i].data(), c.inputs[i].bytes(), nullptr);
    }
    io.in.push_back(v);
  }
  std::vector<HostTensor> out;
  for (auto& o : concrete.outputs) {
    const size_t k = out.size();
    out.push_back(poisoned(o.type, o.dims, expected && k < expected->size() ? &(*expected)[k] : nullptr));
    if (k == 0 && overInput >= 0) {  // the input's bytes, not poisoned
      io.out.push_back(TensorView{io.in[overInput].data, o.type, o.dims, out.back().count()});
      continue;
    }
    TensorView v{alloc(out.back().bytes()), o.type, o.dims, out.back().count()};
    backend.copyToDevice(v.data, out.back().data(), out.back().bytes(), nullptr);
    io.out.push_back(v);
  }
  if (ws) {
    io.workspace = alloc(ws);
    io.workspaceSize = ws;
  }
  io.pool = backend.pool();
  void* stream = backend.createStream();
  io.stream = stream;
  try {
    k->execute(io, state.get());
    backend.synchronize(stream);
    for (size_t i = 0; i < out.size(); ++i) backend.copyToHost(out[i].data(), io.out[i].data, out[i].bytes(), nullptr);
  } catch (...) {
    backend.destroyStream(stream);
    for (void* p : owned) backend.release(p);
    throw;
  }
  backend.destroyStream(stream);
  for (void* p : owned) backend.release(p);
  return out;
}

//! |got - ref| <= atol + rtol * |ref| elementwise for floats (NaN matches NaN); integers and bool
//! (values, indices, masks) must be equal byte for byte, whatever the tolerance. Reports the first
//! mismatch.
inline void expectClose(const HostTensor& got, const HostTensor& ref, double rtol, double atol, const std::string& what = "") {
  ASSERT_EQ(got.dims(), ref.dims()) << what;
  const bool exact = !isFloat(ref.type());
  const size_t size = elementSize(ref.type());
  int64_t bad = 0;
  std::string first;
  for (int64_t i = 0; i < ref.count(); ++i) {
    double g = got.getDouble(i), r = ref.getDouble(i);
    if (exact) {
      const bool same = got.type() == ref.type()
                            ? std::memcmp(static_cast<const char*>(got.data()) + i * size,
                                          static_cast<const char*>(ref.data()) + i * size, size) == 0
                            : g == r;
      if (!same && bad++ == 0)
        first = "element " + std::to_string(i) + " got " + std::to_string(got.getInt(i)) + " expected " + std::to_string(ref.getInt(i));
      continue;
    }
    if ((std::isnan(g) && std::isnan(r)) || g == r) continue;
    if (!(std::fabs(g - r) <= atol + rtol * std::fabs(r)) && bad++ == 0)
      first = "element " + std::to_string(i) + " got " + std::to_string(g) + " expected " + std::to_string(r);
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << ref.count() << " elements differ; first: " << first;
}

//! The ONNX TensorProto data type code of a kiln type (Cast's `to`, QuantizeLinear's output_dtype).
inline int64_t onnxTypeCode(DataType t) {
  switch (t) {
    case DataType::kFLOAT: return 1;
    case DataType::kUINT8: return 2;
    case DataType::kINT8: return 3;
    case DataType::kUINT16: return 4;
    case DataType::kINT16: return 5;
    case DataType::kINT32: return 6;
    case DataType::kINT64: return 7;
    case DataType::kBOOL: return 9;
    case DataType::kHALF: return 10;
    case DataType::kDOUBLE: return 11;
    case DataType::kUINT32: return 12;
    case DataType::kUINT64: return 13;
    case DataType::kBF16: return 16;
    case DataType::kFP8E4M3FN: return 17;
    case DataType::kFP8E4M3FNUZ: return 18;
    case DataType::kFP8E5M2: return 19;
    case DataType::kFP8E5M2FNUZ: return 20;
    case DataType::kUINT4: return 21;
    case DataType::kINT4: return 22;
    case DataType::kFP4E2M1: return 23;
    case DataType::kFP8E8M0: return 24;
    case DataType::kUINT2: return 25;
    case DataType::kINT2: return 26;
  }
  ADD_FAILURE() << "no ONNX code for " << toString(t);
  return 0;
}

//! A 4-D NCHW tensor's bytes rearranged as NHWC (or back with `toLast` false): how the GPU layout
//! pass's channels-last tensors are stored.
inline HostTensor channelsLast(const HostTensor& t, bool toLast) {
  const Dims& d = t.dims();
  const int64_t c = d[1], hw = d[2] * d[3];
  HostTensor o(t.type(), d);
  transposeInner(t.data(), o.data(), d[0], toLast ? c : hw, toLast ? hw : c, elementSize(t.type()));
  return o;
}

//! Runs every tactic `backend` offers for `c` and compares every output with the reference (in
//! float32 for ops kiln computes in float32 for float16/bfloat16 tensors).
inline void checkAllTactics(Backend& backend, const OpCase& c, const std::string& what, double rtol = 0, double atol = 0) {
  std::vector<std::string> names = tacticNames(backend, c);
  ASSERT_FALSE(names.empty()) << what << ": no tactic for " << c.op;
  const OpDef* def = OpRegistry::instance().find(c.op);
  std::vector<HostTensor> ref = def && def->anyType ? runReference(c) : runReferenceInFloat32(c);
  for (const std::string& n : names) {
    std::vector<HostTensor> got = runTactic(backend, n, c, &ref);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) expectClose(got[i], ref[i], rtol, atol, what + " [" + n + "] output " + std::to_string(i));
  }
}

}  // namespace kiln::test
