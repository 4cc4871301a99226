#include "seed_plans.h"

#include <array>
#include <random>

#include "kiln/kiln.h"
#include "runtime/engine_graph.h"
#include "runtime/engine_impl.h"

namespace kiln::fuzz {

namespace {

HostTensor randomFloats(const Dims& d, uint32_t seed, float lo = -0.5f, float hi = 0.5f) {
  HostTensor t(DataType::kFLOAT, d);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.count(); ++i) t.as<float>()[i] = u(rng);
  return t;
}

HostTensor scalar(float v) {
  HostTensor t(DataType::kFLOAT, {});
  *t.as<float>() = v;
  return t;
}

HostTensor ints(const std::vector<int64_t>& v) {
  HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

using Range = std::array<Dims, 3>;
OptimizationProfile profile(const std::vector<std::pair<std::string, Range>>& ranges) {
  OptimizationProfile p;
  for (const auto& [name, r] : ranges) {
    p.setDimensions(name, OptProfileSelector::kMIN, r[0]);
    p.setDimensions(name, OptProfileSelector::kOPT, r[1]);
    p.setDimensions(name, OptProfileSelector::kMAX, r[2]);
  }
  return p;
}

Tensor* output(Network& net, Tensor* t, const std::string& name) {
  net.renameTensor(t, name);
  net.markOutput(t);
  return t;
}

// Conv -> BatchNorm -> Clip, a residual conv Add, MaxPool and AveragePool branches concatenated,
// GlobalAveragePool -> Flatten -> Gemm -> Softmax: BN folding, activation and residual fusions.
void cnn(Network& net) {
  Tensor* x = net.addInput("x", DataType::kFLOAT, {1, 3, 8, 8});
  Layer* c1 = net.addConvolution(x, randomFloats({4, 3, 3, 3}, 1), randomFloats({4}, 2), {1, 1}, {1, 1, 1, 1});
  Layer* bn = net.addLayer("BatchNormalization",
                           {c1->outputs[0], net.addConstant("bn_s", randomFloats({4}, 3)), net.addConstant("bn_b", randomFloats({4}, 4)),
                            net.addConstant("bn_m", randomFloats({4}, 5)), net.addConstant("bn_v", randomFloats({4}, 6, 0.5f, 1.5f))},
                           1);
  Layer* act = net.addLayer("Clip", {bn->outputs[0], net.addConstant("lo", scalar(0.f)), net.addConstant("hi", scalar(6.f))}, 1);
  Layer* c2 = net.addConvolution(x, randomFloats({4, 3, 1, 1}, 7), randomFloats({4}, 8), {1, 1}, {0, 0, 0, 0});
  Layer* add = net.addElementWise(act->outputs[0], c2->outputs[0], "Add");
  Attributes pool;
  pool.set("kernel_shape", std::vector<int64_t>{2, 2});
  pool.set("strides", std::vector<int64_t>{2, 2});
  Layer* mp = net.addLayer("MaxPool", {add->outputs[0]}, 1, pool);
  Layer* ap = net.addLayer("AveragePool", {add->outputs[0]}, 1, pool);
  Attributes cat;
  cat.set("axis", int64_t(1));
  Layer* cc = net.addLayer("Concat", {mp->outputs[0], ap->outputs[0]}, 1, cat);
  Layer* gap = net.addLayer("GlobalAveragePool", {cc->outputs[0]}, 1);
  Attributes fl;
  fl.set("axis", int64_t(1));
  Layer* flat = net.addLayer("Flatten", {gap->outputs[0]}, 1, fl);
  Layer* gemm = net.addLayer("Gemm", {flat->outputs[0], net.addConstant("fc_w", randomFloats({8, 5}, 9)), net.addConstant("fc_b", randomFloats({5}, 10))}, 1);
  output(net, net.addSoftmax(gemm->outputs[0], -1)->outputs[0], "prob");
}

// One-direction LSTM over [seq 5, batch 2, input 4], hidden 3: Y and Y_h.
void lstm(Network& net) {
  Tensor* x = net.addInput("x", DataType::kFLOAT, {5, 2, 4});
  Attributes a;
  a.set("hidden_size", int64_t(3));
  Layer* l = net.addLayer("LSTM",
                          {x, net.addConstant("W", randomFloats({1, 12, 4}, 11)), net.addConstant("R", randomFloats({1, 12, 3}, 12)),
                           net.addConstant("B", randomFloats({1, 24}, 13))},
                          2, a);
  output(net, l->outputs[0], "y");
  output(net, l->outputs[1], "y_h");
}

// A one-layer BERT-style encoder over ids[-1, -1] (int64) with two profiles: embedding Gather,
// LayerNorm, multi-head attention (2 heads of 4) with a scale, Softmax, GELU (erf form), residuals.
void bert(Network& net) {
  const int64_t D = 8, H = 2, Dh = 4, V = 11;
  Tensor* ids = net.addInput("ids", DataType::kINT64, {-1, -1});
  Layer* emb = net.addLayer("Gather", {net.addConstant("emb", randomFloats({V, D}, 20)), ids}, 1);
  Attributes ln;
  ln.set("axis", int64_t(-1));
  ln.set("epsilon", 1e-5f);
  Layer* n1 = net.addLayer("LayerNormalization",
                           {emb->outputs[0], net.addConstant("ln1_s", randomFloats({D}, 21, 0.5f, 1.5f)), net.addConstant("ln1_b", randomFloats({D}, 22))}, 1, ln);
  Tensor* h = n1->outputs[0];
  auto linear = [&](Tensor* in, uint32_t seed, int64_t out) {
    Layer* mm = net.addMatMul(in, net.addConstant("w" + std::to_string(seed), randomFloats({D, out}, seed)));
    return net.addElementWise(mm->outputs[0], net.addConstant("b" + std::to_string(seed), randomFloats({out}, seed + 1)), "Add")->outputs[0];
  };
  auto heads = [&](Tensor* t, bool keyT) {  // [B,S,D] -> [B,H,S,Dh] (or [B,H,Dh,S] for keys)
    Layer* r = net.addLayer("Reshape", {t, net.addConstant("hs" + std::to_string(keyT), ints({0, 0, H, Dh}))}, 1);
    Attributes p;
    p.set("perm", keyT ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3});
    return net.addLayer("Transpose", {r->outputs[0]}, 1, p)->outputs[0];
  };
  Tensor* q = heads(linear(h, 30, D), false);
  Tensor* k = heads(linear(h, 32, D), true);
  Tensor* v = heads(linear(h, 34, D), false);
  Tensor* s = net.addElementWise(net.addMatMul(q, k)->outputs[0], net.addConstant("scale", scalar(0.5f)), "Mul")->outputs[0];
  Tensor* p = net.addSoftmax(s, -1)->outputs[0];
  Tensor* ctx = net.addMatMul(p, v)->outputs[0];
  Attributes perm;
  perm.set("perm", std::vector<int64_t>{0, 2, 1, 3});
  Tensor* ct = net.addLayer("Transpose", {ctx}, 1, perm)->outputs[0];
  Tensor* merged = net.addLayer("Reshape", {ct, net.addConstant("merge", ints({0, 0, D}))}, 1)->outputs[0];
  Tensor* attn = net.addElementWise(linear(merged, 36, D), h, "Add")->outputs[0];
  // GELU, erf form: x * 0.5 * (1 + erf(x / sqrt(2)))
  Tensor* up = linear(attn, 38, D);
  Tensor* e = net.addLayer("Erf", {net.addElementWise(up, net.addConstant("sqrt2", scalar(1.41421356f)), "Div")->outputs[0]}, 1)->outputs[0];
  Tensor* g = net.addElementWise(net.addElementWise(up, net.addElementWise(e, net.addConstant("one", scalar(1.f)), "Add")->outputs[0], "Mul")->outputs[0],
                                 net.addConstant("half", scalar(0.5f)), "Mul")->outputs[0];
  Layer* n2 = net.addLayer("LayerNormalization",
                           {net.addElementWise(g, attn, "Add")->outputs[0], net.addConstant("ln2_s", randomFloats({D}, 40, 0.5f, 1.5f)),
                            net.addConstant("ln2_b", randomFloats({D}, 41))}, 1, ln);
  output(net, n2->outputs[0], "hidden");
}

// Expand of x[1, 3] to the shape given as an input's values (a shape tensor), then Relu.
void shapeInput(Network& net) {
  Tensor* x = net.addInput("x", DataType::kFLOAT, {1, 3});
  Tensor* shape = net.addInput("shape", DataType::kINT64, {2});
  Layer* ex = net.addLayer("Expand", {x, shape}, 1);
  output(net, net.addActivation(ex->outputs[0], "Relu")->outputs[0], "y");
}

// y = Sigmoid(x[-1, 4] @ W + b) with two profiles (batch 1-4 and 8-16).
void mlp(Network& net) {
  Tensor* x = net.addInput("x", DataType::kFLOAT, {-1, 4});
  Layer* mm = net.addMatMul(x, net.addConstant("w", randomFloats({4, 3}, 50)));
  Layer* add = net.addElementWise(mm->outputs[0], net.addConstant("b", randomFloats({3}, 51)), "Add");
  output(net, net.addActivation(add->outputs[0], "Sigmoid")->outputs[0], "y");
}

SeedPlan seed(const std::string& name, void (*make)(Network&), const std::vector<OptimizationProfile>& profiles) {
  Network net;
  make(net);
  BuilderConfig cfg;
  cfg.setThreads(1);
  cfg.setBuilderOptimizationLevel(1);
  for (const auto& p : profiles) cfg.addOptimizationProfile(p);
  auto engine = Builder().build(net, cfg);
  SeedPlan s;
  s.name = name;
  s.bytes = serializePlan(engine->impl->graph, &s.fields);
  return s;
}

}  // namespace

std::vector<SeedPlan> makeSeedPlans() {
  std::vector<SeedPlan> out;
  out.push_back(seed("cnn", cnn, {}));
  out.push_back(seed("lstm", lstm, {}));
  out.push_back(seed("bert", bert,
                     {profile({{"ids", Range{Dims{1, 2}, Dims{2, 5}, Dims{2, 8}}}}),
                      profile({{"ids", Range{Dims{3, 4}, Dims{4, 6}, Dims{4, 9}}}})}));
  out.push_back(seed("shape_input", shapeInput, {}));
  out.push_back(seed("mlp", mlp,
                     {profile({{"x", Range{Dims{1, 4}, Dims{2, 4}, Dims{4, 4}}}}),
                      profile({{"x", Range{Dims{8, 4}, Dims{12, 4}, Dims{16, 4}}}})}));
  return out;
}

}  // namespace kiln::fuzz
