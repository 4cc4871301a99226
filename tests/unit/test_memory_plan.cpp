// The activation memory planner (runtime/memory_plan.cpp) on random DAGs, with and without
// auxiliary streams: no two tensors whose uses are not ordered share bytes (ordering checked here
// by simulating the streams, independently of the planner's bit sets), the arena is at least the
// planner's lower bound and, summed over the DAGs, close to it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>
#include <tuple>

#include "runtime/engine_graph.h"
#include "runtime/layer_order.h"

using namespace kiln;

namespace {

//! A random DAG over float tensors: Relu/Sigmoid (same dims), Add/Mul of two tensors of the same
//! dims, and MatMul by a constant (a new size). Every layer reads recent tensors mostly, old ones
//! sometimes (long lifetimes, branches); unread tensors become network outputs.
EngineGraph randomGraph(std::mt19937& rng, int layers) {
  EngineGraph g;
  g.device = DeviceType::kGPU;  // aux streams are planned for GPU engines only
  auto newTensor = [&](Dims d) {
    EngineTensor t;
    t.name = "t" + std::to_string(g.tensors.size());
    t.dims = d;
    g.tensors.push_back(t);
    return static_cast<int>(g.tensors.size()) - 1;
  };
  const int in = newTensor({std::uniform_int_distribution<int>(1, 32)(rng), 16});
  g.tensors[in].isInput = true;
  g.inputs.push_back(in);
  std::vector<int> produced = {in};
  std::set<int> read;
  for (int i = 0; i < layers; ++i) {
    auto pick = [&] {
      const int n = static_cast<int>(produced.size());
      std::uniform_int_distribution<int> recent(std::max(0, n - 3), n - 1), any(0, n - 1);
      return produced[(rng() % 4 == 0) ? any(rng) : recent(rng)];
    };
    EngineLayer l;
    l.name = "l" + std::to_string(i);
    const int a = pick();
    l.inputs.push_back(a);
    Dims d = g.tensors[a].dims;
    switch (rng() % 5) {
      case 0: l.op = "Relu"; break;
      case 1: l.op = "Sigmoid"; break;
      case 2:
      case 3: {
        l.op = rng() % 2 ? "Add" : "Mul";
        int b = pick();
        if (g.tensors[b].dims != d) b = a;
        l.inputs.push_back(b);
        break;
      }
      default: {
        l.op = "MatMul";
        const int64_t cols = std::uniform_int_distribution<int>(4, 48)(rng);
        const int w = newTensor({d[1], cols});
        g.tensors[w].value = HostTensor(DataType::kFLOAT, g.tensors[w].dims);
        l.inputs.push_back(w);
        d = {d[0], cols};
      }
    }
    for (int t : l.inputs) read.insert(t);
    l.outputs.push_back(newTensor(d));
    produced.push_back(l.outputs[0]);
    g.layers.push_back(l);
  }
  for (int t : produced)
    if (!read.count(t) && t != in) {
      g.tensors[t].isOutput = true;
      g.outputs.push_back(t);
    }
  return g;
}

//! happens-before by simulation: layer a completes before b starts when b is reachable from a over
//! stream order and event waits (depth-first search, per query).
bool ordered(const EngineGraph& g, int a, int b) {
  std::vector<int> producer(g.tensors.size(), -1);
  for (size_t i = 0; i < g.layers.size(); ++i)
    for (int t : g.layers[i].outputs) producer[t] = static_cast<int>(i);
  std::vector<char> seen(g.layers.size(), 0);
  std::vector<int> stack = {a};
  while (!stack.empty()) {
    const int x = stack.back();
    stack.pop_back();
    for (size_t y = x + 1; y < g.layers.size(); ++y) {
      bool edge = g.layers[y].stream == g.layers[x].stream;  // next on the same stream (any later one)
      for (int t : g.layers[y].inputs) edge = edge || (t >= 0 && producer[t] == x);
      if (!edge || seen[y]) continue;
      if (static_cast<int>(y) == b) return true;
      seen[y] = 1;
      stack.push_back(static_cast<int>(y));
    }
  }
  return false;
}

struct Uses {
  std::vector<int> all, writes;
};

//! No two tensors whose uses are not ordered (by simulation, `ordered`) share arena bytes.
void expectNoLiveSharing(const EngineGraph& g, const ResolvedShapes& r, const MemoryPlan& p, int trial) {
  // Who uses each arena offset range, and is every pair that overlaps ordered?
  std::vector<Uses> uses(g.tensors.size());
  for (size_t i = 0; i < g.layers.size(); ++i) {
    if (r.skipped(i)) continue;
    for (int t : g.layers[i].inputs)
      if (t >= 0) uses[r.aliasOf[t] >= 0 ? r.aliasOf[t] : t].all.push_back(static_cast<int>(i));
    for (int t : g.layers[i].outputs) {
      uses[t].all.push_back(static_cast<int>(i));
      uses[t].writes.push_back(static_cast<int>(i));
    }
  }
  for (size_t a = 0; a < g.tensors.size(); ++a)
    for (size_t b = a + 1; b < g.tensors.size(); ++b) {
      if (p.offsets[a] < 0 || p.offsets[b] < 0 || r.aliasOf[a] >= 0 || r.aliasOf[b] >= 0) continue;
      const int64_t sa = volume(r.tensors[a].dims) * 4, sb = volume(r.tensors[b].dims) * 4;
      const bool overlap = p.offsets[a] < p.offsets[b] + sb && p.offsets[b] < p.offsets[a] + sa;
      if (!overlap) continue;
      // Shared bytes: every use of one before every write of the other, or an in-place pair (the
      // second's producer is the first's last reader).
      auto allBefore = [&](const Uses& x, const Uses& y) {
        for (int u : x.all)
          for (int w : y.writes)
            if (u != w && !ordered(g, u, w)) return false;
        return true;
      };
      const bool ok = allBefore(uses[a], uses[b]) || allBefore(uses[b], uses[a]);
      EXPECT_TRUE(ok) << "trial " << trial << ": tensors " << a << " and " << b << " share bytes while both live";
    }
}

}  // namespace

