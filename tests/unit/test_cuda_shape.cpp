// CUDA shape family (data movement, index ops, pad, resize) vs the CPU reference kernels.
// Data movement must be bit-exact; resize linear/cubic compares with float tolerances.
#include <random>

#include "op_test_util.h"

namespace kiln {
namespace {

using test::OpCase;

std::string tn(DataType t) { return toString(t); }

HostTensor randomTensor(const Dims& d, DataType t, uint32_t seed, double lo = -4.0, double hi = 4.0) {
  return test::uniformOfType(d, t, seed, lo, hi);
}

HostTensor ints(const std::vector<int64_t>& v, DataType t = DataType::kINT64, Dims d = {}) {
  if (d.empty()) d = {static_cast<int64_t>(v.size())};
  HostTensor h(t, d);
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DataType::kINT64) h.as<int64_t>()[i] = v[i];
    else h.as<int32_t>()[i] = static_cast<int32_t>(v[i]);
  }
  return h;
}

HostTensor floats(const std::vector<float>& v) {
  HostTensor h(DataType::kFLOAT, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) h.as<float>()[i] = v[i];
  return h;
}

void checkCase(Backend& gpu, const OpCase& c, const std::string& what, double rtol = 0, double atol = 0) {
  test::checkAllTactics(gpu, c, what, rtol, atol);
}

const DataType kMoveTypes[] = {DataType::kFLOAT, DataType::kHALF, DataType::kBF16, DataType::kINT64, DataType::kINT8, DataType::kBOOL};

OpCase unary(const std::string& op, HostTensor x, Attributes a = {}) { return test::unaryCase(op, std::move(x), std::move(a)); }

TEST(CudaShape, ReshapeFamilyAndDropout) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (DataType t : kMoveTypes) {
    HostTensor x = randomTensor({3, 5, 7}, t, 1);
    OpCase r = unary("Reshape", x);
    r.inputs.push_back(ints({5, -1}));
    checkCase(*gpu, r, "Reshape");
    checkCase(*gpu, unary("Flatten", x), "Flatten");
    checkCase(*gpu, unary("Identity", x), "Identity");
    OpCase d = unary("Dropout", x);
    d.nbOutputs = 2;
    checkCase(*gpu, d, "Dropout+mask");
    OpCase u = unary("Unsqueeze", x);
    u.inputs.push_back(ints({0, -1}));
    checkCase(*gpu, u, "Unsqueeze");
  }
}

TEST(CudaShape, Transpose) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  struct P { Dims d; std::vector<int64_t> perm; };
  const P cases[] = {{{2, 37, 3, 16}, {0, 2, 1, 3}},     // [B,S,H,D] -> [B,H,S,D] (vector rows)
                     {{2, 3, 37, 16}, {0, 2, 1, 3}},     // back
                     {{3, 67, 45}, {0, 2, 1}},           // tiled inner swap, odd sizes
                     {{129, 33}, {1, 0}},                // tiled 2-D
                     {{2, 5, 7, 9}, {3, 1, 0, 2}},       // general
                     {{1, 17, 1, 19}, {3, 2, 1, 0}},     // size-1 axes
                     {{4, 3, 40, 48}, {0, 2, 3, 1}},     // NCHW -> NHWC
                     {{4, 40, 48, 3}, {0, 3, 1, 2}},     // NHWC -> NCHW
                     {{6}, {0}}};
  for (const P& p : cases)
    for (DataType t : kMoveTypes) {
      Attributes a;
      a.set("perm", p.perm);
      checkCase(*gpu, unary("Transpose", randomTensor(p.d, t, 2), a), "Transpose " + toString(p.d) + " " + tn(t));
    }
  checkCase(*gpu, unary("Transpose", randomTensor({4, 5, 6}, DataType::kFLOAT, 3)), "Transpose default perm");
}

