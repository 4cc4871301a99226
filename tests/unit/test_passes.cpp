// Builder passes: each fusion fires on its pattern and the fused engine computes what the
// unfused network computes with reference kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "reference_eval.h"

using namespace kiln;
using kiln::test::randomTensor;

namespace {

HostTensor scalar(float v) {
  HostTensor t(DataType::kFLOAT, {});
  *t.as<float>() = v;
  return t;
}

// Builds the same network twice (one for the reference, one for the builder) and compares.
template <typename MakeNet>
std::string checkFusion(MakeNet make, const std::map<std::string, HostTensor>& inputs, float tol = 1e-4f) {
  Network net;
  auto [engine, ref] = kiln::test::buildWithReference(make, net, inputs);
  auto out = kiln::test::runEngine(*engine, inputs);
  for (auto& [name, r] : ref) {
    const auto& o = out.at(name);
    EXPECT_EQ(static_cast<int64_t>(o.size()), r.count());
    for (int64_t i = 0; i < r.count(); ++i) {
      float rv = r.template as<float>()[i];
      EXPECT_NEAR(o[static_cast<size_t>(i)], rv, tol * (1 + std::fabs(rv))) << name << "[" << i << "]";
    }
  }
  return engine->getLayerInformation();
}

}  // namespace

TEST(Passes, BatchNormFoldsIntoConvAndReluFuses) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {1, 3, 6, 6});
    Layer* c = n.addConvolution(x, randomTensor({5, 3, 3, 3}, 1), randomTensor({5}, 2), {1, 1}, {1, 1, 1, 1});
    Attributes a;
    a.set("epsilon", 1e-3f);
    Layer* bn = n.addLayer("BatchNormalization",
                           {c->outputs[0], n.addConstant("s", randomTensor({5}, 3, 0.5f, 1.5f)), n.addConstant("b", randomTensor({5}, 4)),
                            n.addConstant("m", randomTensor({5}, 5)), n.addConstant("v", randomTensor({5}, 6, 0.5f, 2.f))},
                           1, a);
    Layer* r = n.addActivation(bn->outputs[0], "Relu");
    n.renameTensor(r->outputs[0], "y");
    n.markOutput(r->outputs[0]);
  };
  std::string info = checkFusion(make, {{"x", randomTensor({1, 3, 6, 6}, 9)}});
  EXPECT_NE(info.find("BatchNormalization:"), std::string::npos) << info;
  EXPECT_NE(info.find("Relu:"), std::string::npos) << info;
}

// DenseNet's pre-activation: Concat -> BN -> ReLU -> Conv. The BN has no conv to fold into; it
// becomes a per-channel Mul and Add that chain with the ReLU into one PointwiseChain layer. A BN
// that is a network output keeps its name.
TEST(Passes, BatchNormWithoutConvBecomesPointwiseChain) {
  auto bn = [](Network& n, Tensor* x, int64_t c, uint32_t seed) {
    Attributes a;
    a.set("epsilon", 1e-3f);
    return n.addLayer("BatchNormalization",
                      {x, n.addConstant("s" + std::to_string(seed), randomTensor({c}, seed, 0.5f, 1.5f)),
                       n.addConstant("b" + std::to_string(seed), randomTensor({c}, seed + 1)),
                       n.addConstant("m" + std::to_string(seed), randomTensor({c}, seed + 2)),
                       n.addConstant("v" + std::to_string(seed), randomTensor({c}, seed + 3, 0.5f, 2.f))},
                      1, a);
  };
  auto make = [&](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 3, 6, 6});
    Tensor* z = n.addInput("z", DataType::kFLOAT, {2, 2, 6, 6});
    Attributes ca;
    ca.set("axis", int64_t(1));
    Layer* cat = n.addLayer("Concat", {x, z}, 1, ca);
    Layer* b1 = bn(n, cat->outputs[0], 5, 10);
    Layer* r = n.addActivation(b1->outputs[0], "Relu");
    Layer* c = n.addConvolution(r->outputs[0], randomTensor({4, 5, 1, 1}, 1), randomTensor({4}, 2), {1, 1}, {0, 0, 0, 0});
    n.renameTensor(c->outputs[0], "y");
    n.markOutput(c->outputs[0]);
    Layer* b2 = bn(n, z, 2, 20);  // [N, C, H, W] output of a BN alone
    n.renameTensor(b2->outputs[0], "w");
    n.markOutput(b2->outputs[0]);
  };
  std::string info = checkFusion(make, {{"x", randomTensor({2, 3, 6, 6}, 9)}, {"z", randomTensor({2, 2, 6, 6}, 8)}});
  EXPECT_EQ(info.find("\"op\":\"BatchNormalization\""), std::string::npos) << info;
  EXPECT_NE(info.find("PointwiseChain"), std::string::npos) << info;
}

// A BatchNormalization whose input sits far from zero against its spread (mean 1000, std 0.1: a
// residual stream's running statistics) keeps BatchNormalization's accuracy when lowered: it is
// centered first. x * a + (beta - mean * a) loses ~1e-3 here (float32 ulp at 1e4 against outputs
// of order 1), beyond the 1e-5 this allows.
TEST(Passes, LoweredBatchNormCentersFirst) {
  constexpr int64_t C = 3;
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {2, C, 4, 4});
    HostTensor mean(DataType::kFLOAT, {C}), var(DataType::kFLOAT, {C});
    for (int64_t k = 0; k < C; ++k) mean.as<float>()[k] = 1000.f + 10.f * static_cast<float>(k), var.as<float>()[k] = 0.01f;
    Layer* bn = n.addLayer("BatchNormalization",
                           {x, n.addConstant("s", randomTensor({C}, 3, 0.5f, 1.5f)), n.addConstant("b", randomTensor({C}, 4)),
                            n.addConstant("m", mean), n.addConstant("v", var)},
                           1);
    Layer* r = n.addActivation(bn->outputs[0], "Relu");
    n.renameTensor(r->outputs[0], "y");
    n.markOutput(r->outputs[0]);
  };
  HostTensor x(DataType::kFLOAT, {2, C, 4, 4});
  const HostTensor noise = randomTensor({2, C, 4, 4}, 5);
  for (int64_t i = 0; i < x.count(); ++i) x.as<float>()[i] = 1000.f + 10.f * static_cast<float>((i / 16) % C) + 0.3f * noise.as<float>()[i];
  std::string info = checkFusion(make, {{"x", x}}, 1e-5f);
  EXPECT_EQ(info.find("\"op\":\"BatchNormalization\""), std::string::npos) << info;
}

TEST(Passes, ResidualAddFusesIntoConv) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {1, 4, 5, 5});
    Layer* c = n.addConvolution(x, randomTensor({4, 4, 3, 3}, 1), randomTensor({4}, 2), {1, 1}, {1, 1, 1, 1});
    Layer* add = n.addElementWise(c->outputs[0], x, "Add");
    Layer* r = n.addActivation(add->outputs[0], "Relu");
    n.renameTensor(r->outputs[0], "y");
    n.markOutput(r->outputs[0]);
  };
  std::string info = checkFusion(make, {{"x", randomTensor({1, 4, 5, 5}, 9)}});
  EXPECT_NE(info.find("Add:"), std::string::npos) << info;
}

// Layer scale (PoolFormer / ConvNeXt: x + gamma[c] * conv(h); CaiT / DINOv2: x + gamma * linear(h)):
// the per-channel Mul goes into the conv's filters and bias (then the residual Add into the conv)
// or the MatMul's columns and bias; a Div and a scalar Sub fold too, a bias-less conv gets one, and
// a Mul that broadcasts along another axis or by a computed tensor stays (the reference evaluator
// computes the unfused network).
TEST(Passes, PerChannelScaleAndShiftFoldIntoConvAndMatMul) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 4, 5, 5});
    Layer* c = n.addConvolution(x, randomTensor({4, 4, 1, 1}, 1), randomTensor({4}, 2), {1, 1}, {0, 0, 0, 0});
    Layer* ls = n.addElementWise(n.addConstant("gamma", randomTensor({4, 1, 1}, 3, 0.5f, 1.5f)), c->outputs[0], "Mul");
    Layer* add = n.addElementWise(ls->outputs[0], x, "Add");
    // A bias-less conv, divided per channel, then minus a scalar; its output is a network output.
    Layer* c2 = n.addConvolution(add->outputs[0], randomTensor({4, 4, 3, 3}, 4), HostTensor(), {1, 1}, {1, 1, 1, 1});
    Layer* dv = n.addElementWise(c2->outputs[0], n.addConstant("d", randomTensor({1, 4, 1, 1}, 5, 1.f, 2.f)), "Div");
    Layer* sb = n.addElementWise(dv->outputs[0], n.addConstant("t", scalar(0.25f)), "Sub");
    n.renameTensor(sb->outputs[0], "y");
    n.markOutput(sb->outputs[0]);
    // Stays: a Mul by a per-column constant [1, 1, 1, 5] and one by the input.
    Layer* c3 = n.addConvolution(x, randomTensor({4, 4, 1, 1}, 6), randomTensor({4}, 7), {1, 1}, {0, 0, 0, 0});
    Layer* col = n.addElementWise(c3->outputs[0], n.addConstant("col", randomTensor({1, 1, 1, 5}, 8)), "Mul");
    Layer* c4 = n.addConvolution(col->outputs[0], randomTensor({4, 4, 1, 1}, 9), randomTensor({4}, 10), {1, 1}, {0, 0, 0, 0});
    Layer* byX = n.addElementWise(c4->outputs[0], x, "Mul");
    n.renameTensor(byX->outputs[0], "z");
    n.markOutput(byX->outputs[0]);
    // Tokens [2, 7, 6] -> linear (MatMul + bias) -> * gamma[6] -> + tokens; and a linear whose Mul is
    // per row ([7, 1]: stays).
    Tensor* t = n.addInput("tok", DataType::kFLOAT, {2, 7, 6});
    Layer* mm = n.addMatMul(t, n.addConstant("wl", randomTensor({6, 6}, 12)));
    Layer* mb = n.addElementWise(mm->outputs[0], n.addConstant("bl", randomTensor({6}, 13)), "Add");
    Layer* g = n.addElementWise(mb->outputs[0], n.addConstant("gl", randomTensor({6}, 14, 0.5f, 1.5f)), "Mul");
    Layer* res = n.addElementWise(g->outputs[0], t, "Add");
    n.renameTensor(res->outputs[0], "u");
    n.markOutput(res->outputs[0]);
    // A layer with an input left out (Clip's min: null) before a Mul: not a producer, no crash.
    Layer* clip = n.addLayer("Clip", {t, nullptr, n.addConstant("hi", scalar(0.5f))}, 1);
    Layer* cm = n.addElementWise(clip->outputs[0], n.addConstant("cg", randomTensor({6}, 18)), "Mul");
    n.renameTensor(cm->outputs[0], "w");
    n.markOutput(cm->outputs[0]);
    Layer* mm2 = n.addMatMul(t, n.addConstant("wr", randomTensor({6, 3}, 15)));
    Layer* row = n.addElementWise(mm2->outputs[0], n.addConstant("rows", randomTensor({7, 1}, 16)), "Mul");
    n.renameTensor(row->outputs[0], "v");
    n.markOutput(row->outputs[0]);
  };
  std::string info = checkFusion(make, {{"x", randomTensor({2, 4, 5, 5}, 11)}, {"tok", randomTensor({2, 7, 6}, 17)}});
  for (const char* folded : {"\"Mul:", "\"Add:", "\"Div:", "\"Sub:"}) EXPECT_NE(info.find(folded), std::string::npos) << folded << info;
  auto count = [&](const std::string& what) {
    size_t k = 0;
    for (size_t at = info.find(what); at != std::string::npos; at = info.find(what, at + 1)) ++k;
    return k;
  };
  // Left: the per-column, computed and per-row Muls (as Mul or PointwiseChain layers), the token
  // residual Add (no MatMul residual fusion on the CPU), the Clip's Mul (maybe chained with it).
  EXPECT_EQ(count("\"op\":\"Mul\"") + count("\"op\":\"PointwiseChain\"") + count("\"op\":\"Add\""), 5u) << info;
  EXPECT_EQ(count("\"op\":\"Div\""), 0u) << info;
  EXPECT_EQ(count("\"op\":\"Sub\""), 0u) << info;
  // The layers whose fused ops start with `producer` and include a Mul (layer info lists fusedOps
  // first in each layer's object).
  auto scaled = [&](const std::string& producer) {
    size_t k = 0;
    const std::string head = "\"fusedOps\":[\"" + producer + ":";
    for (size_t at = info.find(head); at != std::string::npos; at = info.find(head, at + 1)) {
      const std::string ops = info.substr(at, info.find(']', at) - at);
      k += ops.find("\"Mul:") != std::string::npos;
    }
    return k;
  };
  EXPECT_EQ(scaled("Conv"), 1u) << "the conv's layer scale folded: " << info;
  EXPECT_EQ(scaled("MatMul"), 1u) << "the linear's layer scale folded: " << info;
}