TEST(MemoryPlan, RandomDagsNeverShareLiveBytesAndStayNearTheLowerBound) {
  std::mt19937 rng(42);
  double arenaSum = 0, boundSum = 0, auxArena = 0, auxBound = 0;
  int graphs = 0, withAux = 0;
  for (int trial = 0; trial < 60; ++trial) {
    EngineGraph g = randomGraph(rng, 8 + trial % 40);
    planStreams(g, trial % 3);  // 0, 1 or 2 auxiliary streams
    withAux += g.auxStreams > 0;
    const ResolvedShapes r = resolveShapes(g, {}, nullptr);
    const MemoryPlan p = planMemory(g, r);
    ++graphs;
    EXPECT_GE(p.arenaBytes, p.lowerBound);
    (g.auxStreams ? auxArena : arenaSum) += static_cast<double>(p.arenaBytes);
    (g.auxStreams ? auxBound : boundSum) += static_cast<double>(p.lowerBound);
    expectNoLiveSharing(g, r, p, trial);
  }
  ASSERT_EQ(graphs, 60);
  EXPECT_GT(withAux, 5);
  std::printf("[ info ] random DAGs: arena / lower bound %.4f on one stream, %.4f with aux streams\n", arenaSum / boundSum,
              auxArena / auxBound);
  // Within 2% of the lower bound in total (issue 19 asks 10%), with or without auxiliary streams
  // (whose bound counts the tensors of concurrent branches).
  EXPECT_LE(arenaSum, 1.02 * boundSum) << "arena " << arenaSum << " vs lower bound " << boundSum;
  EXPECT_LE(auxArena, 1.02 * auxBound) << "aux-stream arena " << auxArena << " vs lower bound " << auxBound;
}

TEST(MemoryPlan, ElementwiseChainRunsInPlace) {
  // x -> Relu -> Sigmoid -> Relu -> y: each intermediate is its input's last reader, so the two
  // intermediates share one block.
  EngineGraph g;
  g.device = DeviceType::kCPU;
  for (int i = 0; i < 4; ++i) {
    EngineTensor t;
    t.name = "t" + std::to_string(i);
    t.dims = {32, 32};
    g.tensors.push_back(t);
  }
  g.tensors[0].isInput = true;
  g.tensors[3].isOutput = true;
  g.inputs = {0};
  g.outputs = {3};
  const char* ops[] = {"Relu", "Sigmoid", "Relu"};
  for (int i = 0; i < 3; ++i) {
    EngineLayer l;
    l.name = "l" + std::to_string(i);
    l.op = ops[i];
    l.inputs = {i};
    l.outputs = {i + 1};
    g.layers.push_back(l);
  }
  ResolvedShapes r = resolveShapes(g, {}, nullptr);
  MemoryPlan p = planMemory(g, r);
  EXPECT_EQ(p.offsets[1], p.offsets[2]);
  EXPECT_EQ(p.arenaBytes, 32u * 32u * 4u);
  EXPECT_EQ(p.lowerBound, p.arenaBytes);
  // A second reader of t1 after the Sigmoid: t2 can no longer overwrite t1.
  EngineLayer extra;
  extra.name = "late_reader";
  extra.op = "Add";
  extra.inputs = {3, 1};
  EngineTensor z;
  z.name = "z";
  z.dims = {32, 32};
  z.isOutput = true;
  g.tensors.push_back(z);
  g.tensors[3].isOutput = false;
  g.outputs = {4};
  extra.outputs = {4};
  g.layers.push_back(extra);
  r = resolveShapes(g, {}, nullptr);
  p = planMemory(g, r);
  EXPECT_NE(p.offsets[1], p.offsets[2]);
}

