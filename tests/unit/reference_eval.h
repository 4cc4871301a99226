// Test helper: evaluates a network layer by layer with the ops' naive reference kernels, with no
// builder passes — the independent reference that optimized engines are compared with.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "kiln/kiln.h"
#include "ops/op_registry.h"

namespace kiln::test {

//! An optimization profile giving one input's min/opt/max dims.
inline OptimizationProfile profileFor(const std::string& input, const Dims& min, const Dims& opt, const Dims& max) {
  OptimizationProfile p;
  p.setDimensions(input, OptProfileSelector::kMIN, min);
  p.setDimensions(input, OptProfileSelector::kOPT, opt);
  p.setDimensions(input, OptProfileSelector::kMAX, max);
  return p;
}

inline HostTensor randomTensor(Dims d, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  HostTensor t(DataType::kFLOAT, d);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.count(); ++i) t.as<float>()[i] = u(rng);
  return t;
}

//! x[-1, 3, 8, 8] -> Conv 3x3 (4 filters, pad 1, weights from `seed`) + Relu -> "y": a dynamic
//! network for which the CPU offers several conv tactics.
inline void dynamicConvNetwork(Network& net, uint32_t seed) {
  Tensor* x = net.addInput("x", DataType::kFLOAT, {-1, 3, 8, 8});
  Layer* conv = net.addConvolution(x, randomTensor({4, 3, 3, 3}, seed), randomTensor({4}, seed + 1), {1, 1}, {1, 1, 1, 1});
  Layer* relu = net.addActivation(conv->outputs[0], "Relu");
  net.renameTensor(relu->outputs[0], "y");
  net.markOutput(relu->outputs[0]);
}

//! How many layers of `op` the network holds.
inline int countOps(const Network& n, const std::string& op) {
  int c = 0;
  for (auto& l : n.layers()) c += l->op == op;
  return c;
}

//! The first layer of `op`, or nullptr.
inline const Layer* firstOp(const Network& n, const std::string& op) {
  for (auto& l : n.layers())
    if (l->op == op) return l.get();
  return nullptr;
}

//! A 1-D int64 constant's value (indices, shapes, Slice bounds).
inline HostTensor int64Values(const std::vector<int64_t>& v) {
  HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

//! A float32 scalar's value.
inline HostTensor floatScalar(float v) {
  HostTensor t(DataType::kFLOAT, {});
  *t.as<float>() = v;
  return t;
}

//! A Transpose of x by perm.
inline Layer* addPermute(Network& n, Tensor* x, const std::vector<int64_t>& perm) {
  Attributes a;
  a.set("perm", perm);
  return n.addLayer("Transpose", {x}, 1, a);
}

//! A Reshape of x to the constant dims.
inline Layer* addReshape(Network& n, Tensor* x, const std::vector<int64_t>& dims) {
  HostTensor shape(DataType::kINT64, {static_cast<int64_t>(dims.size())});
  for (size_t k = 0; k < dims.size(); ++k) shape.as<int64_t>()[k] = dims[k];
  return n.addLayer("Reshape", {x, n.addConstant(n.uniqueName("shape"), shape)}, 1);
}

//! Each output in `want` matched by `got`: same dims, every element within tol * (1 + |want|); a
//! gtest failure names the output and the element.
inline void expectOutputsNear(const std::map<std::string, HostTensor>& got, const std::map<std::string, HostTensor>& want, double tol) {
  for (const auto& [name, w] : want) {
    const HostTensor& g = got.at(name);
    ASSERT_EQ(g.dims(), w.dims()) << name;
    for (int64_t i = 0; i < w.count(); ++i)
      ASSERT_NEAR(g.getDouble(i), w.getDouble(i), tol * (1 + std::fabs(w.getDouble(i)))) << name << "[" << i << "]";
  }
}

//! Values of every network output, by name.
inline std::map<std::string, HostTensor> evaluateReference(Network& net, const std::map<std::string, HostTensor>& inputs) {
  net.topoSort();
  net.inferShapes();
  std::map<const Tensor*, HostTensor> vals;
  for (Tensor* in : net.inputs()) vals[in] = inputs.at(in->name);
  for (auto& l : net.layers()) {
    LayerDesc d;
    d.name = l->name;
    d.op = l->op;
    d.attrs = &l->attrs;
    for (Tensor* t : l->inputs) {
      d.inputPresent.push_back(t != nullptr);
      d.inputs.push_back(t ? TensorDesc{t->type, t->isConstant() ? t->value.dims() : vals.at(t).dims(),
                                        t->isConstant() ? t->value : vals.at(t)}
                           : TensorDesc{});
    }
    d.outputs.resize(l->outputs.size());
    inferLayer(d);
    for (auto& o : d.outputs) o.value = HostTensor();
    evaluateOnHost(d);
    for (size_t k = 0; k < l->outputs.size(); ++k) vals[l->outputs[k]] = d.outputs[k].value;
  }
  std::map<std::string, HostTensor> out;
  for (Tensor* o : net.outputs()) out[o->name] = o->isConstant() ? o->value : vals.at(o);
  return out;
}

//! Builds `make` twice: returns the outputs of one copy (the unchanged network) for `inputs`, and
//! leaves the other in `net`, sorted and shaped, for the pass under test.
inline std::map<std::string, HostTensor> referenceAndCopy(const std::function<void(Network&)>& make,
                                                          const std::map<std::string, HostTensor>& inputs, Network& net) {
  Network ref;
  make(ref);
  auto want = evaluateReference(ref, inputs);
  make(net);
  net.topoSort();
  net.inferShapes();
  return want;
}

//! Builds `net` and runs it on `inputs`; returns the float outputs by name.
inline std::map<std::string, std::vector<float>> runEngine(Engine& e, const std::map<std::string, HostTensor>& inputs) {
  auto ctx = e.createExecutionContext();
  std::map<std::string, std::vector<float>> outs;
  for (auto& [n, t] : inputs) {
    ctx->setInputShape(n, t.dims());
    ctx->setTensorAddress(n, const_cast<void*>(t.data()));
  }
  for (int i = 0; i < e.getNbIOTensors(); ++i) {
    std::string n = e.getIOTensorName(i);
    if (e.getTensorIOMode(n) != TensorIOMode::kOUTPUT) continue;
    outs[n].resize(static_cast<size_t>(volume(ctx->getTensorShape(n))));
    ctx->setTensorAddress(n, outs[n].data());
  }
  ctx->enqueue();
  return outs;
}

//! The reference outputs of one copy of `make`'s network and a CPU engine (2 threads) built from
//! `net`, a second copy that the builder optimizes in place (callers inspect what the passes made).
struct EngineAndReference {
  std::unique_ptr<Engine> engine;
  std::map<std::string, HostTensor> reference;
};
inline EngineAndReference buildWithReference(const std::function<void(Network&)>& make, Network& net,
                                             const std::map<std::string, HostTensor>& inputs) {
  Network refNet;
  make(refNet);
  EngineAndReference r;
  r.reference = evaluateReference(refNet, inputs);
  make(net);
  BuilderConfig cfg;
  cfg.setThreads(2);
  r.engine = Builder().build(net, cfg);
  return r;
}

}  // namespace kiln::test