TEST(Passes, ErfGeluAndMatMulBiasFuse) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 3, 8});
    Layer* mm = n.addMatMul(x, n.addConstant("w", randomTensor({8, 6}, 1)));
    Layer* add = n.addElementWise(mm->outputs[0], n.addConstant("bias", randomTensor({6}, 2)), "Add");
    Tensor* h = add->outputs[0];
    Layer* div = n.addElementWise(h, n.addConstant("", scalar(std::sqrt(2.f))), "Div");
    Layer* erf = n.addLayer("Erf", {div->outputs[0]}, 1);
    Layer* one = n.addElementWise(erf->outputs[0], n.addConstant("", scalar(1.f)), "Add");
    Layer* m1 = n.addElementWise(h, one->outputs[0], "Mul");
    Layer* m2 = n.addElementWise(m1->outputs[0], n.addConstant("", scalar(0.5f)), "Mul");
    n.renameTensor(m2->outputs[0], "y");
    n.markOutput(m2->outputs[0]);
  };
  std::string info = checkFusion(make, {{"x", randomTensor({2, 3, 8}, 9)}});
  EXPECT_NE(info.find("Erf:"), std::string::npos) << info;
  EXPECT_NE(info.find("\"op\":\"MatMul\""), std::string::npos) << info;
  EXPECT_EQ(info.find("\"op\":\"Erf\""), std::string::npos) << info;
}

// GPT-2's "new GELU": 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3)))), with the
// cube as Pow and as x * (x * x); it becomes Gelu(approximate=tanh) and joins the MatMul.
TEST(Passes, TanhGeluFuses) {
  for (bool pow : {true, false}) {
    auto make = [pow](Network& n) {
      Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 3, 8});
      Layer* mm = n.addMatMul(x, n.addConstant("w", randomTensor({8, 6}, 1)));
      Tensor* h = n.addElementWise(mm->outputs[0], n.addConstant("bias", randomTensor({6}, 2)), "Add")->outputs[0];
      Tensor* cube = pow ? n.addElementWise(h, n.addConstant("", scalar(3.f)), "Pow")->outputs[0]
                         : n.addElementWise(h, n.addElementWise(h, h, "Mul")->outputs[0], "Mul")->outputs[0];
      Tensor* t = n.addElementWise(n.addConstant("", scalar(0.044715f)), cube, "Mul")->outputs[0];
      t = n.addElementWise(h, t, "Add")->outputs[0];
      t = n.addElementWise(n.addConstant("", scalar(std::sqrt(2.f / 3.14159265f))), t, "Mul")->outputs[0];
      t = n.addLayer("Tanh", {t}, 1)->outputs[0];
      t = n.addElementWise(n.addConstant("", scalar(1.f)), t, "Add")->outputs[0];
      Tensor* half = n.addElementWise(n.addConstant("", scalar(0.5f)), h, "Mul")->outputs[0];
      Tensor* y = n.addElementWise(half, t, "Mul")->outputs[0];
      n.renameTensor(y, "y");
      n.markOutput(y);
    };
    std::string info = checkFusion(make, {{"x", randomTensor({2, 3, 8}, 9, -3.f, 3.f)}});
    EXPECT_NE(info.find("Tanh:"), std::string::npos) << info;
    EXPECT_NE(info.find("\"op\":\"MatMul\""), std::string::npos) << info;
    EXPECT_EQ(info.find("\"op\":\"Tanh\""), std::string::npos) << info;
    EXPECT_EQ(info.find("\"op\":\"PointwiseChain\""), std::string::npos) << info;
  }
}

// GPT-2's MLP: Gemm on [B*S, K], Reshape to [B, S, N], then the activation: it moves into the
// Gemm (elementwise, so before or after the Reshape is the same).
// GroupNorm as PyTorch exports it (Reshape [N, G, -1] -> InstanceNormalization -> Reshape back ->
// Mul gamma -> Add beta), here with a non-trivial instance scale/bias too, then SiLU: one
// GroupNormalization with the SiLU fused, equal to the unfused graph's reference.
TEST(Passes, GroupNormPatternFusesWithItsActivation) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 8, 5, 3});
    auto shape = [&](std::vector<int64_t> v) {
      HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
      for (size_t k = 0; k < v.size(); ++k) t.as<int64_t>()[k] = v[k];
      return n.addConstant("", t);
    };
    Tensor* r = n.addLayer("Reshape", {x, shape({0, 4, -1})}, 1)->outputs[0];
    Attributes eps;
    eps.set("epsilon", 1e-3f);
    Tensor* in = n.addLayer("InstanceNormalization", {r, n.addConstant("s", randomTensor({4}, 3, 0.5f, 1.5f)),
                                                      n.addConstant("b", randomTensor({4}, 4))}, 1, eps)->outputs[0];
    Tensor* back = n.addLayer("Reshape", {in, shape({2, 8, 5, 3})}, 1)->outputs[0];
    Tensor* g = n.addElementWise(back, n.addConstant("gamma", randomTensor({8, 1, 1}, 5)), "Mul")->outputs[0];
    Tensor* b = n.addElementWise(g, n.addConstant("beta", randomTensor({8, 1, 1}, 6)), "Add")->outputs[0];
    Tensor* y = n.addElementWise(b, n.addActivation(b, "Sigmoid")->outputs[0], "Mul")->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  std::string info = checkFusion(make, {{"x", randomTensor({2, 8, 5, 3}, 9, -2.f, 3.f)}});
  EXPECT_NE(info.find("\"op\":\"GroupNormalization\""), std::string::npos) << info;
  EXPECT_EQ(info.find("\"op\":\"InstanceNormalization\""), std::string::npos) << info;
  EXPECT_EQ(info.find("\"op\":\"Mul\""), std::string::npos) << info;
  EXPECT_NE(info.find("\"Sigmoid:"), std::string::npos) << info;
}

TEST(Passes, ActivationFusesThroughReshape) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {6, 8});
    Tensor* g = n.addLayer("Gemm", {x, n.addConstant("w", randomTensor({8, 10}, 1)), n.addConstant("c", randomTensor({10}, 2))}, 1)->outputs[0];
    HostTensor shape(DataType::kINT64, {3});
    shape.as<int64_t>()[0] = 2, shape.as<int64_t>()[1] = 3, shape.as<int64_t>()[2] = 10;
    Tensor* r = n.addLayer("Reshape", {g, n.addConstant("s", shape)}, 1)->outputs[0];
    Tensor* y = n.addActivation(r, "Relu")->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  std::string info = checkFusion(make, {{"x", randomTensor({6, 8}, 9)}});
  EXPECT_EQ(info.find("\"op\":\"Relu\""), std::string::npos) << info;
  EXPECT_NE(info.find("Relu:"), std::string::npos) << info;
}

TEST(Passes, DecomposedLayerNormFuses) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 4, 16});
    HostTensor axes(DataType::kINT64, {1});
    *axes.as<int64_t>() = -1;
    Layer* m = n.addLayer("ReduceMean", {x, n.addConstant("", axes)}, 1);
    Layer* d = n.addElementWise(x, m->outputs[0], "Sub");
    Layer* p = n.addElementWise(d->outputs[0], n.addConstant("", scalar(2.f)), "Pow");
    Layer* v = n.addLayer("ReduceMean", {p->outputs[0], n.addConstant("", axes)}, 1);
    Layer* e = n.addElementWise(v->outputs[0], n.addConstant("", scalar(1e-5f)), "Add");
    Layer* s = n.addLayer("Sqrt", {e->outputs[0]}, 1);
    Layer* q = n.addElementWise(d->outputs[0], s->outputs[0], "Div");
    Layer* g = n.addElementWise(q->outputs[0], n.addConstant("g", randomTensor({16}, 3)), "Mul");
    Layer* b = n.addElementWise(g->outputs[0], n.addConstant("b", randomTensor({16}, 4)), "Add");
    n.renameTensor(b->outputs[0], "y");
    n.markOutput(b->outputs[0]);
  };
  std::string info = checkFusion(make, {{"x", randomTensor({2, 4, 16}, 9)}});
  EXPECT_NE(info.find("\"op\":\"LayerNormalization\""), std::string::npos) << info;
  EXPECT_EQ(info.find("\"op\":\"Sqrt\""), std::string::npos) << info;
}

TEST(Passes, ConstantSubgraphsFold) {
  // Shape -> Gather -> Concat -> Reshape: the shape subgraph folds away at build time.
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 3, 4});
    Layer* sh = n.addLayer("Shape", {x}, 1);
    HostTensor idx(DataType::kINT64, {1});
    *idx.as<int64_t>() = 0;
    Layer* g = n.addLayer("Gather", {sh->outputs[0], n.addConstant("", idx)}, 1);
    HostTensor rest(DataType::kINT64, {1});
    *rest.as<int64_t>() = -1;
    Attributes ca;
    ca.set("axis", int64_t(0));
    Layer* cat = n.addLayer("Concat", {g->outputs[0], n.addConstant("", rest)}, 1, ca);
    Layer* r = n.addLayer("Reshape", {x, cat->outputs[0]}, 1);
    Layer* relu = n.addActivation(r->outputs[0], "Relu");
    n.renameTensor(relu->outputs[0], "y");
    n.markOutput(relu->outputs[0]);
  };
  std::string info = checkFusion(make, {{"x", randomTensor({2, 3, 4}, 9)}});
  EXPECT_EQ(info.find("\"op\":\"Shape\""), std::string::npos) << info;
  EXPECT_EQ(info.find("\"op\":\"Concat\""), std::string::npos) << info;
}