TEST(MemoryPlan, HostComputedValuesKeepTheirBytesAcrossRuns) {
  // h = Relu(constant) is computed on the host when shapes are resolved and materialized in the
  // arena once per shape change; Add(h, Relu(x)) is h's last reader. Neither an in-place Add nor a
  // later tensor may take h's bytes: the next run reads h again without re-materializing it
  // (BERT's position embeddings with a dynamic sequence gave wrong outputs from the second run on).
  EngineGraph g;
  g.device = DeviceType::kCPU;
  auto tensor = [&](const char* name) {
    EngineTensor t;
    t.name = name;
    t.dims = {32, 32};
    g.tensors.push_back(t);
    return static_cast<int>(g.tensors.size()) - 1;
  };
  const int x = tensor("x"), c = tensor("c"), h = tensor("h"), a = tensor("a"), s = tensor("s"), t = tensor("t"),
            y = tensor("y");
  g.tensors[x].isInput = true;
  g.inputs = {x};
  g.tensors[c].value = HostTensor(DataType::kFLOAT, {32, 32});
  g.tensors[y].isOutput = true;
  g.outputs = {y};
  auto layer = [&](const char* op, std::vector<int> in, int out) {
    EngineLayer l;
    l.name = std::string(op) + std::to_string(g.layers.size());
    l.op = op;
    l.inputs = std::move(in);
    l.outputs = {out};
    g.layers.push_back(l);
  };
  layer("Relu", {c}, h);
  layer("Relu", {x}, a);
  layer("Add", {h, a}, s);
  layer("Sigmoid", {s}, t);
  layer("Relu", {t}, y);
  const ResolvedShapes r = resolveShapes(g, {}, nullptr);
  ASSERT_TRUE(r.tensors[h].value.valid()) << "h is not host-computed: the test does not test anything";
  const MemoryPlan p = planMemory(g, r);
  ASSERT_GE(p.offsets[h], 0);
  const int64_t bytes = 32 * 32 * 4;
  for (int other : {a, s, t}) {
    ASSERT_GE(p.offsets[other], 0);
    EXPECT_TRUE(p.offsets[other] + bytes <= p.offsets[h] || p.offsets[h] + bytes <= p.offsets[other])
        << g.tensors[other].name << " shares bytes with the host-computed value h";
  }
}