TEST(CudaShape, TransposeTiles) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  // The tiled transpose moves 1- and 2-byte elements as 4-byte words when the row strides allow:
  // both sides, neither (odd strides), input only; partial tiles, several tiles, two batch axes.
  struct P { Dims d; std::vector<int64_t> perm; };
  const P cases[] = {{{2, 34, 66}, {0, 2, 1}},          {{2, 33, 65}, {0, 2, 1}},       {{2, 35, 66}, {0, 2, 1}},
                     {{1, 130, 67}, {0, 2, 1}},         {{1, 200, 129}, {0, 2, 1}},     {{17, 16}, {1, 0}},
                     {{3, 24, 13, 17}, {0, 2, 3, 1}},   {{3, 13, 17, 24}, {0, 3, 1, 2}}, {{2, 3, 40, 50}, {1, 0, 3, 2}},
                     {{2, 96, 56, 56}, {0, 2, 3, 1}}};
  for (const P& p : cases)
    for (DataType t : kMoveTypes) {
      Attributes a;
      a.set("perm", p.perm);
      checkCase(*gpu, unary("Transpose", randomTensor(p.d, t, 21), a), "Transpose tiles " + toString(p.d) + " " + tn(t));
    }
}

TEST(CudaShape, ConcatSplit) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (DataType t : kMoveTypes) {
    for (int64_t axis : {0, 1, -1}) {
      OpCase c;
      c.op = "Concat";
      c.attrs.set("axis", axis);
      Dims a = {3, 4, 8}, b = a, d = a;
      int64_t ax = axis < 0 ? 2 : axis;
      b[ax] = 5;
      d[ax] = 1;
      c.inputs = {randomTensor(a, t, 4), randomTensor(b, t, 5), randomTensor(d, t, 6)};
      checkCase(*gpu, c, "Concat axis " + std::to_string(axis) + " " + tn(t));
    }
    OpCase s;
    s.op = "Split";
    s.attrs.set("axis", int64_t(1));
    s.inputs = {randomTensor({2, 9, 5}, t, 7), ints({2, 0, 7})};
    s.nbOutputs = 3;
    checkCase(*gpu, s, "Split sizes " + tn(t));
    OpCase e;
    e.op = "Split";
    e.attrs.set("axis", int64_t(-1));
    e.attrs.set("num_outputs", int64_t(3));
    e.inputs = {randomTensor({3, 16}, t, 8)};
    e.nbOutputs = 3;
    checkCase(*gpu, e, "Split num_outputs " + tn(t));
  }
}

// DenseNet-style concatenations: more pieces than one segment launch takes (kMaxSegments = 32),
// channel counts that allow 16-byte units and ones that do not, an empty piece, and the
// channels-last case (inner size 1: each piece a short run of every row).
TEST(CudaShape, ConcatSplitManyPieces) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (DataType t : {DataType::kHALF, DataType::kFLOAT, DataType::kINT8}) {
    for (int64_t axis : {1, 3}) {
      OpCase c;
      c.op = "Concat";
      c.attrs.set("axis", axis);
      Dims base = axis == 1 ? Dims{2, 0, 3, 5} : Dims{2, 3, 5, 0};
      for (int i = 0; i < 41; ++i) {
        Dims d = base;
        d[axis] = i == 7 ? 0 : (i % 3 == 0 ? 32 : (i % 3 == 1 ? 8 : 3));
        c.inputs.push_back(randomTensor(d, t, 100 + i));
      }
      checkCase(*gpu, c, "Concat of 41 axis " + std::to_string(axis) + " " + tn(t));
      OpCase s;
      s.op = "Split";
      s.attrs.set("axis", axis);
      std::vector<int64_t> sizes;
      int64_t total = 0;
      for (int i = 0; i < 37; ++i) {
        sizes.push_back(i % 4 == 0 ? 16 : (i % 4 == 1 ? 5 : (i == 2 ? 0 : 8)));
        total += sizes.back();
      }
      Dims d = base;
      d[axis] = total;
      s.inputs = {randomTensor(d, t, 9), ints(sizes)};
      s.nbOutputs = static_cast<int>(sizes.size());
      checkCase(*gpu, s, "Split into 37 axis " + std::to_string(axis) + " " + tn(t));
    }
  }
}

