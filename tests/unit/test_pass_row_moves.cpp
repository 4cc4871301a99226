// The row-move composition pass (compose_row_moves.cpp): chains of data movement that keep the
// last dim in place become one row Gather, and the network computes exactly what it did.
#include <gtest/gtest.h>

#include <functional>

#include "builder/passes/passes.h"
#include "reference_eval.h"

using namespace kiln;
using kiln::test::randomTensor;

namespace {

HostTensor ints(const std::vector<int64_t>& v) { return kiln::test::int64Values(v); }
Tensor* transpose(Network& n, Tensor* x, const std::vector<int64_t>& perm) { return kiln::test::addPermute(n, x, perm)->outputs[0]; }
Tensor* reshape(Network& n, Tensor* x, const std::vector<int64_t>& shape) { return kiln::test::addReshape(n, x, shape)->outputs[0]; }

Tensor* gather(Network& n, Tensor* x, int64_t axis, std::vector<int64_t> idx) {
  Attributes a;
  a.set("axis", axis);
  return n.addLayer("Gather", {x, n.addConstant("", ints(std::move(idx)))}, 1, a)->outputs[0];
}

Tensor* slice(Network& n, Tensor* x, std::vector<int64_t> starts, std::vector<int64_t> ends, std::vector<int64_t> axes,
              std::vector<int64_t> steps) {
  return n.addLayer("Slice", {x, n.addConstant("", ints(starts)), n.addConstant("", ints(ends)), n.addConstant("", ints(axes)),
                              n.addConstant("", ints(steps))},
                    1)
      ->outputs[0];
}

//! torch.roll of `shift` along `axis` of size n, as lower_slice_concat writes it.
std::vector<int64_t> rollIndices(int64_t n, int64_t shift) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(((i - shift) % n + n) % n);
  return v;
}

int count(const Network& n, const std::string& op) { return kiln::test::countOps(n, op); }

//! Builds twice, composes one copy; both must agree exactly. Returns whether the pass changed it.
bool checkComposed(const std::function<void(Network&)>& make, const std::map<std::string, HostTensor>& in,
                   const std::function<void(const Network&)>& inspect = nullptr) {
  Network ref;
  make(ref);
  const auto want = kiln::test::evaluateReference(ref, in);
  Network net;
  make(net);
  net.topoSort();
  net.inferShapes();
  const bool changed = composeRowMoves(net);
  net.topoSort();
  net.inferShapes();
  if (inspect) inspect(net);
  const auto got = kiln::test::evaluateReference(net, in);
  for (const auto& [name, w] : want) {
    const HostTensor& g = got.at(name);
    EXPECT_EQ(g.dims(), w.dims()) << name;
    for (int64_t i = 0; i < w.count(); ++i) EXPECT_EQ(g.getDouble(i), w.getDouble(i)) << name << "[" << i << "]";
  }
  return changed;
}

constexpr int64_t B = 2, Hh = 6, Ww = 6, C = 5, Win = 3;

//! Swin's shifted-window partition: roll both spatial axes, split into Win x Win windows.
Tensor* shiftedWindows(Network& n, Tensor* x) {
  x = gather(n, x, 1, rollIndices(Hh, -1));
  x = gather(n, x, 2, rollIndices(Ww, -1));
  x = reshape(n, x, {B, Hh / Win, Win, Ww / Win, Win, C});
  x = transpose(n, x, {0, 1, 3, 2, 4, 5});
  return reshape(n, x, {B * (Hh / Win) * (Ww / Win), Win * Win, C});
}

}  // namespace

// Swin: roll (two Gathers) + window partition (Reshape / Transpose / Reshape) before a
// per-token op, and the reverse after it: each side becomes one row Gather between Reshapes.
TEST(PassRowMoves, ShiftedWindowPartitionAndMergeBecomeOneGatherEach) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {B, Hh, Ww, C});
    Tensor* w = shiftedWindows(n, x);
    w = n.addActivation(w, "Relu")->outputs[0];  // stands for the window attention (per window)
    w = reshape(n, w, {B, Hh / Win, Ww / Win, Win, Win, C});
    w = transpose(n, w, {0, 1, 3, 2, 4, 5});
    w = reshape(n, w, {B, Hh, Ww, C});
    w = gather(n, w, 1, rollIndices(Hh, 1));
    w = gather(n, w, 2, rollIndices(Ww, 1));
    Tensor* y = n.addElementWise(x, w, "Add")->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  EXPECT_TRUE(checkComposed(make, {{"x", randomTensor({B, Hh, Ww, C}, 1)}}, [](const Network& n) {
    EXPECT_EQ(count(n, "Gather"), 2);
    EXPECT_EQ(count(n, "Transpose"), 0);
  }));
}