namespace {

EngineTensor floatTensor(const std::string& name, Dims d) {
  EngineTensor t;
  t.name = name;
  t.dims = std::move(d);
  return t;
}

int addTensor(EngineGraph& g, EngineTensor t) {
  g.tensors.push_back(std::move(t));
  return static_cast<int>(g.tensors.size()) - 1;
}

int addConstant(EngineGraph& g, const std::string& name, Dims d) {
  EngineTensor t = floatTensor(name, d);
  t.value = HostTensor(DataType::kFLOAT, d);
  return addTensor(g, t);
}

void addLayer(EngineGraph& g, const std::string& name, const std::string& op, std::vector<int> in, std::vector<int> out,
              const std::string& tactic = "") {
  EngineLayer l;
  l.name = name;
  l.op = op;
  l.inputs = std::move(in);
  l.outputs = std::move(out);
  l.choices.push_back(TacticChoice{tactic});
  g.layers.push_back(std::move(l));
}

//! The start of the MatMul graphs below: input x [16, 16] and constants W [16, 64], V [64, 16].
std::tuple<int, int, int> matMulGraphStart(EngineGraph& g, DeviceType device) {
  g.device = device;
  const int x = addTensor(g, floatTensor("x", {16, 16}));
  g.tensors[x].isInput = true;
  g.inputs = {x};
  return {x, addConstant(g, "w", {16, 64}), addConstant(g, "v", {64, 16})};
}

//! x -> 1x1 Conv a -> 1x1 Conv b -> Conv c(b, R = a) -> Relu -> y: [1, 8, 16, 16] float tensors of
//! 8192 bytes. `tactic` runs the residual conv.
EngineGraph residualConvGraph(const std::string& tactic) {
  EngineGraph g;
  g.device = DeviceType::kCPU;
  const Dims d = {1, 8, 16, 16};
  const int x = addTensor(g, floatTensor("x", d));
  g.tensors[x].isInput = true;
  g.inputs = {x};
  const int w = addConstant(g, "w", {8, 8, 1, 1}), bias = addConstant(g, "bias", {8});
  const int a = addTensor(g, floatTensor("a", d)), b = addTensor(g, floatTensor("b", d)), c = addTensor(g, floatTensor("c", d));
  const int y = addTensor(g, floatTensor("y", d));
  g.tensors[y].isOutput = true;
  g.outputs = {y};
  addLayer(g, "conv_a", "Conv", {x, w, bias}, {a}, "conv_f32_onednn");
  addLayer(g, "conv_b", "Conv", {a, w, bias}, {b}, "conv_f32_onednn");
  addLayer(g, "conv_c", "Conv", {b, w, bias, a}, {c}, tactic);
  addLayer(g, "relu", "Relu", {c}, {y});
  return g;
}

}  // namespace

TEST(MemoryPlan, ConvWritesOverItsResidualWhereTheTacticAllowsIt) {
  constexpr size_t kTensor = 8 * 16 * 16 * 4;
  // oneDNN accumulates into Y, which first holds R: c takes a's bytes; a and b live at conv_c.
  EngineGraph g = residualConvGraph("conv_f32_onednn");
  ResolvedShapes r = resolveShapes(g, {}, nullptr);
  MemoryPlan p = planMemory(g, r);
  EXPECT_EQ(p.offsets[3], p.offsets[5]) << "c over its residual a";
  EXPECT_EQ(p.arenaBytes, 2 * kTensor);
  EXPECT_EQ(p.lowerBound, 2 * kTensor);
  // The reference kernel (and cuDNN's, which adds R after writing Y) declares nothing: a, b and
  // c are live at once.
  g = residualConvGraph("ref");
  r = resolveShapes(g, {}, nullptr);
  p = planMemory(g, r);
  EXPECT_NE(p.offsets[3], p.offsets[5]);
  EXPECT_EQ(p.arenaBytes, 3 * kTensor);
  EXPECT_EQ(p.lowerBound, 3 * kTensor);
}

TEST(MemoryPlan, GroupNormWritesOverItsConvOutput) {
  // ResNet-GN's block end: x -> Conv a -> GroupNorm n -> Add(n, x) -> y (x and y outside the
  // arena). The norm reads a group before writing it (backends/in_place.h), so n takes a's bytes:
  // one tensor in the arena, not two.
  constexpr size_t kTensor = 8 * 16 * 16 * 4;
  for (const char* op : {"GroupNormalization", "InstanceNormalization"}) {
    EngineGraph g;
    g.device = DeviceType::kCPU;
    const Dims d = {1, 8, 16, 16};
    const int x = addTensor(g, floatTensor("x", d));
    g.tensors[x].isInput = true;
    g.inputs = {x};
    const int w = addConstant(g, "w", {8, 8, 1, 1}), bias = addConstant(g, "bias", {8});
    const int scale = addConstant(g, "scale", {8}), shift = addConstant(g, "shift", {8});
    const int a = addTensor(g, floatTensor("a", d)), n = addTensor(g, floatTensor("n", d)), y = addTensor(g, floatTensor("y", d));
    g.tensors[y].isOutput = true;
    g.outputs = {y};
    addLayer(g, "conv", "Conv", {x, w, bias}, {a}, "conv_f32_onednn");
    addLayer(g, "norm", op, {a, scale, shift}, {n}, "ref");
    g.layers.back().attrs.set("num_groups", int64_t(2));
    addLayer(g, "add", "Add", {n, x}, {y}, "ref");
    const ResolvedShapes r = resolveShapes(g, {}, nullptr);
    const MemoryPlan p = planMemory(g, r);
    EXPECT_EQ(p.offsets[a], p.offsets[n]) << op << " over its input";
    EXPECT_EQ(p.arenaBytes, kTensor) << op;
  }
}