// The GPU layout pass's channel Concat (gpu_layout.cpp): every input and Y stored nhwc, so each
// pixel's channel runs are joined; DenseNet's 32-channel growth (16-byte units), a 12-channel
// piece (8-byte units) and a 3-channel one (2-byte units), more inputs than one segment launch takes.
TEST(CudaShape, ConcatChannelsLast) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (DataType t : {DataType::kHALF, DataType::kBF16}) {
    for (int pieces : {2, 5, 37}) {
      OpCase plain;
      plain.op = "Concat";
      plain.attrs.set("axis", int64_t(pieces == 5 ? -3 : 1));
      for (int i = 0; i < pieces; ++i) {
        const int64_t c = pieces == 5 && i == 2 ? 3 : (pieces == 37 && i == 20 ? 12 : (i % 4 == 3 ? 8 : (i % 4 == 1 ? 24 : 32)));
        plain.inputs.push_back(randomTensor({8, c, 5, 3}, t, 300 + i));
      }
      const HostTensor ref = test::runReference(plain)[0];
      OpCase dev = plain;
      dev.attrs.set("kiln_layout_in", std::string("nhwc"));
      dev.attrs.set("kiln_layout_out", std::string("nhwc"));
      for (HostTensor& x : dev.inputs) x = test::channelsLast(x, true);
      const std::vector<std::string> names = test::tacticNames(*gpu, dev);
      EXPECT_EQ(names.size(), 2u) << "concat_any_copy and concat_any_segments take nhwc";
      for (const std::string& n : names) {
        const HostTensor y = test::channelsLast(test::runTactic(*gpu, n, dev)[0], false);
        test::expectClose(y, ref, 0, 0, "Concat nhwc of " + std::to_string(pieces) + " [" + n + "] " + tn(t));
      }
    }
  }
  // A Concat along another axis never takes the layouts (the pass marks only channel Concats).
  OpCase w;
  w.op = "Concat";
  w.attrs.set("axis", int64_t(2));
  w.attrs.set("kiln_layout_in", std::string("nhwc"));
  w.attrs.set("kiln_layout_out", std::string("nhwc"));
  w.inputs = {randomTensor({8, 8, 2, 2}, DataType::kHALF, 1), randomTensor({8, 8, 3, 2}, DataType::kHALF, 2)};
  EXPECT_TRUE(test::tacticNames(*gpu, w).empty());
}

TEST(CudaShape, Slice) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  struct P { std::vector<int64_t> starts, ends, axes, steps; };
  const P cases[] = {{{1, 2}, {3, 100}, {0, 2}, {1, 1}},
                     {{-1}, {-1000}, {1}, {-1}},             // reversed axis
                     {{0, 7}, {5, 0}, {0, 2}, {2, -3}},      // steps, negative step
                     {{2}, {2}, {2}, {1}},                   // empty
                     {{0}, {8}, {-1}, {1}}};                 // whole: contiguous copy
  for (DataType t : kMoveTypes)
    for (const P& p : cases) {
      OpCase c = unary("Slice", randomTensor({5, 6, 8}, t, 9));
      c.inputs.push_back(ints(p.starts));
      c.inputs.push_back(ints(p.ends));
      c.inputs.push_back(ints(p.axes));
      c.inputs.push_back(ints(p.steps));
      checkCase(*gpu, c, "Slice " + toString(p.starts) + " " + tn(t));
    }
}

TEST(CudaShape, ExpandTile) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (DataType t : kMoveTypes) {
    OpCase e = unary("Expand", randomTensor({3, 1, 5}, t, 10));
    e.inputs.push_back(ints({2, 3, 4, 5}));
    checkCase(*gpu, e, "Expand " + tn(t));
    OpCase e2 = unary("Expand", randomTensor({1, 8}, t, 11));
    e2.inputs.push_back(ints({7, 8}));
    checkCase(*gpu, e2, "Expand rows " + tn(t));
    OpCase tl = unary("Tile", randomTensor({2, 3, 5}, t, 12));
    tl.inputs.push_back(ints({3, 1, 2}));
    checkCase(*gpu, tl, "Tile " + tn(t));
  }
}