TEST(Passes, PointwiseChainFuses) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 3, 4, 5});
    Layer* a = n.addElementWise(x, n.addConstant("", scalar(1.7f)), "Mul");
    Layer* b = n.addElementWise(a->outputs[0], n.addConstant("bias", randomTensor({3, 1, 1}, 2)), "Add");
    Layer* c = n.addActivation(b->outputs[0], "Sigmoid");
    Layer* d = n.addElementWise(n.addConstant("", scalar(1.f)), c->outputs[0], "Sub");  // 1 - v: swapped operand
    Layer* e = n.addElementWise(d->outputs[0], n.addInput("z", DataType::kFLOAT, {5}), "Div");
    Layer* f = n.addLayer("Sqrt", {e->outputs[0]}, 1);
    Layer* g = n.addActivation(f->outputs[0], "LeakyRelu", 0.3f);
    n.renameTensor(g->outputs[0], "y");
    n.markOutput(g->outputs[0]);
  };
  std::string info = checkFusion(make, {{"x", randomTensor({2, 3, 4, 5}, 9)}, {"z", randomTensor({5}, 10, 0.5f, 2.f)}});
  EXPECT_NE(info.find("\"op\":\"PointwiseChain\""), std::string::npos) << info;
  EXPECT_EQ(info.find("\"op\":\"Sqrt\""), std::string::npos) << info;
  EXPECT_EQ(info.find("\"op\":\"Mul\""), std::string::npos) << info;
}

#include "builder/passes/passes.h"
#include "ops/shape_propagation.h"
#include "ops/pointwise_chain.h"

// SiLU (x * Sigmoid(x), either operand order) after a Conv and Mish (x * Tanh(Softplus(x))) after a
// MatMul, as exporters write them, join their producer's epilogue; results equal the unfused
// graph's reference evaluation. A gate whose x has a third reader stays unfused.
TEST(Passes, GatedActivationsFuseIntoProducers) {
  for (bool swapped : {false, true}) {
    auto make = [swapped](Network& n) {
      Tensor* x = n.addInput("x", DataType::kFLOAT, {1, 3, 6, 6});
      Layer* c = n.addConvolution(x, randomTensor({5, 3, 3, 3}, 1), randomTensor({5}, 2), {1, 1}, {1, 1, 1, 1});
      Layer* s = n.addActivation(c->outputs[0], "Sigmoid");
      Layer* m = swapped ? n.addElementWise(s->outputs[0], c->outputs[0], "Mul") : n.addElementWise(c->outputs[0], s->outputs[0], "Mul");
      Layer* mm = n.addMatMul(n.addInput("a", DataType::kFLOAT, {4, 16}), n.addConstant("w", randomTensor({16, 8}, 3)));
      Layer* sp = n.addActivation(mm->outputs[0], "Softplus");
      Layer* th = n.addActivation(sp->outputs[0], "Tanh");
      Layer* mish = n.addElementWise(mm->outputs[0], th->outputs[0], "Mul");
      n.renameTensor(m->outputs[0], "y");
      n.renameTensor(mish->outputs[0], "z");
      n.markOutput(m->outputs[0]);
      n.markOutput(mish->outputs[0]);
    };
    std::string info = checkFusion(make, {{"x", randomTensor({1, 3, 6, 6}, 9, -3.f, 3.f)}, {"a", randomTensor({4, 16}, 10, -2.f, 2.f)}});
    EXPECT_NE(info.find("\"Sigmoid:"), std::string::npos) << info;  // fusedOps of the Conv
    EXPECT_NE(info.find("\"Softplus:"), std::string::npos) << info;  // and of the MatMul
    EXPECT_EQ(info.find("\"op\":\"Mul\""), std::string::npos) << info;
    EXPECT_EQ(info.find("\"op\":\"Sigmoid\""), std::string::npos) << info;
    EXPECT_EQ(info.find("\"op\":\"Tanh\""), std::string::npos) << info;
  }
  // x also feeds an Add: the gate cannot move into the producer.
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {4, 16});
  Layer* mm = net.addMatMul(x, net.addConstant("w", randomTensor({16, 16}, 3)));
  Layer* s = net.addActivation(mm->outputs[0], "Sigmoid");
  Layer* m = net.addElementWise(mm->outputs[0], s->outputs[0], "Mul");
  Layer* add = net.addElementWise(m->outputs[0], mm->outputs[0], "Add");
  net.markOutput(add->outputs[0]);
  net.topoSort();
  propagateShapes(net, nullptr, true);
  EXPECT_FALSE(fuseActivation(net));
}

// GELU spelled as no pattern expects (fuse_gelu_by_value): BLOOM's
// 0.5x * (1 + tanh(0.79788456 x (1 + 0.044715 x^2))) and an exact GELU written
// 0.5 * (x + x * erf(x * 0.70710678)) become one Gelu each (tanh / exact), also where the GELU's
// value goes on into a region with a second input; the tanh constant off by 1% is not a GELU and
// stays. Each network equals its unfused reference.
TEST(Passes, GeluAnySpellingFusesByValue) {
  auto bloom = [](Network& n, Tensor* x, float c) {
    Tensor* a = n.addElementWise(x, n.addConstant("", scalar(0.5f)), "Mul")->outputs[0];
    Tensor* b = n.addElementWise(n.addConstant("", scalar(c)), x, "Mul")->outputs[0];
    Tensor* k = n.addElementWise(n.addConstant("", scalar(0.044715f)), x, "Mul")->outputs[0];
    k = n.addElementWise(k, x, "Mul")->outputs[0];
    k = n.addElementWise(n.addConstant("", scalar(1.f)), k, "Add")->outputs[0];
    Tensor* t = n.addLayer("Tanh", {n.addElementWise(b, k, "Mul")->outputs[0]}, 1)->outputs[0];
    t = n.addElementWise(n.addConstant("", scalar(1.f)), t, "Add")->outputs[0];
    return n.addElementWise(a, t, "Mul")->outputs[0];
  };
  auto exact = [](Network& n, Tensor* x) {
    Tensor* e = n.addLayer("Erf", {n.addElementWise(x, n.addConstant("", scalar(0.70710678f)), "Mul")->outputs[0]}, 1)->outputs[0];
    Tensor* s = n.addElementWise(x, n.addElementWise(x, e, "Mul")->outputs[0], "Add")->outputs[0];
    return n.addElementWise(s, n.addConstant("", scalar(0.5f)), "Mul")->outputs[0];
  };
  struct Case {
    const char* name;
    int gelus, tanhs, erfs;
    const char* approximate;
  };
  const Case cases[] = {{"BLOOM", 1, 0, 0, "tanh"}, {"exact", 1, 0, 0, "none"}, {"off by 1%", 0, 1, 0, ""}, {"then more", 1, 1, 0, "tanh"}};
  for (int form = 0; form < 4; ++form) {
    SCOPED_TRACE(cases[form].name);
    auto make = [&](Network& n) {
      Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 3, 8});
      Tensor* h = n.addMatMul(x, n.addConstant("w", randomTensor({8, 6}, 1)))->outputs[0];
      h = n.addElementWise(h, n.addConstant("bias", randomTensor({6}, 2)), "Add")->outputs[0];  // x is behind a bias
      Tensor* y = form == 1 ? exact(n, h) : bloom(n, h, form == 2 ? 0.806f : 0.79788456f);
      if (form == 3) {
        y = n.addElementWise(y, n.addInput("z", DataType::kFLOAT, {2, 3, 6}), "Mul")->outputs[0];
        y = n.addLayer("Tanh", {n.addElementWise(y, h, "Add")->outputs[0]}, 1)->outputs[0];
      }
      n.renameTensor(y, "y");
      n.markOutput(y);
      n.topoSort();
      propagateShapes(n, nullptr, true);
    };
    std::map<std::string, HostTensor> in{{"x", randomTensor({2, 3, 8}, 9, -3.f, 3.f)}};
    if (form == 3) in["z"] = randomTensor({2, 3, 6}, 10);
    Network ref;
    make(ref);
    Network net;
    make(net);
    EXPECT_EQ(fuseGeluByValue(net), cases[form].gelus > 0);
    removeFoldedLayers(net);
    int gelus = 0, tanhs = 0, erfs = 0;
    for (auto& l : net.layers()) {
      tanhs += l->op == "Tanh", erfs += l->op == "Erf";
      if (l->op != "Gelu") continue;
      ++gelus;
      EXPECT_EQ(l->attrs.getString("approximate", "none"), cases[form].approximate);
    }
    EXPECT_EQ(gelus, cases[form].gelus);
    EXPECT_EQ(tanhs, cases[form].tanhs);
    EXPECT_EQ(erfs, cases[form].erfs);
    kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), kiln::test::evaluateReference(ref, in), 1e-5);
  }
}

// Stacked constant operands (fold_constant_operands): (x + c1) + c2 and (x * c1) * c2 become one
// layer with the combined constant (broadcast [1, 4, 1] + [4, 1] -> [4, 1]), equal to the unfused
// network. Not folded: an inner result read elsewhere, Add then Mul, a combined constant of higher
// rank than x.
TEST(Passes, StackedConstantOperandsFold) {
  struct Form {
    const char* name;
    const char* inner;
    const char* outer;
    bool reread, wide;
    bool folded;
  };
  const Form forms[] = {{"add add", "Add", "Add", false, false, true},   {"mul mul", "Mul", "Mul", false, false, true},
                        {"read again", "Add", "Add", true, false, false}, {"add mul", "Add", "Mul", false, false, false},
                        {"wider", "Add", "Add", false, true, false}};
  for (const Form& f : forms) {
    SCOPED_TRACE(f.name);
    auto make = [&f](Network& n) {
      Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 4, 5});
      Tensor* a = n.addElementWise(x, n.addConstant("c1", randomTensor(f.wide ? Dims{1, 1, 4, 1} : Dims{1, 4, 1}, 1)), f.inner)->outputs[0];
      Tensor* y = n.addElementWise(n.addConstant("c2", randomTensor({4, 1}, 2)), a, f.outer)->outputs[0];
      if (f.reread) y = n.addElementWise(y, a, "Sub")->outputs[0];
      n.renameTensor(y, "y");
      n.markOutput(y);
      n.topoSort();
      propagateShapes(n, nullptr, true);
    };
    const std::map<std::string, HostTensor> in{{"x", randomTensor({2, 4, 5}, 3)}};
    Network ref;
    make(ref);
    Network net;
    make(net);
    EXPECT_EQ(foldConstantOperands(net), f.folded);
    removeFoldedLayers(net);
    int layers = 0;
    for (auto& l : net.layers()) layers += l->op == f.inner || l->op == f.outer;
    EXPECT_EQ(layers, f.folded ? 1 : 2 + f.reread * (std::string(f.inner) == "Sub"));
    kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), kiln::test::evaluateReference(ref, in), 1e-5);
  }
}