TEST(MemoryPlan, MemoryAwareOrderFinishesABranchBeforeStartingTheNext) {
  // x[16, 16] -> A1 = x @ W[16, 64] -> A2 = A1 @ V[64, 16]; the same for B; y = A2 + B2. Units of
  // 1 KiB: A1 and B1 are 4, A2 and B2 are 1. The network order A1 B1 A2 B2 Add holds A1 + B1 + A2
  // = 9 at A2; finishing branch A first (A1 A2 B1 B2 Add) peaks at A2 + B1 + B2 = 6.
  EngineGraph g;
  const auto [x, w, v] = matMulGraphStart(g, DeviceType::kCPU);
  const int a1 = addTensor(g, floatTensor("a1", {16, 64})), b1 = addTensor(g, floatTensor("b1", {16, 64}));
  const int a2 = addTensor(g, floatTensor("a2", {16, 16})), b2 = addTensor(g, floatTensor("b2", {16, 16}));
  const int y = addTensor(g, floatTensor("y", {16, 16}));
  g.tensors[y].isOutput = true;
  g.outputs = {y};
  addLayer(g, "A1", "MatMul", {x, w}, {a1});
  addLayer(g, "B1", "MatMul", {x, w}, {b1});
  addLayer(g, "A2", "MatMul", {a1, v}, {a2});
  addLayer(g, "B2", "MatMul", {b1, v}, {b2});
  addLayer(g, "add", "Add", {a2, b2}, {y});
  ResolvedShapes r = resolveShapes(g, {}, nullptr);
  EXPECT_EQ(planMemory(g, r).lowerBound, 9u * 1024);
  EXPECT_EQ(memoryAwareOrder(g, r), (std::vector<int>{0, 2, 1, 3, 4}));
  const LayerOrderChoice c = chooseLayerOrder(g, 0);
  EXPECT_TRUE(c.reordered);
  EXPECT_EQ(c.networkArena, 9u * 1024);
  EXPECT_EQ(c.memoryAwareArena, 6u * 1024);
  std::vector<std::string> names;
  for (const EngineLayer& l : g.layers) names.push_back(l.name);
  EXPECT_EQ(names, (std::vector<std::string>{"A1", "A2", "B1", "B2", "add"}));
  r = resolveShapes(g, {}, nullptr);
  EXPECT_EQ(planMemory(g, r).arenaBytes, 6u * 1024);
  // An order that runs a reader before its producer is refused.
  EXPECT_THROW(reorderLayers(g, {1, 0, 2, 3, 4}), Error);
  EXPECT_THROW(reorderLayers(g, {0, 0, 2, 3, 4}), Error);
}

TEST(MemoryPlan, MemoryAwareOrderOnRandomDagsIsTopologicalAndNeverRaisesTheArena) {
  std::mt19937 rng(7);
  double before = 0, after = 0;
  int reordered = 0;
  for (int trial = 0; trial < 60; ++trial) {
    EngineGraph g = randomGraph(rng, 8 + trial % 40);
    const int aux = trial % 3;
    // chooseLayerOrder throws (reorderLayers) if the order is not topological.
    const LayerOrderChoice c = chooseLayerOrder(g, aux);
    reordered += c.reordered;
    before += static_cast<double>(c.networkArena);
    const ResolvedShapes r = resolveShapes(g, {}, nullptr);
    const MemoryPlan p = planMemory(g, r);
    // The greedy order alone can be worse; the kept one never is.
    EXPECT_EQ(p.arenaBytes, c.reordered ? c.memoryAwareArena : c.networkArena);
    EXPECT_LE(p.arenaBytes, c.networkArena) << "trial " << trial;
    after += static_cast<double>(p.arenaBytes);
    expectNoLiveSharing(g, r, p, trial);
  }
  EXPECT_GT(reordered, 5);
  EXPECT_LT(after, before);
  std::printf("[ info ] memory-aware order: %d of 60 random DAGs reordered, arena total %.0f -> %.0f bytes\n", reordered,
              before, after);
}