TEST(CudaShape, DepthSpace) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kINT8})
    for (const char* mode : {"DCR", "CRD"}) {
      Attributes a;
      a.set("blocksize", int64_t(2));
      a.set("mode", std::string(mode));
      checkCase(*gpu, unary("DepthToSpace", randomTensor({2, 12, 5, 7}, t, 13), a), std::string("DepthToSpace ") + mode);
      checkCase(*gpu, unary("SpaceToDepth", randomTensor({2, 3, 10, 14}, t, 14), a), std::string("SpaceToDepth ") + mode);
      a.set("blocksize", int64_t(3));
      checkCase(*gpu, unary("DepthToSpace", randomTensor({1, 18, 4, 3}, t, 15), a), std::string("DepthToSpace b3 ") + mode);
    }
}

TEST(CudaShape, Gather) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (DataType t : kMoveTypes)
    for (DataType it : {DataType::kINT32, DataType::kINT64})
      for (int64_t axis : {0, 1, 2}) {
        OpCase c;
        c.op = "Gather";
        c.attrs.set("axis", axis);
        c.inputs = {randomTensor({5, 6, 8}, t, 16), ints({0, -1, 3, 2, 4, -5}, it, {2, 3})};
        checkCase(*gpu, c, "Gather axis " + std::to_string(axis) + " " + tn(t));
      }
  // Embedding-style: wide rows (16-byte vectors), scalar index.
  OpCase e;
  e.op = "Gather";
  HostTensor scalarIndex(DataType::kINT64, {});
  *scalarIndex.as<int64_t>() = 42;
  e.inputs = {randomTensor({100, 64}, DataType::kHALF, 17), scalarIndex};
  checkCase(*gpu, e, "Gather scalar index");
}

TEST(CudaShape, GatherElementsAndScatterElements) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (DataType t : kMoveTypes)
    for (int64_t axis : {0, 1}) {
      OpCase g;
      g.op = "GatherElements";
      g.attrs.set("axis", axis);
      g.inputs = {randomTensor({4, 5}, t, 18), ints({0, 3, -1, 2, 1, 1, 0, 2, 3, 2, 0, 1}, DataType::kINT64, {3, 4})};
      checkCase(*gpu, g, "GatherElements " + tn(t));
      // Unique indices along the axis (a permutation), so reduction "none" is deterministic.
      OpCase s;
      s.op = "ScatterElements";
      s.attrs.set("axis", axis);
      std::vector<int64_t> idx = axis == 0 ? std::vector<int64_t>{3, 0, 1, 2, 1, 2, 3, 0} : std::vector<int64_t>{4, 0, 2, 1, 1, 3, 0, 2};
      s.inputs = {randomTensor({4, 5}, t, 19), ints(idx, DataType::kINT32, {2, 4}), randomTensor({2, 4}, t, 20)};
      checkCase(*gpu, s, "ScatterElements " + tn(t));
    }
  for (const char* red : {"add", "mul", "max", "min"})
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16, DataType::kINT64}) {
      OpCase s;
      s.op = "ScatterElements";
      s.attrs.set("axis", int64_t(1));
      s.attrs.set("reduction", std::string(red));
      s.inputs = {randomTensor({3, 4}, t, 21, -2, 2), ints({0, 0, 1, 3, 3, 3, 2, 0, 1}, DataType::kINT64, {3, 3}),
                  randomTensor({3, 3}, t, 22, -2, 2)};
      double tol = t == DataType::kFLOAT ? 1e-6 : (t == DataType::kINT64 ? 0 : 2e-2);
      checkCase(*gpu, s, std::string("ScatterElements ") + red + " " + tn(t), tol, tol);
    }
}