// SwiGLU (silu(x W1) * (x W3)): for the GPU (epilogueActsOnly) the SiLU and the Mul by the up
// projection join the gate MatMul as a gated linear unit (input 3 = the up projection's output,
// kiln_activation = Silu), so nothing is left for the pointwise chain; a ReLU still fuses into the
// MatMul; the CPU build fuses the SiLU alone (oneDNN's post-op) and keeps the Mul. Both equal the
// unfused graph's reference evaluation, whichever projection comes first.
TEST(Passes, GpuFusesSwiGluIntoTheGateMatMul) {
 for (bool upFirst : {false, true}) {
  SCOPED_TRACE(upFirst ? "up projection first" : "gate projection first");
  auto make = [upFirst](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {4, 16});
    Layer* up = upFirst ? n.addMatMul(x, n.addConstant("w3", randomTensor({16, 8}, 4))) : nullptr;
    Layer* gate = n.addMatMul(x, n.addConstant("w1", randomTensor({16, 8}, 3)));
    if (!upFirst) up = n.addMatMul(x, n.addConstant("w3", randomTensor({16, 8}, 4)));
    Layer* sig = n.addActivation(gate->outputs[0], "Sigmoid");
    Layer* silu = n.addElementWise(gate->outputs[0], sig->outputs[0], "Mul");
    Layer* mul = n.addElementWise(silu->outputs[0], up->outputs[0], "Mul");
    Layer* relu = n.addActivation(n.addMatMul(mul->outputs[0], n.addConstant("w2", randomTensor({8, 8}, 5)))->outputs[0], "Relu");
    Layer* out = n.addElementWise(relu->outputs[0], mul->outputs[0], "Add");
    n.renameTensor(out->outputs[0], "y");
    n.markOutput(out->outputs[0]);
    n.topoSort();
    propagateShapes(n, nullptr, true);
  };
  auto count = [](const Network& n, const std::string& op) {
    int c = 0;
    for (auto& l : n.layers()) c += l->op == op;
    return c;
  };
  const std::map<std::string, HostTensor> in{{"x", randomTensor({4, 16}, 7, -2.f, 2.f)}};
  Network ref;
  make(ref);
  const auto want = kiln::test::evaluateReference(ref, in);
  Network gpu;
  make(gpu);
  ASSERT_TRUE(fuseActivation(gpu, true));
  removeFoldedLayers(gpu);
  gpu.topoSort();
  EXPECT_EQ(count(gpu, "Sigmoid"), 0);
  EXPECT_EQ(count(gpu, "Mul"), 0);
  EXPECT_EQ(count(gpu, "Relu"), 0);
  int gated = 0;
  for (auto& l : gpu.layers())
    if (l->op == "MatMul" && l->inputs.size() == 4) {
      ++gated;
      EXPECT_EQ(fusedActivation(l->attrs).kind, ActKind::kSilu);
      ASSERT_NE(l->inputs[3], nullptr);
      EXPECT_EQ(l->inputs[3]->producer->op, "MatMul");  // the up projection
      EXPECT_EQ(l->inputs[1]->name, "w1");  // the gate projection takes the activation
    }
  EXPECT_EQ(gated, 1);
  EXPECT_FALSE(fusePointwiseChains(gpu));
  kiln::test::expectOutputsNear(kiln::test::evaluateReference(gpu, in), want, 1e-5);
  Network cpu;
  make(cpu);
  ASSERT_TRUE(fuseActivation(cpu));
  removeFoldedLayers(cpu);
  EXPECT_EQ(count(cpu, "Sigmoid"), 0);
  EXPECT_EQ(count(cpu, "Mul"), 1);  // silu * up
  for (auto& l : cpu.layers()) EXPECT_LE(l->inputs.size(), 3u) << l->name;
  kiln::test::expectOutputsNear(kiln::test::evaluateReference(cpu, in), want, 1e-5);
 }
}

// The other gated forms on the GPU: GeGLU (erf GELU, then Mul), ReGLU, a bare MatMul times a tensor, the
// multiplier on either side of the Mul, and a dynamic batch (the shapes compared at the samples).
// Left alone: a multiplier that broadcasts, a constant one, the gated value read again, a Gemm
// (no 4th input), a network output between the activation and the Mul.
TEST(Passes, GatedLinearUnitForms) {
  struct Form {
    const char* name;
    const char* act;  // "" = none
    bool swapped, broadcast, constant, reread, gemm, outputBetween;
    bool fused;
  };
  const Form forms[] = {
      {"GeGLU", "Gelu", false, false, false, false, false, false, true},
      {"ReGLU (an activation cuBLASLt fuses)", "Relu", false, false, false, false, false, false, true},
      {"bare", "", true, false, false, false, false, false, true},
      {"tanh, swapped", "Tanh", true, false, false, false, false, false, true},
      {"broadcast multiplier", "Gelu", false, true, false, false, false, false, false},
      {"constant multiplier", "Gelu", false, false, true, false, false, false, false},
      {"gated value read again", "Gelu", false, false, false, true, false, false, false},
      {"Gemm", "Gelu", false, false, false, false, true, false, false},
      {"output between", "Gelu", false, false, false, false, false, true, false},
  };
  for (const Form& f : forms) {
    auto make = [&f](Network& n) {
      Tensor* x = n.addInput("x", DataType::kFLOAT, {6, 16});
      Tensor* w = n.addConstant("w", randomTensor({16, 8}, 3));
      Layer* p = f.gemm ? n.addLayer("Gemm", {x, w}, 1) : n.addMatMul(x, w);
      Tensor* h = p->outputs[0];
      if (*f.act) h = n.addActivation(h, f.act)->outputs[0];
      Tensor* u = f.constant ? n.addConstant("u", randomTensor({6, 8}, 4))
                             : n.addMatMul(x, n.addConstant("w3", randomTensor({16, f.broadcast ? 1 : 8}, 5)))->outputs[0];
      Layer* mul = f.swapped ? n.addElementWise(u, h, "Mul") : n.addElementWise(h, u, "Mul");
      Tensor* y = mul->outputs[0];
      if (f.reread) y = n.addElementWise(y, h, "Add")->outputs[0];
      if (f.outputBetween) {
        n.renameTensor(h, "h");
        n.markOutput(h);
      }
      n.renameTensor(y, "y");
      n.markOutput(y);
      n.topoSort();
      propagateShapes(n, nullptr, true);
    };
    const std::map<std::string, HostTensor> in{{"x", randomTensor({6, 16}, 8, -2.f, 2.f)}};
    Network ref;
    make(ref);
    Network net;
    make(net);
    fuseActivation(net, true);
    removeFoldedLayers(net);
    net.topoSort();
    int gated = 0, muls = 0;
    for (auto& l : net.layers()) gated += (l->op == "MatMul" || l->op == "Gemm") && l->inputs.size() == 4, muls += l->op == "Mul";
    EXPECT_EQ(gated, f.fused ? 1 : 0) << f.name;
    EXPECT_EQ(muls, f.fused ? 0 : 1) << f.name;
    kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), kiln::test::evaluateReference(ref, in), 1e-5);
  }
}

TEST(Passes, PrecisionConstraintsSurviveFusionAndAreObeyed) {
  // MatMul -> Relu (pinned to float32) -> Softmax: the activation fuses into the MatMul, which
  // inherits the constraint; under float16 with obeyed constraints the fused MatMul keeps float32
  // inputs while the Softmax computes in float16.
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {4, 16});
  Layer* mm = net.addMatMul(x, net.addConstant("w", randomTensor({16, 8}, 3)));
  Layer* relu = net.addActivation(mm->outputs[0], "Relu");
  relu->precision = DataType::kFLOAT;
  Layer* sm = net.addSoftmax(relu->outputs[0], -1);
  net.markOutput(sm->outputs[0]);
  net.topoSort();
  propagateShapes(net, nullptr, true);
  ASSERT_TRUE(fuseActivation(net));
  removeFoldedLayers(net);
  net.topoSort();
  Layer* fused = nullptr;
  for (auto& l : net.layers())
    if (l->op == "MatMul") fused = l.get();
  ASSERT_NE(fused, nullptr);
  ASSERT_TRUE(fused->precision.has_value());
  EXPECT_EQ(*fused->precision, DataType::kFLOAT);
  ASSERT_TRUE(assignPrecision(net, DataType::kHALF, /*obeyConstraints=*/true));
  propagateShapes(net, nullptr, true);
  for (auto& l : net.layers()) {
    if (l->op == "MatMul") EXPECT_EQ(l->inputs[0]->type, DataType::kFLOAT) << "pinned layer computes in float32";
    if (l->op == "Softmax") EXPECT_EQ(l->inputs[0]->type, DataType::kHALF) << "unpinned layer computes in float16";
  }
  // Without obeying, everything goes float16.
  Network net2;
  Tensor* x2 = net2.addInput("x", DataType::kFLOAT, {4, 16});
  Layer* mm2 = net2.addMatMul(x2, net2.addConstant("w", randomTensor({16, 8}, 3)));
  mm2->precision = DataType::kFLOAT;
  net2.markOutput(mm2->outputs[0]);
  propagateShapes(net2, nullptr, true);
  ASSERT_TRUE(assignPrecision(net2, DataType::kHALF, /*obeyConstraints=*/false));
  EXPECT_EQ(mm2->inputs[0]->type, DataType::kHALF);
}

// Compress with a constant condition becomes a Gather of the kept indices (so that backends
// without a Compress kernel, CUDA's, run it), along an axis, a negative axis, and flattened (no
// axis: a Reshape to 1-D first); an all-false condition gives an empty axis. A computed condition
// stays a Compress.
TEST(Passes, ConstantCompressLowersToGather) {
  struct Case {
    std::optional<int64_t> axis;
    std::vector<uint8_t> cond;
  };
  const std::vector<Case> cases = {{1, {1, 0, 1, 1}}, {-3, {0, 1}}, {std::nullopt, {1, 0, 0, 1, 1, 0, 1}}, {2, {0, 0, 0}}};
  for (const Case& c : cases) {
    auto make = [&c](Network& n) {
      Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 4, 3});
      HostTensor cond(DataType::kBOOL, {static_cast<int64_t>(c.cond.size())});
      for (size_t i = 0; i < c.cond.size(); ++i) cond.as<uint8_t>()[i] = c.cond[i];
      Attributes a;
      if (c.axis) a.set("axis", *c.axis);
      Layer* l = n.addLayer("Compress", {n.addActivation(x, "Relu")->outputs[0], n.addConstant("cond", cond)}, 1, a, "compress");
      n.renameTensor(l->outputs[0], "y");
      n.markOutput(l->outputs[0]);
    };
    const std::map<std::string, HostTensor> in = {{"x", randomTensor({2, 4, 3}, 4)}};
    Network ref;
    make(ref);
    auto want = kiln::test::evaluateReference(ref, in);
    Network net;
    make(net);
    net.topoSort();
    net.inferShapes();
    ASSERT_TRUE(lowerConstantCompress(net));
    net.topoSort();
    net.inferShapes();
    int compress = 0, gather = 0;
    for (auto& l : net.layers()) compress += l->op == "Compress", gather += l->op == "Gather";
    EXPECT_EQ(compress, 0);
    EXPECT_EQ(gather, 1);
    auto got = kiln::test::evaluateReference(net, in);
    const HostTensor &g = got.at("y"), &w = want.at("y");
    ASSERT_EQ(g.dims(), w.dims());
    for (int64_t i = 0; i < w.count(); ++i) EXPECT_EQ(g.getDouble(i), w.getDouble(i)) << i;
  }
  Network computed;  // condition computed from an input: left alone
  Tensor* x = computed.addInput("x", DataType::kFLOAT, {4});
  Tensor* cond = computed.addInput("c", DataType::kBOOL, {4});
  Attributes a;
  a.set("axis", int64_t(0));
  computed.markOutput(computed.addLayer("Compress", {x, cond}, 1, a)->outputs[0]);
  EXPECT_FALSE(lowerConstantCompress(computed));
}