// The same with a dynamic batch (a dynamic Swin export: the Reshapes carry -1 / 0 for the batch and
// for batch * windows): each side is still one Gather, over axis 1 of [B, rows, C] with one image's
// map; the merge side's chain starts below the Reshape that splits batch * windows back apart.
// Exact at batch sizes the pass never saw.
TEST(PassRowMoves, ShiftedWindowsWithADynamicBatchBecomeOneGatherEach) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {-1, Hh, Ww, C});
    Tensor* w = gather(n, x, 1, rollIndices(Hh, -1));
    w = gather(n, w, 2, rollIndices(Ww, -1));
    w = reshape(n, w, {-1, Hh / Win, Win, Ww / Win, Win, C});
    w = transpose(n, w, {0, 1, 3, 2, 4, 5});
    w = reshape(n, w, {-1, Win * Win, C});  // [B * windows, ..]
    w = n.addActivation(w, "Relu")->outputs[0];
    w = reshape(n, w, {-1, Hh / Win, Ww / Win, Win, Win, C});
    w = transpose(n, w, {0, 1, 3, 2, 4, 5});
    w = reshape(n, w, {-1, Hh, Ww, C});
    w = gather(n, w, 1, rollIndices(Hh, 1));
    w = gather(n, w, 2, rollIndices(Ww, 1));
    Tensor* y = n.addElementWise(x, w, "Add")->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  for (int64_t b : {1, 3})
    EXPECT_TRUE(checkComposed(make, {{"x", randomTensor({b, Hh, Ww, C}, 4)}}, [](const Network& n) {
      EXPECT_EQ(count(n, "Gather"), 2);
      EXPECT_EQ(count(n, "Transpose"), 0);
    }));
}

// Slices with steps (PatchMerging's x[:, 0::2, 1::2]), a reversing step, Squeeze / Unsqueeze and
// a Gather of a scalar index compose too; the last dim is never moved.
TEST(PassRowMoves, SlicesSqueezesAndScalarGathersCompose) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {B, Hh, Ww, C});
    Tensor* s = slice(n, x, {0, 1}, {INT64_MAX, INT64_MAX}, {1, 2}, {2, 2});  // [B, 3, 3, C]
    s = slice(n, s, {-1}, {INT64_MIN}, {1}, {-1});                            // reversed rows
    s = transpose(n, s, {2, 0, 1, 3});                                        // [3, B, 3, C]
    Attributes a;
    a.set("axis", int64_t(0));
    HostTensor one(DataType::kINT64, {});
    *one.as<int64_t>() = 2;
    s = n.addLayer("Gather", {s, n.addConstant("", one)}, 1, a)->outputs[0];  // [B, 3, C]
    s = n.addLayer("Unsqueeze", {s, n.addConstant("", ints({0}))}, 1)->outputs[0];
    Tensor* y = n.addActivation(s, "Sigmoid")->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  EXPECT_TRUE(checkComposed(make, {{"x", randomTensor({B, Hh, Ww, C}, 2)}}, [](const Network& n) {
    EXPECT_EQ(count(n, "Gather"), 1);
    EXPECT_EQ(count(n, "Slice") + count(n, "Transpose"), 0);
  }));
}

// Moves that cancel out become one Reshape (no copy).
TEST(PassRowMoves, CancellingMovesBecomeAView) {
  auto make = [](Network& n) {
    Tensor* x = n.addInput("x", DataType::kFLOAT, {B, Hh, Ww, C});
    Tensor* t = transpose(n, transpose(n, x, {0, 2, 1, 3}), {0, 2, 1, 3});
    Tensor* y = n.addActivation(t, "Relu")->outputs[0];
    n.renameTensor(y, "y");
    n.markOutput(y);
  };
  EXPECT_TRUE(checkComposed(make, {{"x", randomTensor({B, Hh, Ww, C}, 3)}}, [](const Network& n) {
    EXPECT_EQ(count(n, "Gather") + count(n, "Transpose"), 0);
  }));
}