TEST(CudaShape, GatherNDScatterND) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (DataType t : kMoveTypes) {
    OpCase g;
    g.op = "GatherND";
    g.inputs = {randomTensor({4, 5, 8}, t, 23), ints({0, 1, 3, 4, -1, 2}, DataType::kINT64, {3, 2})};
    checkCase(*gpu, g, "GatherND " + tn(t));
    OpCase b;
    b.op = "GatherND";
    b.attrs.set("batch_dims", int64_t(1));
    b.inputs = {randomTensor({3, 5, 6}, t, 24), ints({4, 0, 2, 1, 3, 3}, DataType::kINT64, {3, 2, 1})};
    checkCase(*gpu, b, "GatherND batch_dims " + tn(t));
    OpCase s;
    s.op = "ScatterND";
    s.inputs = {randomTensor({5, 8}, t, 25), ints({3, 0, 4}, DataType::kINT64, {3, 1}), randomTensor({3, 8}, t, 26)};
    checkCase(*gpu, s, "ScatterND rows " + tn(t));
    OpCase e;
    e.op = "ScatterND";
    e.inputs = {randomTensor({5, 7}, t, 27), ints({0, 1, 4, 6, 2, 2}, DataType::kINT64, {3, 2}), randomTensor({3}, t, 28)};
    checkCase(*gpu, e, "ScatterND elements " + tn(t));
  }
  for (const char* red : {"add", "mul", "max", "min"})
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kINT32}) {
      OpCase s;
      s.op = "ScatterND";
      s.attrs.set("reduction", std::string(red));
      s.inputs = {randomTensor({4, 6}, t, 29, -2, 2), ints({1, 1, 3}, DataType::kINT64, {3, 1}), randomTensor({3, 6}, t, 30, -2, 2)};
      double tol = t == DataType::kFLOAT ? 1e-6 : (t == DataType::kINT32 ? 0 : 2e-2);
      checkCase(*gpu, s, std::string("ScatterND ") + red + " " + tn(t), tol, tol);
    }
}

TEST(CudaShape, OneHot) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (int64_t axis : {-1, 0, 1}) {
    OpCase c;
    c.op = "OneHot";
    c.attrs.set("axis", axis);
    HostTensor depth(DataType::kINT64, {});
    *depth.as<int64_t>() = 5;
    c.inputs = {ints({0, 4, -1, 7, 2, -6}, DataType::kINT64, {2, 3}), depth, floats({-1.5f, 2.5f})};
    checkCase(*gpu, c, "OneHot axis " + std::to_string(axis));
    c.inputs[0] = test::convertTo(c.inputs[0], DataType::kFLOAT);
    c.inputs[2] = test::convertTo(c.inputs[2], DataType::kHALF);
    checkCase(*gpu, c, "OneHot float indices, half values");
  }
}

TEST(CudaShape, Pad) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (const char* mode : {"constant", "reflect", "edge", "wrap"})
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kINT64, DataType::kUINT8}) {
      Attributes a;
      a.set("mode", std::string(mode));
      OpCase c = unary("Pad", randomTensor({2, 5, 6}, t, 31), a);
      c.inputs.push_back(ints({0, 2, 3, 1, 3, -1}));
      if (std::string(mode) == "constant") c.inputs.push_back(test::convertTo(floats({2.0f}).reshaped({}), t));
      checkCase(*gpu, c, std::string("Pad ") + mode + " " + tn(t));
      if (std::string(mode) == "constant") {  // constant_value known at build time
        c.constant = {false, true, true};
        checkCase(*gpu, c, "Pad constant (const value)");
      }
      OpCase x = unary("Pad", randomTensor({3, 4}, t, 32), a);  // with axes
      x.inputs.push_back(ints({1, 2}));
      x.inputs.push_back(HostTensor());
      x.inputs.push_back(ints({-1}));
      checkCase(*gpu, x, std::string("Pad axes ") + mode);
    }
}