// Concat of Slices of one tensor along the Concat's axis (torch.roll as exported) becomes one
// Gather: a roll with a negative start and an INT64_MAX end, a roll on a negative axis, three pieces
// in another order; the values equal an independent roll (np.roll's definition) and the reference
// evaluation of the original graph. Left alone: a step of 2, pieces of two tensors, a Slice over
// another axis than the Concat's.
TEST(Passes, SliceConcatLowersToGather) {
  const Dims shape = {2, 5, 6, 3};
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  struct Piece {
    int64_t start, end, axis, step;
  };
  auto ints = [](Network& n, int64_t v) {
    HostTensor t(DataType::kINT64, {1});
    t.as<int64_t>()[0] = v;
    return n.addConstant(n.uniqueName("c"), t);
  };
  auto build = [&](Network& n, int64_t catAxis, const std::vector<Piece>& pieces, bool twoTensors) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, shape);
    Tensor* a = n.addActivation(x, "Relu")->outputs[0];
    Tensor* b = n.addActivation(x, "Sigmoid")->outputs[0];
    std::vector<Tensor*> parts;
    for (size_t i = 0; i < pieces.size(); ++i) {
      const Piece& p = pieces[i];
      std::vector<Tensor*> in = {twoTensors && i == 1 ? b : a, ints(n, p.start), ints(n, p.end), ints(n, p.axis)};
      if (p.step != 1) in.push_back(ints(n, p.step));
      parts.push_back(n.addLayer("Slice", in, 1)->outputs[0]);
    }
    Attributes at;
    at.set("axis", catAxis);
    Layer* cat = n.addLayer("Concat", parts, 1, at, "cat");
    n.renameTensor(cat->outputs[0], "y");
    n.markOutput(cat->outputs[0]);
  };
  const HostTensor xin = randomTensor(shape, 21);
  const std::map<std::string, HostTensor> in = {{"x", xin}};
  //! Relu(x) rolled by `shift` along `axis`: out[i] = in[(i - shift) mod dim].
  auto rolled = [&](int64_t axis, int64_t shift) {
    HostTensor r(DataType::kFLOAT, shape);
    const int64_t dim = shape[axis];
    int64_t inner = 1;
    for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
    for (int64_t e = 0; e < r.count(); ++e) {
      const int64_t i = e / inner % dim;
      const int64_t src = e + ((((i - shift) % dim) + dim) % dim - i) * inner;
      r.as<float>()[e] = std::max(0.f, xin.as<float>()[src]);
    }
    return r;
  };
  struct Case {
    int64_t catAxis;
    std::vector<Piece> pieces;
    std::optional<std::pair<int64_t, int64_t>> roll;  // axis, shift
  };
  const std::vector<Case> lowered = {
      {1, {{-2, kMax, 1, 1}, {0, -2, 1, 1}}, std::make_pair(int64_t(1), int64_t(2))},
      {-1, {{1, kMax, -1, 1}, {0, 1, -1, 1}}, std::make_pair(int64_t(3), int64_t(-1))},
      {2, {{4, 6, 2, 1}, {0, 1, 2, 1}, {1, 4, 2, 1}}, std::nullopt},
  };
  for (const Case& c : lowered) {
    Network ref;
    build(ref, c.catAxis, c.pieces, false);
    auto want = kiln::test::evaluateReference(ref, in);
    Network net;
    build(net, c.catAxis, c.pieces, false);
    net.topoSort();
    net.inferShapes();
    ASSERT_TRUE(lowerSliceConcat(net));
    removeFoldedLayers(net);  // the Slices, now unread
    net.topoSort();
    net.inferShapes();
    int slices = 0, gathers = 0, concats = 0;
    for (auto& l : net.layers()) slices += l->op == "Slice", gathers += l->op == "Gather", concats += l->op == "Concat";
    EXPECT_EQ(gathers, 1);
    EXPECT_EQ(concats, 0);
    EXPECT_EQ(slices, 0);
    auto got = kiln::test::evaluateReference(net, in);
    const HostTensor &g = got.at("y"), &w = want.at("y");
    ASSERT_EQ(g.dims(), w.dims());
    for (int64_t i = 0; i < w.count(); ++i) EXPECT_EQ(g.getDouble(i), w.getDouble(i)) << i;
    if (c.roll) {
      const HostTensor r = rolled(c.roll->first, c.roll->second);
      for (int64_t i = 0; i < r.count(); ++i) EXPECT_EQ(g.getDouble(i), r.getDouble(i)) << "roll " << i;
    }
  }
  auto untouched = [&](int64_t catAxis, const std::vector<Piece>& pieces, bool twoTensors, const char* what) {
    Network net;
    build(net, catAxis, pieces, twoTensors);
    net.topoSort();
    net.inferShapes();
    EXPECT_FALSE(lowerSliceConcat(net)) << what;
  };
  untouched(1, {{0, 5, 1, 2}, {1, 5, 1, 2}}, false, "step 2");
  untouched(1, {{-2, kMax, 1, 1}, {0, -2, 1, 1}}, true, "pieces of two tensors");
  untouched(1, {{-2, kMax, 1, 1}, {0, kMax, 2, 1}}, false, "a Slice over another axis");
}

// A Concat of strided Slices that takes every phase of one tensor once becomes Reshape +
// Transpose + Reshape: Swin's patch merging (channels last, two Slices per piece), YOLOv5's Focus
// (NCHW, concat on C), one two-axis Slice per piece (strides 3 and 2, as torch.export writes
// them), one strided axis, and the first two with a dynamic batch. The values equal the reference evaluation of the original graph and,
// for Swin's order, the direct definition. Left alone: pieces out of mixed-radix order, a missing
// phase, a Slice that stops short of the end, a strided Concat axis, pieces of two tensors, a
// dynamic dim behind a strided axis.
TEST(Passes, StridedSliceConcatLowersToOneTranspose) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  struct Cut {
    std::vector<int64_t> axes, starts, steps, ends;  // ends empty: to the end
  };
  using Piece = std::vector<Cut>;  // Slices applied in turn
  auto ints = [](Network& n, const std::vector<int64_t>& v) {
    HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.as<int64_t>());
    return n.addConstant(n.uniqueName("c"), t);
  };
  auto build = [&](Network& n, const Dims& shape, int64_t catAxis, const std::vector<Piece>& pieces, bool twoTensors) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, shape);
    Tensor* a = n.addActivation(x, "Relu")->outputs[0];
    Tensor* b = n.addActivation(x, "Sigmoid")->outputs[0];
    std::vector<Tensor*> parts;
    for (size_t i = 0; i < pieces.size(); ++i) {
      Tensor* t = twoTensors && i == 1 ? b : a;
      for (const Cut& c : pieces[i]) {
        const std::vector<int64_t> ends = c.ends.empty() ? std::vector<int64_t>(c.axes.size(), kMax) : c.ends;
        t = n.addLayer("Slice", {t, ints(n, c.starts), ints(n, ends), ints(n, c.axes), ints(n, c.steps)}, 1)->outputs[0];
      }
      parts.push_back(t);
    }
    Attributes at;
    at.set("axis", catAxis);
    Layer* cat = n.addLayer("Concat", parts, 1, at, "cat");
    n.renameTensor(cat->outputs[0], "y");
    n.markOutput(cat->outputs[0]);
  };
  auto two = [](int64_t a0, int64_t o0, int64_t s0, int64_t a1, int64_t o1, int64_t s1) {
    return Piece{Cut{{a0}, {o0}, {s0}, {}}, Cut{{a1}, {o1}, {s1}, {}}};
  };
  struct Case {
    const char* what;
    Dims shape;
    int64_t catAxis;
    std::vector<Piece> pieces;
    Dims declared = {};  // the network input's dims (-1: dynamic); empty: `shape`
  };
  const std::vector<Case> lowered = {
      {"Swin patch merging", {2, 4, 6, 3}, -1,
       {two(1, 0, 2, 2, 0, 2), two(1, 1, 2, 2, 0, 2), two(1, 0, 2, 2, 1, 2), two(1, 1, 2, 2, 1, 2)}},
      {"YOLOv5 Focus", {2, 3, 4, 6}, 1,
       {two(2, 0, 2, 3, 0, 2), two(2, 1, 2, 3, 0, 2), two(2, 0, 2, 3, 1, 2), two(2, 1, 2, 3, 1, 2)}},
      {"one two-axis Slice per piece", {1, 6, 4, 2}, 3,
       {{Cut{{1, 2}, {0, 0}, {3, 2}, {}}}, {Cut{{1, 2}, {0, 1}, {3, 2}, {}}}, {Cut{{1, 2}, {1, 0}, {3, 2}, {}}},
        {Cut{{1, 2}, {1, 1}, {3, 2}, {}}}, {Cut{{1, 2}, {2, 0}, {3, 2}, {}}}, {Cut{{1, 2}, {2, 1}, {3, 2}, {}}}}},
      {"one strided axis", {2, 8, 3}, 2,
       {{Cut{{1}, {0}, {4}, {}}}, {Cut{{1}, {1}, {4}, {}}}, {Cut{{1}, {2}, {4}, {}}}, {Cut{{1}, {3}, {4}, {}}}}},
      {"Swin patch merging, dynamic batch", {3, 4, 6, 3}, -1,
       {two(1, 0, 2, 2, 0, 2), two(1, 1, 2, 2, 0, 2), two(1, 0, 2, 2, 1, 2), two(1, 1, 2, 2, 1, 2)}, {-1, 4, 6, 3}},
      {"YOLOv5 Focus, dynamic batch", {3, 3, 4, 6}, 1,
       {two(2, 0, 2, 3, 0, 2), two(2, 1, 2, 3, 0, 2), two(2, 0, 2, 3, 1, 2), two(2, 1, 2, 3, 1, 2)}, {-1, 3, 4, 6}},
  };
  for (const Case& c : lowered) {
    const HostTensor xin = randomTensor(c.shape, 23);
    const std::map<std::string, HostTensor> in = {{"x", xin}};
    const Dims& declared = c.declared.empty() ? c.shape : c.declared;
    Network ref;
    build(ref, declared, c.catAxis, c.pieces, false);
    auto want = kiln::test::evaluateReference(ref, in);
    Network net;
    build(net, declared, c.catAxis, c.pieces, false);
    net.topoSort();
    net.inferShapes();
    ASSERT_TRUE(lowerStridedSliceConcat(net)) << c.what;
    removeFoldedLayers(net);  // the Slices, now unread
    net.topoSort();
    net.inferShapes();
    int slices = 0, transposes = 0, concats = 0;
    for (auto& l : net.layers()) slices += l->op == "Slice", transposes += l->op == "Transpose", concats += l->op == "Concat";
    EXPECT_EQ(transposes, 1) << c.what;
    EXPECT_EQ(concats, 0) << c.what;
    EXPECT_EQ(slices, 0) << c.what;
    auto got = kiln::test::evaluateReference(net, in);
    const HostTensor &g = got.at("y"), &w = want.at("y");
    ASSERT_EQ(g.dims(), w.dims()) << c.what;
    for (int64_t i = 0; i < w.count(); ++i) EXPECT_EQ(g.getDouble(i), w.getDouble(i)) << c.what << " " << i;
    if (std::string(c.what) == "Swin patch merging") {
      // y[b, i, j, k * C + ch] = relu(x[b, 2i + dh, 2j + dw, ch]), piece k = dh + 2 dw.
      const int64_t H = 4, W = 6, C = 3;
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t i = 0; i < H / 2; ++i)
          for (int64_t j = 0; j < W / 2; ++j)
            for (int64_t k = 0; k < 4; ++k)
              for (int64_t ch = 0; ch < C; ++ch) {
                const int64_t dh = k % 2, dw = k / 2;
                const float v = std::max(0.f, xin.as<float>()[((b * H + 2 * i + dh) * W + 2 * j + dw) * C + ch]);
                EXPECT_EQ(g.as<float>()[((b * (H / 2) + i) * (W / 2) + j) * 4 * C + k * C + ch], v);
              }
    }
  }
  auto untouched = [&](const Dims& shape, int64_t catAxis, const std::vector<Piece>& pieces, bool twoTensors, const char* what) {
    Network net;
    build(net, shape, catAxis, pieces, twoTensors);
    net.topoSort();
    net.inferShapes();
    EXPECT_FALSE(lowerStridedSliceConcat(net)) << what;
  };
  const Dims s = {2, 4, 6, 3};
  untouched(s, -1, {two(1, 0, 2, 2, 0, 2), two(1, 1, 2, 2, 1, 2), two(1, 0, 2, 2, 1, 2), two(1, 1, 2, 2, 0, 2)}, false,
            "pieces out of mixed-radix order");
  untouched(s, -1, {two(1, 0, 2, 2, 0, 2), two(1, 1, 2, 2, 0, 2), two(1, 0, 2, 2, 1, 2)}, false, "a phase missing");
  untouched(s, -1,
            {Piece{Cut{{1}, {0}, {2}, {}}, Cut{{2}, {0}, {2}, {5}}}, two(1, 1, 2, 2, 0, 2), two(1, 0, 2, 2, 1, 2),
             two(1, 1, 2, 2, 1, 2)},
            false, "a Slice whose end is short of the axis (kept: only whole-axis phases are matched)");
  untouched(s, 1, {two(1, 0, 2, 2, 0, 2), two(1, 1, 2, 2, 0, 2), two(1, 0, 2, 2, 1, 2), two(1, 1, 2, 2, 1, 2)}, false,
            "the Concat's axis strided");
  untouched(s, -1, {two(1, 0, 2, 2, 0, 2), two(1, 1, 2, 2, 0, 2), two(1, 0, 2, 2, 1, 2), two(1, 1, 2, 2, 1, 2)}, true,
            "pieces of two tensors");
  untouched({2, 4, -1, 3}, -1, {two(1, 0, 2, 3, 0, 1), two(1, 1, 2, 3, 0, 1)}, false,
            "a dynamic dim behind a strided axis (W, between the strided H and the Concat's C)");
}