// Rows narrower than 16 bytes keep their chain (the row map would cost as much as the rows); the
// pass returns (an earlier version rescanned the same layer forever here).
TEST(PassRowMoves, NarrowRowsStay) {
  EXPECT_FALSE(checkComposed(
      [](Network& n) {
        Tensor* x = n.addInput("x", DataType::kFLOAT, {B, Hh, Ww, 3});  // 12-byte rows
        Tensor* t = transpose(n, gather(n, x, 1, rollIndices(Hh, 1)), {0, 2, 1, 3});
        Tensor* y = n.addActivation(t, "Relu")->outputs[0];
        n.renameTensor(y, "y");
        n.markOutput(y);
      },
      {{"x", randomTensor({B, Hh, Ww, 3}, 6)}}));
}

// Left alone: one copy (already one), a Transpose that moves the last dim, a chain whose middle
// tensor has another reader (cut there: each part has one copy), and a network output in a chain
// keeps its own layer.
TEST(PassRowMoves, WhatStays) {
  const std::map<std::string, HostTensor> in{{"x", randomTensor({B, Hh, Ww, C}, 4)}};
  EXPECT_FALSE(checkComposed(
      [](Network& n) {
        Tensor* y = n.addActivation(transpose(n, n.addInput("x", DataType::kFLOAT, {B, Hh, Ww, C}), {0, 2, 1, 3}), "Relu")->outputs[0];
        n.renameTensor(y, "y");
        n.markOutput(y);
      },
      in));
  EXPECT_FALSE(checkComposed(
      [](Network& n) {
        Tensor* t = transpose(n, n.addInput("x", DataType::kFLOAT, {B, Hh, Ww, C}), {0, 3, 1, 2});
        Tensor* y = n.addActivation(gather(n, t, 1, {4, 3, 2, 1, 0}), "Relu")->outputs[0];
        n.renameTensor(y, "y");
        n.markOutput(y);
      },
      in));
  EXPECT_FALSE(checkComposed(
      [](Network& n) {
        Tensor* t = transpose(n, n.addInput("x", DataType::kFLOAT, {B, Hh, Ww, C}), {0, 2, 1, 3});
        Tensor* y = n.addActivation(gather(n, t, 1, rollIndices(Ww, 2)), "Relu")->outputs[0];
        Tensor* z = n.addActivation(t, "Neg")->outputs[0];
        n.renameTensor(y, "y");
        n.markOutput(y);
        n.renameTensor(z, "z");
        n.markOutput(z);
      },
      in));
  EXPECT_FALSE(checkComposed(
      [](Network& n) {
        Tensor* t = transpose(n, n.addInput("x", DataType::kFLOAT, {B, Hh, Ww, C}), {0, 2, 1, 3});
        n.renameTensor(t, "t");
        n.markOutput(t);
        Tensor* y = n.addActivation(gather(n, t, 1, rollIndices(Ww, 2)), "Relu")->outputs[0];
        n.renameTensor(y, "y");
        n.markOutput(y);
      },
      in));
}

// Network::removeDeadLayers with a producer appended after its reader (as a pass adds layers
// before it sorts): both stay. A single backwards sweep dropped the producer and left the reader
// reading a tensor nobody writes (seen while writing the merged-heads lift); the builder now
// also refuses such a network after its passes.
TEST(PassRowMoves, RemoveDeadLayersKeepsProducersListedAfterTheirReaders) {
  Network n;
  Tensor* x = n.addInput("x", DataType::kFLOAT, {2, 3});
  Layer* relu = n.addActivation(x, "Relu");
  Tensor* late = n.addActivation(x, "Neg")->outputs[0];  // listed after its reader below
  relu->inputs[0] = late;
  n.renameTensor(relu->outputs[0], "y");
  n.markOutput(relu->outputs[0]);
  n.removeDeadLayers();
  ASSERT_EQ(n.nbLayers(), 2);
  n.topoSort();
  const auto got = kiln::test::evaluateReference(n, {{"x", randomTensor({2, 3}, 5)}});
  const HostTensor in = randomTensor({2, 3}, 5);
  for (int64_t i = 0; i < in.count(); ++i) EXPECT_EQ(got.at("y").getDouble(i), std::max(0.0, -in.getDouble(i)));
}