TEST(CudaShape, TriluRangeConstantShape) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (int64_t upper : {0, 1})
    for (int64_t k : {-2, 0, 3}) {
      OpCase c;
      c.op = "Trilu";
      c.attrs.set("upper", upper);
      HostTensor kv(DataType::kINT64, {});
      *kv.as<int64_t>() = k;
      c.inputs = {randomTensor({2, 5, 7}, DataType::kHALF, 33), kv};
      checkCase(*gpu, c, "Trilu k on device");
      c.constant = {false, true};
      checkCase(*gpu, c, "Trilu k constant");
    }
  checkCase(*gpu, unary("Trilu", randomTensor({6, 4}, DataType::kINT32, 34)), "Trilu no k");
  auto scalar = [](DataType t, double v) {
    HostTensor h(DataType::kDOUBLE, {});
    *h.as<double>() = v;
    return test::convertTo(h, t);
  };
  for (DataType t : {DataType::kFLOAT, DataType::kINT64, DataType::kINT32, DataType::kHALF}) {
    OpCase r;
    r.op = "Range";
    r.inputs = {scalar(t, 3), scalar(t, isInteger(t) ? -40 : -4.3), scalar(t, isInteger(t) ? -3 : -0.37)};
    // float: start + i * delta may be contracted to one FMA by the host compiler (one rounding
    // fewer than the device's explicit multiply-then-add), so allow an ulp.
    double tol = t == DataType::kHALF ? 1e-3 : t == DataType::kFLOAT ? 1e-6 : 0;
    checkCase(*gpu, r, "Range " + tn(t), tol, tol);
  }
  for (DataType t : {DataType::kFLOAT, DataType::kINT64, DataType::kINT8, DataType::kHALF}) {
    OpCase c;
    c.op = "ConstantOfShape";
    c.attrs.set("value", test::convertTo(floats({3.0f}), t));
    c.inputs = {ints({3, 7, 5})};
    checkCase(*gpu, c, "ConstantOfShape " + tn(t));
  }
  OpCase z;
  z.op = "ConstantOfShape";
  z.inputs = {ints({33})};
  checkCase(*gpu, z, "ConstantOfShape default");
  for (const char* op : {"Shape", "Size"}) checkCase(*gpu, unary(op, randomTensor({2, 3, 4}, DataType::kFLOAT, 35)), op);
}