// Reshape / Transpose chains with two or more copying Transposes compose into one Transpose
// (MobileViT's unfold; a chain with a Flatten and a default-perm Transpose; two Transposes that
// cancel become a view, no Transpose); values equal the reference evaluation of the original graph.
// Left alone: one copying Transpose (the other moves only dims of 1), a chain whose Reshape
// would cut a dim unevenly (4 read as 3 x ...), which ends the chain after its first Transpose, and
// an empty tensor.
TEST(Passes, TransposeChainsComposeIntoOne) {
  struct Step {
    const char* op;
    std::vector<int64_t> arg;  // Reshape: the shape; Transpose: the perm (empty: the default)
  };
  auto build = [](Network& n, const Dims& shape, const std::vector<Step>& steps) {
    Tensor* t = n.addActivation(n.addInput("x", DataType::kFLOAT, shape), "Relu")->outputs[0];
    for (const Step& s : steps) {
      if (std::string(s.op) == "Reshape") {
        HostTensor d(DataType::kINT64, {static_cast<int64_t>(s.arg.size())});
        std::copy(s.arg.begin(), s.arg.end(), d.as<int64_t>());
        t = n.addLayer("Reshape", {t, n.addConstant(n.uniqueName("shape"), d)}, 1)->outputs[0];
      } else if (std::string(s.op) == "Flatten") {
        Attributes a;
        a.set("axis", s.arg[0]);
        t = n.addLayer("Flatten", {t}, 1, a)->outputs[0];
      } else {
        Attributes a;
        if (!s.arg.empty()) a.set("perm", s.arg);
        t = n.addLayer("Transpose", {t}, 1, a)->outputs[0];
      }
    }
    Layer* out = n.addActivation(t, "Sigmoid");
    n.renameTensor(out->outputs[0], "y");
    n.markOutput(out->outputs[0]);
  };
  struct Case {
    const char* what;
    Dims shape;
    std::vector<Step> steps;
    int transposes;  // after the pass; -1: the pass changes nothing
  };
  const std::vector<Case> cases = {
      {"MobileViT unfold", {1, 8, 4, 6},
       {{"Reshape", {16, 2, 3, 2}}, {"Transpose", {0, 2, 1, 3}}, {"Reshape", {1, 8, 6, 4}}, {"Transpose", {0, 3, 2, 1}},
        {"Reshape", {4, 6, 8}}},
       1},
      {"MobileViT fold", {4, 6, 8},
       {{"Reshape", {1, 4, 6, 8}}, {"Transpose", {0, 3, 2, 1}}, {"Reshape", {16, 3, 2, 2}}, {"Transpose", {0, 2, 1, 3}},
        {"Reshape", {1, 8, 4, 6}}},
       1},
      {"Flatten and a default perm", {2, 3, 4, 5}, {{"Transpose", {0, 2, 3, 1}}, {"Flatten", {2}}, {"Transpose", {}}}, 1},
      {"two Transposes that cancel", {2, 3, 4}, {{"Transpose", {0, 2, 1}}, {"Reshape", {2, 4, 3}}, {"Transpose", {0, 2, 1}}}, 0},
      {"one copying Transpose", {2, 1, 3, 4}, {{"Transpose", {1, 0, 2, 3}}, {"Reshape", {2, 3, 4}}, {"Transpose", {0, 2, 1}}}, -1},
      {"an uneven cut ends the chain", {6, 4}, {{"Transpose", {1, 0}}, {"Reshape", {3, 8}}, {"Transpose", {1, 0}}}, -1},
      {"an empty tensor", {2, 0, 4}, {{"Transpose", {1, 0, 2}}, {"Reshape", {8, -1}}, {"Transpose", {1, 0}}}, -1},
  };
  for (const Case& c : cases) {
    const std::map<std::string, HostTensor> in = {{"x", randomTensor(c.shape, 29)}};
    Network ref;
    build(ref, c.shape, c.steps);
    ref.topoSort();
    ref.inferShapes();
    auto want = kiln::test::evaluateReference(ref, in);
    Network net;
    build(net, c.shape, c.steps);
    net.topoSort();
    net.inferShapes();
    const bool changed = composeTransposes(net);
    EXPECT_EQ(changed, c.transposes >= 0) << c.what;
    net.topoSort();
    net.inferShapes();
    int transposes = 0;
    for (auto& l : net.layers()) transposes += l->op == "Transpose";
    if (c.transposes >= 0) EXPECT_EQ(transposes, c.transposes) << c.what;
    auto got = kiln::test::evaluateReference(net, in);
    const HostTensor &g = got.at("y"), &w = want.at("y");
    ASSERT_EQ(g.dims(), w.dims()) << c.what;
    for (int64_t i = 0; i < w.count(); ++i) EXPECT_EQ(g.getDouble(i), w.getDouble(i)) << c.what << " " << i;
  }
}

// A constant too large for host evaluation still folds through view ops (Identity, Reshape,
// Squeeze, Unsqueeze, Flatten) by sharing its buffer: nothing is copied at build time, and no
// layer is left to copy it at every inference. Other ops on it (here Neg) stay layers.
TEST(Passes, LargeConstantsFoldThroughViewsBySharingTheirBuffer) {
  constexpr int64_t kRows = 2049, kCols = 2048;  // 2^22 + 2048 elements: above the host-evaluation limit
  Network net;
  HostTensor big(DataType::kUINT8, {kRows, kCols});
  std::memset(big.data(), 7, static_cast<size_t>(big.count()));
  Tensor* c = net.addConstant("big", big);
  Tensor* id = net.addLayer("Identity", {c}, 1)->outputs[0];
  HostTensor shape(DataType::kINT64, {3});
  shape.as<int64_t>()[0] = 1, shape.as<int64_t>()[1] = kRows, shape.as<int64_t>()[2] = kCols;
  Tensor* r = net.addLayer("Reshape", {id, net.addConstant("shape", shape)}, 1)->outputs[0];
  Attributes axes;
  axes.set("axis", int64_t(1));
  Tensor* f = net.addLayer("Flatten", {r}, 1, axes)->outputs[0];
  Attributes perm;
  perm.set("perm", std::vector<int64_t>{1, 0});
  Tensor* t = net.addLayer("Transpose", {id}, 1, perm)->outputs[0];  // computed once, at build time
  Tensor* sum = net.addElementWise(t, net.addInput("x", DataType::kUINT8, {kCols, kRows}), "Add")->outputs[0];
  net.markOutput(f);
  net.markOutput(sum);
  net.topoSort();
  propagateShapes(net, nullptr, true);
  ASSERT_TRUE(id->isConstant());
  ASSERT_TRUE(r->isConstant());
  ASSERT_TRUE(f->isConstant());
  EXPECT_EQ(f->value.dims(), (Dims{1, kRows * kCols}));
  EXPECT_EQ(f->value.data(), big.data()) << "the folded views must share the constant's buffer";
  ASSERT_TRUE(t->isConstant());
  EXPECT_EQ(t->value.dims(), (Dims{kCols, kRows}));
  big.as<uint8_t>()[1] = 9;  // W[0][1] -> W^T[1][0]: the fold reads the shared buffer, so set it now and re-fold
  propagateShapes(net, nullptr, true);
  EXPECT_EQ(t->value.as<uint8_t>()[kRows], 9);
  EXPECT_FALSE(sum->isConstant());
  removeFoldedLayers(net);
  ASSERT_EQ(net.nbLayers(), 1);
  EXPECT_EQ(net.layer(0)->op, "Add");
}

