// Test helper shared by op tests whose expected values come from a generator script (.inc):
// reference cases (inputs, attributes, expected outputs) and a one-layer runner on the CPU.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "kiln/network.h"
#include "ops/op_registry.h"
#include "poison.h"

namespace kiln::test {

// ---------------------------------------------------------------------------------------------
// A reference case: one layer, its inputs and the expected outputs (from the generator script).

struct RefTensor {
  const char* name;
  bool present;
  DataType type;
  Dims dims;
  std::vector<double> data;
};

struct RefCase {
  const char* name;
  const char* op;
  std::vector<std::pair<std::string, AttrValue>> attrs;
  std::vector<RefTensor> inputs;
  std::vector<RefTensor> outputs;
};

inline HostTensor toHost(const RefTensor& r) {
  HostTensor h(r.type, r.dims);
  for (int64_t i = 0; i < h.count(); ++i) {
    double v = r.data[static_cast<size_t>(i)];
    switch (r.type) {
      case DataType::kFLOAT: h.as<float>()[i] = static_cast<float>(v); break;
      case DataType::kDOUBLE: h.as<double>()[i] = v; break;
      case DataType::kINT64: h.as<int64_t>()[i] = static_cast<int64_t>(v); break;
      case DataType::kINT32: h.as<int32_t>()[i] = static_cast<int32_t>(v); break;
      case DataType::kINT8: h.as<int8_t>()[i] = static_cast<int8_t>(v); break;
      case DataType::kUINT8: h.as<uint8_t>()[i] = static_cast<uint8_t>(v); break;
      case DataType::kBOOL: h.as<bool>()[i] = v != 0; break;
      default: ADD_FAILURE() << "toHost: type not handled";
    }
  }
  return h;
}

//! Infers `desc` and runs it with `tactic` on the CPU backend (`threads` workers), inputs from
//! `data` (an invalid tensor for an omitted input); returns the outputs.
inline std::vector<HostTensor> runLayer(LayerDesc& desc, const std::vector<HostTensor>& data, const Tactic& tactic,
                                        int threads) {
  inferLayer(desc);
  auto backend = getBackend(DeviceType::kCPU, threads);
  auto kernel = tactic.create(desc);
  std::unique_ptr<KernelState> state;
  std::vector<uint8_t> workspace(kernel->reshape(desc, state));
  KernelIO io;
  io.pool = backend->pool();
  io.workspace = workspace.data();
  io.workspaceSize = workspace.size();
  for (auto& t : data)
    io.in.push_back(t.valid() ? TensorView{const_cast<void*>(t.data()), t.type(), t.dims(), t.count()} : TensorView{});
  std::vector<HostTensor> outs;
  for (auto& o : desc.outputs) outs.push_back(poisoned(o.type, o.dims));  // unwritten elements fail
  for (auto& o : outs) io.out.push_back(TensorView{o.data(), o.type(), o.dims(), o.count()});
  kernel->execute(io, state.get());
  return outs;
}

//! One layer described for inference and run through a CPU tactic.
class LayerCase {
 public:
  explicit LayerCase(const std::string& op, size_t nOutputs = 1) {
    desc.name = "test";
    desc.op = op;
    desc.attrs = &attrs;
    desc.outputs.resize(nOutputs);
  }
  //! An input with known data; `constant` also exposes the value to inference and tactics.
  LayerCase& input(const HostTensor& t, bool constant = false) {
    desc.inputs.push_back(TensorDesc{t.type(), t.dims(), constant ? t : HostTensor()});
    desc.inputPresent.push_back(true);
    data.push_back(t);
    return *this;
  }
  //! An input known only by type and dims (inference tests).
  LayerCase& shape(DataType t, const Dims& d) {
    desc.inputs.push_back(TensorDesc{t, d, HostTensor()});
    desc.inputPresent.push_back(true);
    data.emplace_back();
    return *this;
  }
  LayerCase& missing() {
    desc.inputs.emplace_back();
    desc.inputPresent.push_back(false);
    data.emplace_back();
    return *this;
  }
  LayerCase& attr(const std::string& n, AttrValue v) {
    attrs.set(n, std::move(v));
    return *this;
  }
  void infer() { inferLayer(desc); }
  std::vector<HostTensor> run(const Tactic& tactic, int threads = 4) { return runLayer(desc, data, tactic, threads); }
  //! Runs the layer with the tactic the CPU backend offers first.
  std::vector<HostTensor> run(int threads = 3) {
    infer();
    auto tactics = getBackend(DeviceType::kCPU, threads)->tactics(desc);
    if (tactics.empty()) throw Error("no tactic for " + desc.op);
    return run(tactics[0], threads);
  }
  std::vector<HostTensor> runRef() { return run(referenceTactic(desc.op)); }
  //! The optimized tactic `name`, if the CPU backend offers it for this layer.
  std::optional<Tactic> tactic(const std::string& name) {
    infer();
    for (auto& t : getBackend(DeviceType::kCPU, 4)->tactics(desc))
      if (t.name == name) return t;
    return std::nullopt;
  }

  Attributes attrs;
  LayerDesc desc;
  std::vector<HostTensor> data;
};

//! The case as a layer; the op's value inputs (shapes, sizes, axes) are known to inference, as
//! the builder and the runtime know them.
inline LayerCase fromRef(const RefCase& c) {
  LayerCase l(c.op, c.outputs.size());
  for (auto& [k, v] : c.attrs) l.attr(k, v);
  const OpDef* def = OpRegistry::instance().find(c.op);
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const RefTensor& in = c.inputs[i];
    const bool value = def && std::find(def->valueInputs.begin(), def->valueInputs.end(), static_cast<int>(i)) != def->valueInputs.end();
    if (in.present) l.input(toHost(in), value);
    else l.missing();
  }
  return l;
}

//! Runs a generated case and compares every output (dims, type, values) with the expected ones.
inline void checkRefCase(const RefCase& c) {
  SCOPED_TRACE(c.name);
  LayerCase l = fromRef(c);
  std::vector<HostTensor> outs = l.run();
  ASSERT_EQ(outs.size(), c.outputs.size());
  for (size_t o = 0; o < outs.size(); ++o) {
    const RefTensor& want = c.outputs[o];
    ASSERT_EQ(outs[o].dims(), want.dims) << "output " << o;
    ASSERT_EQ(outs[o].type(), want.type) << "output " << o;
    const bool dbl = want.type == DataType::kDOUBLE;
    const double rtol = dbl ? 1e-9 : 2e-5, atol = dbl ? 1e-11 : 2e-6;
    int bad = 0;
    for (int64_t i = 0; i < outs[o].count(); ++i) {
      double e = want.data[static_cast<size_t>(i)], a = outs[o].getDouble(i);
      bool ok = std::isnan(e) ? std::isnan(a) : std::fabs(a - e) <= atol + rtol * std::fabs(e);
      if (!ok && bad++ < 5) ADD_FAILURE() << "output " << o << " element " << i << ": got " << a << ", expected " << e;
    }
    EXPECT_EQ(bad, 0) << "output " << o;
  }
}

//! Expects inference to throw kiln::Error whose message contains `needle`.
inline void expectInferError(LayerCase& c, const std::string& needle) {
  try {
    c.infer();
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace kiln::test