TEST(MemoryPlan, LowerBoundCountsTensorsOfConcurrentBranches) {
  // x[16, 16] -> p = x @ W (4 KiB) -> q = p @ V (1 KiB) -> s = q @ W (4 KiB) on the main stream;
  // r = p @ V (1 KiB) -> u = r @ W (4 KiB) on an auxiliary stream (r is p's second reader);
  // y = s + u. In index order the peak is r + s + u = 9 KiB (layer 4). With the branch on its own
  // stream, q and s may be live while r and u are (nothing orders L1/L3 against L2/L4), and p is
  // read by both branches: p, q, r, s and u conflict pairwise, so no arena is below 14 KiB.
  EngineGraph g;
  const auto [x, w, v] = matMulGraphStart(g, DeviceType::kGPU);
  const int p = addTensor(g, floatTensor("p", {16, 64})), q = addTensor(g, floatTensor("q", {16, 16}));
  const int r = addTensor(g, floatTensor("r", {16, 16})), s = addTensor(g, floatTensor("s", {16, 64}));
  const int u = addTensor(g, floatTensor("u", {16, 64})), y = addTensor(g, floatTensor("y", {16, 64}));
  g.tensors[y].isOutput = true;
  g.outputs = {y};
  addLayer(g, "L0", "MatMul", {x, w}, {p});
  addLayer(g, "L1", "MatMul", {p, v}, {q});
  addLayer(g, "L2", "MatMul", {p, v}, {r});
  addLayer(g, "L3", "MatMul", {q, w}, {s});
  addLayer(g, "L4", "MatMul", {r, w}, {u});
  addLayer(g, "L5", "Add", {s, u}, {y});
  planStreams(g, 0);
  ResolvedShapes rs = resolveShapes(g, {}, nullptr);
  MemoryPlan plan = planMemory(g, rs);
  EXPECT_EQ(plan.lowerBound, 9u * 1024);
  EXPECT_EQ(plan.arenaBytes, 9u * 1024);
  planStreams(g, 1);
  ASSERT_EQ(g.auxStreams, 1);
  const std::vector<int> streams = {0, 0, 1, 0, 1, 0};
  for (size_t i = 0; i < g.layers.size(); ++i) ASSERT_EQ(g.layers[i].stream, streams[i]) << g.layers[i].name;
  plan = planMemory(g, rs);
  EXPECT_EQ(plan.lowerBound, 14u * 1024);
  EXPECT_EQ(plan.arenaBytes, 14u * 1024);
}

// A branch whose first layer writes >= 4M elements (enough blocks to fill the GPU alone) stays on
// its producer's stream: an auxiliary stream would gain nothing and keep the tensor both branches
// read live until the join (ResNet's downsample conv beside the block's convs). A small branch
// still gets one; a branch of unknown (dynamic) size too.
TEST(MemoryPlan, BranchesLargeEnoughToFillTheGpuStayOnTheirStream) {
  for (const bool big : {false, true}) {
    EngineGraph g;
    g.device = DeviceType::kGPU;
    const int64_t n = big ? 64 : 1;
    const Dims d = {n, 256, 16, 16};
    const int in = addTensor(g, floatTensor("in", d));
    g.tensors[in].isInput = true;
    g.inputs = {in};
    const int w = addConstant(g, "w", {16, 16});
    const int x = addTensor(g, floatTensor("x", d)), a = addTensor(g, floatTensor("a", d)), b = addTensor(g, floatTensor("b", d));
    const int c = addTensor(g, floatTensor("c", d)), y = addTensor(g, floatTensor("y", d));
    g.tensors[y].isOutput = true;
    g.outputs = {y};
    addLayer(g, "stem", "Relu", {in}, {x});
    addLayer(g, "main", "MatMul", {x, w}, {a});
    addLayer(g, "main2", "MatMul", {a, w}, {b});
    addLayer(g, "branch", "Sigmoid", {x}, {c});  // x's second reader
    addLayer(g, "join", "Add", {b, c}, {y});
    planStreams(g, 0);
    const ResolvedShapes rs = resolveShapes(g, {}, nullptr);
    const size_t serialArena = planMemory(g, rs).arenaBytes;
    planStreams(g, 2);
    EXPECT_EQ(g.layers[3].stream, big ? 0 : 1) << (big ? "64x256x16x16: fills the GPU" : "1x256x16x16");
    EXPECT_EQ(g.auxStreams, big ? 0 : 1);
    // Concurrent, x, a, b and c may all be live at once (nothing orders the branch against main /
    // main2); serial, a is dead once b is written and c may take x's bytes.
    if (big) EXPECT_EQ(planMemory(g, rs).arenaBytes, serialArena);
    else EXPECT_GT(planMemory(g, rs).arenaBytes, serialArena);
    if (big) {
      g.tensors[c].dims = {-1, 256, 16, 16};  // a dynamic batch: size unknown at build
      planStreams(g, 2);
      EXPECT_EQ(g.layers[3].stream, 1) << "dynamic dims";
    }
  }
}