// Gather(Shape(x), k) of a static dim of x folds to that dim while x's batch is dynamic (torch's
// tensor_split computes its split sizes so; LocalResponseNorm's If tests such a dim); a dynamic
// dim stays a run-time value.
TEST(Passes, StaticDimsOfAPartlyDynamicShapeFold) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {-1, 5, 7});
  Tensor* shape = net.addLayer("Shape", {x}, 1)->outputs[0];
  Attributes axis0;
  axis0.set("axis", int64_t(0));
  auto gather = [&](int64_t k) {
    HostTensor idx(DataType::kINT64, {1});
    idx.as<int64_t>()[0] = k;
    return net.addLayer("Gather", {shape, net.addConstant("", idx)}, 1, axis0)->outputs[0];
  };
  Tensor* last = gather(-1);
  Tensor* batch = gather(0);
  net.markOutput(net.addLayer("Concat", {last, batch}, 1, axis0)->outputs[0]);
  net.topoSort();
  propagateShapes(net, nullptr, true);
  ASSERT_TRUE(last->value.valid());
  EXPECT_EQ(last->value.dims(), Dims{1});
  EXPECT_EQ(last->value.getInt(0), 7);
  EXPECT_FALSE(batch->value.valid()) << "the dynamic batch is known only at run time";
}

// --fp16: a network output that layers inside the network also read (BERT's last_hidden_state,
// which the pooler gathers from) is cast back to float32 for the caller only: the readers keep the
// float16 tensor, so that a Gemm behind them sees float16 on both operands (it saw A float32, B
// float16 and refused to build: "A and B types differ").
TEST(Passes, ReducedPrecisionOutputReadInsideKeepsItsReaders) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {2, 16});
  Tensor* h = net.addActivation(x, "Relu")->outputs[0];
  net.markOutput(h);
  Attributes g;
  g.set("transB", int64_t(1));
  Layer* gemm = net.addLayer("Gemm", {h, net.addConstant("w", randomTensor({8, 16}, 5))}, 1, g, "gemm");
  net.markOutput(gemm->outputs[0]);
  net.topoSort();
  propagateShapes(net, nullptr, true);
  const std::string hName = h->name;
  ASSERT_TRUE(assignPrecision(net, DataType::kHALF, false));
  propagateShapes(net, nullptr, true);  // threw "A and B types differ"
  EXPECT_EQ(gemm->inputs[0]->type, DataType::kHALF);
  EXPECT_EQ(gemm->inputs[0]->producer->op, "Relu");
  ASSERT_EQ(net.outputs().size(), 2u);
  for (const Tensor* out : net.outputs()) {
    EXPECT_EQ(out->type, DataType::kFLOAT);
    EXPECT_EQ(out->producer->op, "Cast");
  }
  EXPECT_EQ(net.outputs()[0]->name, hName) << "the float32 output keeps the name the caller binds";
}

// --fp16: constants that share one buffer (folded views of shared weights) share the converted
// buffer too, so that the plan stores the float16 weights once.
TEST(Passes, SharedWeightsShareTheirReducedPrecisionCopy) {
  Network net;
  Tensor* x = net.addInput("x", DataType::kFLOAT, {2, 16});
  Tensor* w = net.addConstant("w", randomTensor({16, 16}, 41));
  Tensor* h = net.addMatMul(x, net.addLayer("Identity", {w}, 1)->outputs[0])->outputs[0];
  Tensor* y = net.addMatMul(h, net.addLayer("Identity", {w}, 1)->outputs[0])->outputs[0];
  net.markOutput(y);
  net.topoSort();
  propagateShapes(net, nullptr, true);
  removeFoldedLayers(net);
  ASSERT_TRUE(assignPrecision(net, DataType::kHALF, false));
  removeFoldedLayers(net);
  std::vector<const Tensor*> weights;
  for (auto& l : net.layers())
    if (l->op == "MatMul") weights.push_back(l->inputs[1]);
  ASSERT_EQ(weights.size(), 2u);
  for (const Tensor* t : weights) {
    ASSERT_TRUE(t->isConstant());
    EXPECT_EQ(t->type, DataType::kHALF);
  }
  EXPECT_EQ(weights[0]->value.data(), weights[1]->value.data());
}

// T5 / LLaMA RMSNorm, decomposed by the exporters, becomes one RMSNormalization in each written
// form (x / sqrt, x * (1 / sqrt), x * Reciprocal(sqrt); Pow or x * x; with and without the scale),
// and the fused engine computes what the decomposed network does. A float32 -> float32 Cast in
// front (T5's) and an Identity are elided.
TEST(Passes, RmsNormPatternFuses) {
  for (int form = 0; form < 4; ++form) {
    auto make = [form](Network& n) {
      Tensor* in = n.addInput("x", DataType::kFLOAT, {2, 5, 16});
      Attributes to;
      to.set("to", int64_t(1));
      Tensor* x = n.addLayer("Cast", {n.addLayer("Identity", {in}, 1)->outputs[0]}, 1, to)->outputs[0];
      Tensor* sq = form == 1 ? n.addElementWise(x, x, "Mul")->outputs[0] : n.addElementWise(x, n.addConstant("", scalar(2.f)), "Pow")->outputs[0];
      HostTensor axes(DataType::kINT64, {1});
      axes.as<int64_t>()[0] = -1;
      Tensor* v = n.addLayer("ReduceMean", {sq, n.addConstant("", axes)}, 1)->outputs[0];
      Tensor* s = n.addActivation(n.addElementWise(v, n.addConstant("", scalar(1e-6f)), "Add")->outputs[0], "Sqrt")->outputs[0];
      Tensor* r;
      if (form == 0 || form == 1) r = n.addElementWise(x, s, "Div")->outputs[0];
      else if (form == 2) r = n.addElementWise(x, n.addElementWise(n.addConstant("", scalar(1.f)), s, "Div")->outputs[0], "Mul")->outputs[0];
      else r = n.addElementWise(x, n.addActivation(s, "Reciprocal")->outputs[0], "Mul")->outputs[0];
      Tensor* y = form == 1 ? r : n.addElementWise(n.addConstant("g", randomTensor({16}, 5, 0.5f, 1.5f)), r, "Mul")->outputs[0];
      n.renameTensor(y, "y");
      n.markOutput(y);
    };
    std::string info = checkFusion(make, {{"x", randomTensor({2, 5, 16}, 6)}});
    EXPECT_NE(info.find("\"op\":\"RMSNormalization\""), std::string::npos) << "form " << form << ": " << info;
    for (const char* gone : {"\"op\":\"ReduceMean\"", "\"op\":\"Sqrt\"", "\"op\":\"Cast\"", "\"op\":\"Identity\""})
      EXPECT_EQ(info.find(gone), std::string::npos) << "form " << form << ": " << gone;
  }
}

namespace {
//! A constant int64 vector (pads, starts, ends, axes, steps).
Tensor* ints(Network& n, std::vector<int64_t> v) {
  HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
  for (size_t k = 0; k < v.size(); ++k) t.as<int64_t>()[k] = v[k];
  return n.addConstant("", t);
}
}  // namespace

// Data movement that moves nothing (Swin's Pad to a multiple of the window at 224x224, a full
// Slice, an Expand/Tile to the same dims, an identity Transpose) is elided; a Pad by real pads, a
// reversing Slice (same dims, step -1) and a square Transpose by another perm stay and compute.
TEST(Passes, DataMovementThatMovesNothingIsElided) {
  auto make = [&](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 3, 4, 4});
    Layer* pad0 = n.addLayer("Pad", {x, ints(n, {0, 0, 0, 0, 0, 0, 0, 0})}, 1);
    Layer* full = n.addLayer("Slice", {pad0->outputs[0], ints(n, {0, 0}), ints(n, {4, 100}), ints(n, {2, 3}), ints(n, {1, 1})}, 1);
    Layer* ex = n.addLayer("Expand", {full->outputs[0], ints(n, {1, 3, 1, 4})}, 1);
    Layer* tile = n.addLayer("Tile", {ex->outputs[0], ints(n, {1, 1, 1, 1})}, 1);
    Attributes id;
    id.set("perm", std::vector<int64_t>{0, 1, 2, 3});
    Layer* t0 = n.addLayer("Transpose", {tile->outputs[0]}, 1, id);
    Layer* r = n.addActivation(t0->outputs[0], "Relu");
    // These stay: they move data although the dims are unchanged.
    Layer* rev = n.addLayer("Slice", {r->outputs[0], ints(n, {-1}), ints(n, {-100}), ints(n, {3}), ints(n, {-1})}, 1);
    Attributes sw;
    sw.set("perm", std::vector<int64_t>{0, 1, 3, 2});
    Layer* t1 = n.addLayer("Transpose", {rev->outputs[0]}, 1, sw);
    Layer* pad1 = n.addLayer("Pad", {t1->outputs[0], ints(n, {0, 0, 1, 0, 0, 0, 0, 0})}, 1);
    n.renameTensor(pad1->outputs[0], "y");
    n.markOutput(pad1->outputs[0]);
  };
  const std::string info = checkFusion(make, {{"x", randomTensor({2, 3, 4, 4}, 11)}});
  size_t pads = 0, slices = 0, transposes = 0;
  for (size_t at = info.find("\"op\":\"Pad\""); at != std::string::npos; at = info.find("\"op\":\"Pad\"", at + 1)) ++pads;
  for (size_t at = info.find("\"op\":\"Slice\""); at != std::string::npos; at = info.find("\"op\":\"Slice\"", at + 1)) ++slices;
  for (size_t at = info.find("\"op\":\"Transpose\""); at != std::string::npos; at = info.find("\"op\":\"Transpose\"", at + 1))
    ++transposes;
  EXPECT_EQ(pads, 1u) << info;
  EXPECT_EQ(slices, 1u) << info;
  EXPECT_EQ(transposes, 1u) << info;
  EXPECT_EQ(info.find("\"op\":\"Expand\""), std::string::npos) << info;
  EXPECT_EQ(info.find("\"op\":\"Tile\""), std::string::npos) << info;
}