TEST(CudaShape, Resize) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  struct P { const char* mode; const char* coord; std::vector<float> scales; };
  const P cases[] = {{"nearest", "half_pixel", {1, 1, 2, 2}},     {"nearest", "asymmetric", {1, 1, 0.5f, 1.5f}},
                     {"nearest", "align_corners", {1, 1, 3, 0.7f}}, {"linear", "half_pixel", {1, 1, 2, 2}},
                     {"linear", "align_corners", {1, 1, 1.7f, 0.6f}}, {"linear", "pytorch_half_pixel", {1, 1, 0.5f, 3}},
                     {"linear", "asymmetric", {1, 1, 2.5f, 1}},    {"cubic", "half_pixel", {1, 1, 1.5f, 2}},
                     {"linear", "half_pixel_symmetric", {1, 1, 1.3f, 0.8f}}};
  for (const P& p : cases)
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16}) {
      Attributes a;
      a.set("mode", std::string(p.mode));
      a.set("coordinate_transformation_mode", std::string(p.coord));
      OpCase c = unary("Resize", randomTensor({2, 3, 7, 9}, t, 36), a);
      c.inputs.push_back(HostTensor());
      c.inputs.push_back(floats(p.scales));
      double tol = t == DataType::kFLOAT ? 1e-5 : (t == DataType::kHALF ? 4e-3 : 2e-2);
      checkCase(*gpu, c, std::string("Resize ") + p.mode + " " + p.coord + " " + tn(t), tol, tol);
    }
  // sizes, nearest of integers, antialias
  Attributes a;
  a.set("mode", std::string("nearest"));
  a.set("nearest_mode", std::string("round_prefer_ceil"));
  OpCase c = unary("Resize", randomTensor({1, 2, 5, 6}, DataType::kINT64, 37), a);
  c.inputs.push_back(HostTensor());
  c.inputs.push_back(HostTensor());
  c.inputs.push_back(ints({1, 2, 9, 4}));
  checkCase(*gpu, c, "Resize sizes int64");
  Attributes aa;
  aa.set("mode", std::string("linear"));
  aa.set("antialias", int64_t(1));
  OpCase d = unary("Resize", randomTensor({1, 1, 16, 12}, DataType::kFLOAT, 38), aa);
  d.inputs.push_back(HostTensor());
  d.inputs.push_back(floats({1, 1, 0.25f, 0.5f}));
  checkCase(*gpu, d, "Resize antialias", 1e-5, 1e-5);
  // tf_crop_and_resize: a crop reaching outside the image (extrapolation_value there), every mode,
  // and a 2-axis roi with `axes`.
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (DataType t : {DataType::kFLOAT, DataType::kHALF}) {
      Attributes crop;
      crop.set("mode", std::string(mode));
      crop.set("coordinate_transformation_mode", std::string("tf_crop_and_resize"));
      crop.set("extrapolation_value", 2.5f);
      OpCase tf = unary("Resize", randomTensor({1, 2, 6, 7}, t, 42), crop);
      tf.inputs.push_back(floats({0, 0, -0.2f, 0.1f, 1, 1, 0.9f, 1.3f}));
      tf.inputs.push_back(floats({1, 1, 1.5f, 1.2f}));
      const double tol = t == DataType::kFLOAT ? 1e-5 : 4e-3;
      checkCase(*gpu, tf, std::string("Resize tf_crop_and_resize ") + mode + " " + tn(t), tol, tol);
    }
  Attributes crop2;
  crop2.set("mode", std::string("linear"));
  crop2.set("coordinate_transformation_mode", std::string("tf_crop_and_resize"));
  crop2.set("axes", std::vector<int64_t>{3, 2});
  OpCase tf2 = unary("Resize", randomTensor({2, 1, 5, 5}, DataType::kFLOAT, 46), crop2);
  tf2.inputs.push_back(floats({0.3f, 0.1f, 1.1f, 0.8f}));
  tf2.inputs.push_back(HostTensor());
  tf2.inputs.push_back(ints({4, 3}));
  checkCase(*gpu, tf2, "Resize tf_crop_and_resize axes", 1e-5, 1e-5);
  Attributes up;
  up.set("mode", std::string("nearest"));
  OpCase u = unary("Upsample", randomTensor({1, 2, 3, 4}, DataType::kHALF, 39), up);
  u.inputs.push_back(floats({1, 1, 2, 3}));
  checkCase(*gpu, u, "Upsample");
}

TEST(CudaShape, SupportsRefuses) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  Attributes lin;
  lin.set("mode", std::string("linear"));
  OpCase r = unary("Resize", randomTensor({1, 2, 4, 4}, DataType::kINT32, 40), lin);
  r.inputs.push_back(HostTensor());
  r.inputs.push_back(floats({1, 1, 2, 2}));
  EXPECT_TRUE(test::tacticNames(*gpu, r).empty()) << "linear Resize of int32";
  OpCase n = r;
  n.inputs[0] = randomTensor({1, 2, 4, 4}, DataType::kFLOAT, 41);
  n.inputs[2] = floats({2, 1, 2, 2});
  n.constant = {false, false, true};
  EXPECT_TRUE(test::tacticNames(*gpu, n).empty()) << "Resize of the batch axis";
  Attributes mul;
  mul.set("reduction", std::string("mul"));
  OpCase s;
  s.op = "ScatterND";
  s.attrs = mul;
  s.inputs = {randomTensor({4}, DataType::kUINT8, 43), ints({1}, DataType::kINT64, {1, 1}), randomTensor({1}, DataType::kUINT8, 44)};
  EXPECT_TRUE(test::tacticNames(*gpu, s).empty()) << "ScatterND mul of uint8";
  OpCase o;
  o.op = "OneHot";
  HostTensor depth(DataType::kINT64, {});
  *depth.as<int64_t>() = 3;
  o.inputs = {randomTensor({4}, DataType::kUINT8, 45, 0, 3), depth, floats({0, 1})};
  EXPECT_TRUE(test::tacticNames(*gpu, o).empty()) << "OneHot uint8 indices";
}

}  // namespace
}  // namespace kiln