// With a dynamic batch (a dynamic export of Swin), the zero Pad, the Slice that takes the window
// axes whole and the identity Transpose are still elided; a Slice of the dynamic axis and a crop
// stay. The elided network computes what the original does at batch 3.
TEST(Passes, NoOpDataMovementIsElidedWithADynamicBatch) {
  auto make = [&](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {-1, 4, 4, 3});
    Tensor* p = n.addLayer("Pad", {x, ints(n, {0, 0, 0, 0, 0, 0, 0, 0})}, 1)->outputs[0];
    Tensor* s = n.addLayer("Slice", {p, ints(n, {0, 0}), ints(n, {4, INT64_MAX}), ints(n, {1, -2}), ints(n, {1, 1})}, 1)->outputs[0];
    Attributes id;
    id.set("perm", std::vector<int64_t>{0, 1, 2, 3});
    Tensor* t = n.addLayer("Transpose", {s}, 1, id)->outputs[0];
    Tensor* r = n.addActivation(t, "Relu")->outputs[0];
    Tensor* b = n.addLayer("Slice", {r, ints(n, {0}), ints(n, {2}), ints(n, {0})}, 1)->outputs[0];     // batch: stays
    Tensor* c = n.addLayer("Slice", {b, ints(n, {1}), ints(n, {3}), ints(n, {2})}, 1)->outputs[0];     // a crop: stays
    n.renameTensor(c, "y");
    n.markOutput(c);
  };
  Network net;
  make(net);
  net.topoSort();
  net.inferShapes();
  EXPECT_TRUE(elideNoOps(net));
  EXPECT_EQ(kiln::test::countOps(net, "Pad"), 0);
  EXPECT_EQ(kiln::test::countOps(net, "Transpose"), 0);
  EXPECT_EQ(kiln::test::countOps(net, "Slice"), 2);
  Network ref;
  make(ref);
  const std::map<std::string, HostTensor> in{{"x", randomTensor({3, 4, 4, 3}, 12)}};
  const HostTensor want = kiln::test::evaluateReference(ref, in).at("y"), got = kiln::test::evaluateReference(net, in).at("y");
  ASSERT_EQ(got.dims(), want.dims());
  for (int64_t i = 0; i < want.count(); ++i) EXPECT_EQ(got.as<float>()[i], want.as<float>()[i]) << i;
}

// Concat inputs empty along the Concat's axis (GPT-J's pass-through part x[..., R:] when R is the
// head size) are dropped, and a Concat left with one input goes; a Concat of two non-empty inputs
// keeps them, minus the empty one. Values unchanged.
TEST(Passes, EmptyConcatInputsAreDropped) {
  auto make = [&](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 3, 4});
    Tensor* e = n.addLayer("Slice", {x, ints(n, {4}), ints(n, {INT64_MAX}), ints(n, {-1})}, 1)->outputs[0];  // [2, 3, 0]
    Attributes last;
    last.set("axis", int64_t(-1));
    Tensor* one = n.addLayer("Concat", {n.addActivation(x, "Relu")->outputs[0], e}, 1, last)->outputs[0];
    Tensor* two = n.addLayer("Concat", {e, one, e, x}, 1, last)->outputs[0];  // [2, 3, 8]
    Tensor* y = n.addActivation(two, "Sigmoid")->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  Network net;
  make(net);
  net.topoSort();
  net.inferShapes();
  EXPECT_TRUE(elideNoOps(net));
  net.removeDeadLayers();
  EXPECT_EQ(kiln::test::countOps(net, "Concat"), 1);
  EXPECT_EQ(kiln::test::countOps(net, "Slice"), 0);
  for (auto& l : net.layers())
    if (l->op == "Concat") EXPECT_EQ(l->inputs.size(), 2u);
  Network ref;
  make(ref);
  const std::map<std::string, HostTensor> in{{"x", randomTensor({2, 3, 4}, 13)}};
  kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), kiln::test::evaluateReference(ref, in), 0.0);
}

// A layer read only by Shape layers (T5's K transpose once the attention reads K in place: its
// key_length is read off it) goes: the Shape reads the same dims off the layer's input, checked at
// the profile's samples. A layer with another reader stays. The result is the same at a shape
// that is not a sample.
TEST(Passes, ALayerOnlyShapeReadsGoesTheShapeReadingItsInput) {
  auto make = [&](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {-1, -1, 4, 8});
    Attributes perm;
    perm.set("perm", std::vector<int64_t>{0, 2, 1, 3});
    Tensor* t = n.addLayer("Transpose", {x}, 1, perm)->outputs[0];  // [B, 4, S, 8]
    Attributes tail;
    tail.set("start", int64_t(1));
    Tensor* s = n.addLayer("Shape", {t}, 1, tail)->outputs[0];       // [4, S, 8]
    Attributes toFloat;
    toFloat.set("to", int64_t(1));
    Tensor* y = n.addLayer("Cast", {s}, 1, toFloat)->outputs[0];
    Tensor* z = n.addActivation(n.addLayer("Transpose", {x}, 1, perm)->outputs[0], "Relu")->outputs[0];  // read by Relu too: stays
    Tensor* zs = n.addLayer("Cast", {n.addLayer("Shape", {z}, 1)->outputs[0]}, 1, toFloat)->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
    n.renameTensor(zs, "zs");
    n.markOutput(zs);
    n.renameTensor(z, "z");  // an output: its values are read (a Relu read by Shapes alone would go too)
    n.markOutput(z);
  };
  Network net;
  make(net);
  net.topoSort();
  net.inferShapes();
  InputSamples samples;
  for (auto [b, s] : {std::pair<int64_t, int64_t>{2, 16}, {4, 32}, {1, 1}, {3, 7}}) samples.push_back({{"x", {b, s, 4, 8}}});
  EXPECT_TRUE(readShapesUpstream(net, samples));
  net.topoSort();
  net.inferShapes();
  removeFoldedLayers(net);
  EXPECT_EQ(kiln::test::countOps(net, "Transpose"), 1) << "the transpose read by Shape alone stays";
  Network ref;
  make(ref);
  const std::map<std::string, HostTensor> in{{"x", randomTensor({5, 11, 4, 8}, 12)}};
  for (const char* out : {"y", "zs", "z"}) {
    const HostTensor want = kiln::test::evaluateReference(ref, in).at(out), got = kiln::test::evaluateReference(net, in).at(out);
    ASSERT_EQ(got.dims(), want.dims()) << out;
    for (int64_t i = 0; i < want.count(); ++i) EXPECT_EQ(got.as<float>()[i], want.as<float>()[i]) << out << " " << i;
  }
}

// A dynamic GPT-NeoX's run-time positions read B and S off Q's head view (Shape of Transpose(Reshape(
// Split(qkv)[0], [0, 0, H, D])) gathered at [0, 2]): where every reader of a Shape gathers constant
// positions, only those dims need an upstream match, and the moves repeat through the Reshape and
// the Split (a layer of several outputs, each read by Shapes alone or not at all), so all three go.
// A gathered dim the input lacks (D, position 3) stops the moves at the head Reshape.
TEST(Passes, ShapeReadsMoveThroughHeadViewsToThePackedProjection) {
  constexpr int64_t H = 2, D = 8;
  auto make = [&](Network& n, int64_t position) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {-1, -1, 3 * H * D});
    Attributes last;
    last.set("axis", int64_t(-1));
    Tensor* q = n.addLayer("Split", {x, n.addConstant("", kiln::test::int64Values({H * D, H * D, H * D}))}, 3, last)->outputs[0];
    Tensor* heads = kiln::test::addReshape(n, q, {0, 0, H, D})->outputs[0];
    Tensor* t = kiln::test::addPermute(n, heads, {0, 2, 1, 3})->outputs[0];  // [B, H, S, D]
    Attributes axis0;
    axis0.set("axis", int64_t(0));
    Tensor* dims = n.addLayer("Gather", {n.addLayer("Shape", {t}, 1)->outputs[0],
                                         n.addConstant("", kiln::test::int64Values({0, position}))}, 1, axis0)->outputs[0];
    Attributes toFloat;
    toFloat.set("to", int64_t(1));
    Tensor* y = n.addLayer("Cast", {dims}, 1, toFloat)->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  InputSamples samples;
  for (auto [b, s] : {std::pair<int64_t, int64_t>{2, 16}, {4, 32}, {1, 1}, {3, 7}}) samples.push_back({{"x", {b, s, 3 * H * D}}});
  for (int64_t position : {2, 3}) {
    Network net;
    make(net, position);
    net.topoSort();
    net.inferShapes();
    EXPECT_TRUE(readShapesUpstream(net, samples));
    net.topoSort();
    net.inferShapes();
    removeFoldedLayers(net);
    EXPECT_EQ(kiln::test::countOps(net, "Transpose"), 0) << position;
    EXPECT_EQ(kiln::test::countOps(net, "Reshape"), position == 2 ? 0 : 1) << position;
    EXPECT_EQ(kiln::test::countOps(net, "Split"), position == 2 ? 0 : 1) << position;
    Network ref;
    make(ref, position);
    const std::map<std::string, HostTensor> in{{"x", randomTensor({5, 11, 3 * H * D}, 12)}};
    kiln::test::expectOutputsNear(kiln::test::evaluateReference(net, in), kiln::test::evaluateReference(ref, in), 0.0);
  }
}

// The GroupNorm pattern of a dynamic export (batch and spatial dims unknown, the Reshape back to
// Shape(x) computed at run time) fuses too, its dims compared at the profile's samples; the fused
// network agrees with the pattern at a shape that is not a sample.
TEST(Passes, GroupNormPatternFusesWithDynamicDims) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {-1, 8, -1, -1});
    HostTensor t(DataType::kINT64, {3});
    t.as<int64_t>()[0] = 0, t.as<int64_t>()[1] = 4, t.as<int64_t>()[2] = -1;
    Tensor* r = n.addLayer("Reshape", {x, n.addConstant("", t)}, 1)->outputs[0];
    Tensor* in = n.addLayer("InstanceNormalization", {r, n.addConstant("s", randomTensor({4}, 3, 0.5f, 1.5f)),
                                                      n.addConstant("b", randomTensor({4}, 4))}, 1)->outputs[0];
    Tensor* back = n.addLayer("Reshape", {in, n.addLayer("Shape", {x}, 1)->outputs[0]}, 1)->outputs[0];
    Tensor* g = n.addElementWise(back, n.addConstant("gamma", randomTensor({8, 1, 1}, 5)), "Mul")->outputs[0];
    Tensor* y = n.addElementWise(g, n.addConstant("beta", randomTensor({8, 1, 1}, 6)), "Add")->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  Network net;
  make(net);
  net.topoSort();
  net.inferShapes();
  InputSamples samples;
  for (Dims d : {Dims{2, 8, 5, 3}, Dims{4, 8, 7, 7}, Dims{1, 8, 1, 2}, Dims{3, 8, 4, 9}}) samples.push_back({{"x", d}});
  ASSERT_TRUE(fuseGroupNormPattern(net, samples));
  net.topoSort();
  net.inferShapes();
  removeFoldedLayers(net);
  EXPECT_EQ(kiln::test::countOps(net, "GroupNormalization"), 1);
  EXPECT_EQ(kiln::test::countOps(net, "InstanceNormalization") + kiln::test::countOps(net, "Mul"), 0);
  Network ref;
  make(ref);
  const std::map<std::string, HostTensor> in{{"x", randomTensor({5, 8, 6, 2}, 9, -2.f, 3.f)}};
  const HostTensor want = kiln::test::evaluateReference(ref, in).at("y"), got = kiln::test::evaluateReference(net, in).at("y");
  ASSERT_EQ(got.dims(), want.dims());
  for (int64_t i = 0; i < want.count(); ++i) EXPECT_NEAR(got.as<float>()[i], want.as<float>()[i], 1e-4) << i;
}
